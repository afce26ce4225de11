"""Population stability: how far the rows a model scores have moved from the rows it was
trained on, per column of a party and, at the active party, for the scores.

The population stability index (PSI here means this index only in this module's names:
`stability`, never the private set intersection) of a column over bins 1..B with shares
e_i of the training rows and a_i of the scored rows is

    index = sum_i (a_i - e_i) ln(a_i / e_i),   shares below FLOOR taken as FLOOR

so a bin empty on one side counts, not infinitely. An index of `WATCH` (0.1) or more is
worth watching, of `SHIFT` (0.25) or more a shift (the usual convention).

The bins are fitted on the party's training rows (at most `SAMPLE`, evenly spaced) and
kept in its model part as counts (`StabilityReference`, JSON; never a row):

    numbers   code 0 an empty cell; codes 1..len(edges)+1 the deciles of the training
              values (`bins.fit_binned`: cut halfway between distinct values, a value
              that fills more than a tenth of the rows a bin of its own); right-closed:
              a value equal to an edge falls in the bin below it
    words     code 0 every other word (rare in training, or never seen), code 1 an empty
              cell, codes 2.. the `MAX_WORDS` most frequent training words
    scores    the active party's: the deciles of the final validation's scores (the rows
              held out of training, or the test rows), as numbers

Nothing here leaves the party: what crosses is the summary `summary` builds, as the
party's config shares it (docs/security.md).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field
from vfl.party.tables.preprocess.bins import Binned, fit_binned
from vfl.party.tables.preprocess.fitted import Fitted, Ignored
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.tables.table import RawColumn, RawTable
from vfl.proto import coordinator_pb2 as pb

WATCH, SHIFT = 0.1, 0.25
FLOOR = 1e-4  # a share below it counts as it (an empty bin)
BINS = 10
MAX_WORDS = 10
SAMPLE = 100_000  # training rows the bins are fitted and counted on, at most (evenly spaced)
Share = Literal["counts", "columns", "names"]  # what of a party's columns crosses


class NumericBins(Fitted):
    """A numeric column's (or the scores') bins and their training counts (code 0: an
    empty cell, code 1 + the number of edges below the value otherwise)."""

    name: str
    kind: Literal["numeric"] = "numeric"
    edges: tuple[float, ...] = ()
    counts: tuple[int, ...] = ()

    def codes(self, values: np.ndarray) -> np.ndarray:
        x = np.asarray(values, dtype=np.float64)
        codes = 1 + np.searchsorted(np.asarray(self.edges, dtype=np.float64), x, side="left")
        return np.where(np.isnan(x), 0, codes).astype(np.uint8)


class WordBins(Fitted):
    """A word column's bins and their training counts (code 0: any other word, 1: an
    empty cell, 2 + i: `words[i]`)."""

    name: str
    kind: Literal["words"] = "words"
    words: tuple[str, ...] = ()
    counts: tuple[int, ...] = ()

    def codes(self, column: RawColumn) -> np.ndarray:
        assert column.codes is not None and column.words is not None  # a text column
        index = {w: i + 2 for i, w in enumerate(self.words)}
        lookup = np.array([index.get(w, 0) for w in column.words] + [1], dtype=np.uint8)
        return lookup[np.where(column.codes < 0, len(column.words), column.codes)]


ColumnBins = Annotated[NumericBins | WordBins, Field(discriminator="kind")]


class StabilityReference(Fitted):
    """A party's bins of its columns (in its model's order) and, at the active party, of
    its scores, with the training rows' counts: what a prediction compares against."""

    columns: tuple[ColumnBins, ...] = ()
    scores: NumericBins | None = None

    def codes(self, raw: RawTable) -> np.ndarray:
        """The bin of every cell of `raw` (rows x columns, uint8)."""
        out = np.zeros((raw.rows, len(self.columns)), dtype=np.uint8)
        for j, col in enumerate(self.columns):
            cells = raw.column(col.name)
            if isinstance(col, WordBins):
                out[:, j] = col.codes(cells)
            else:
                assert cells.values is not None  # the model's checks: numbers stay numbers
                out[:, j] = col.codes(cells.values)
        return out

    def indexes(self, codes: np.ndarray) -> dict[str, float]:
        """Each column's index between the training rows and the rows of `codes`."""
        return {
            col.name: index(col.counts, np.bincount(codes[:, j], minlength=len(col.counts)))
            for j, col in enumerate(self.columns)
        }

    def with_scores(self, scores: np.ndarray) -> StabilityReference:
        """This reference with the bins of the scores `scores` (the final validation's)."""
        bins = _numeric("score", scores)
        return self.model_copy(update={"scores": bins})


def fit_reference(raw: RawTable, rows: np.ndarray, pre: Preprocessor) -> StabilityReference:
    """The bins of the columns `pre` feeds the model (a LIBSVM table: none), fitted on
    the training rows `rows` of `raw` (at most `SAMPLE` of them, evenly spaced: a share
    of a bin is then within about 0.001 of all the rows', and a large table's bins take
    a fraction of a second a column)."""
    if pre.sparse is not None:
        return StabilityReference()
    rows = rows[:: -(-len(rows) // SAMPLE) or 1]
    fitted: list[NumericBins | WordBins] = []
    for col in pre.columns:
        if isinstance(col, Ignored):
            continue
        cells = raw.column(col.name)
        if cells.values is not None:
            fitted.append(_numeric(col.name, cells.values[rows]))
        elif cells.codes is not None and cells.words is not None:
            fitted.append(_words(col.name, cells, rows))
    return StabilityReference(columns=tuple(fitted))


def _numeric(name: str, values: np.ndarray) -> NumericBins:
    binned = fit_binned(name, np.asarray(values, dtype=np.float64), BINS)
    edges = binned.edges if isinstance(binned, Binned) else ()
    bins = NumericBins(name=name, edges=edges)
    counts = np.bincount(bins.codes(values), minlength=len(edges) + 2)
    return bins.model_copy(update={"counts": tuple(int(c) for c in counts)})


def _words(name: str, column: RawColumn, rows: np.ndarray) -> WordBins:
    assert column.codes is not None and column.words is not None
    words, held = column.words, column.codes[rows]
    seen = np.bincount(held[held >= 0], minlength=len(words))
    top = sorted(np.flatnonzero(seen), key=lambda i: (-seen[i], words[i]))[:MAX_WORDS]
    bins = WordBins(name=name, words=tuple(words[i] for i in top))
    counts = np.bincount(bins.codes(column)[rows], minlength=len(top) + 2)
    return bins.model_copy(update={"counts": tuple(int(c) for c in counts)})


def index(expected: tuple[int, ...] | np.ndarray, actual: np.ndarray) -> float:
    """The stability index of counts `actual` against training counts `expected` (per
    bin; shares below `FLOOR` taken as it). 0.0 when either side holds no row."""
    e, a = np.asarray(expected, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    if e.sum() == 0 or a.sum() == 0:
        return 0.0
    e, a = np.maximum(e / e.sum(), FLOOR), np.maximum(a / a.sum(), FLOOR)
    return float(np.sum((a - e) * np.log(a / e)))


def level(value: float) -> str:
    """stable, watch (`WATCH` or more) or shift (`SHIFT` or more)."""
    return "shift" if value >= SHIFT else "watch" if value >= WATCH else "stable"


def summary(columns: dict[str, float], share: Share, scores: float | None = None) -> pb.Stability:
    """What crosses of a party's stability: how many of its columns are at each level,
    each column's index when its config shares them (`columns`: under opaque names c1,
    c2, ... in the model's order; `names`: under their names), and the scores' index."""
    levels = [level(v) for v in columns.values()]
    out = pb.Stability(
        columns=len(columns), watch=levels.count("watch"), shift=levels.count("shift")
    )
    if share != "counts":
        for j, (name, value) in enumerate(columns.items(), start=1):
            shown = name if share == "names" else f"c{j}"
            out.shared.add(column=shown, index=value, level=level(value))
    if scores is not None:
        out.scores.CopyFrom(pb.ColumnStability(column="score", index=scores, level=level(scores)))
    return out
