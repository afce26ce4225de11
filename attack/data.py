"""The active party's table with its labels permuted, for the runs that need one (the
distinguisher's second run, the permuted-label control): the same file, format, ids and
features, the label column shuffled by a seeded permutation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from vfl.attack.errors import DataError
from vfl.contract.spec import TableSource


def permuted_labels(source: TableSource, folder: Path, seed: int = 0) -> TableSource:
    """A copy of `source` in `folder` whose labels are permuted (csv, parquet, libsvm).

    Raises:
        DataError: the table has no label or is not a file of those formats.
    """
    if not source.label:
        raise DataError("the active party's table names no label column to permute")
    path = Path(source.path)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"permuted-{path.name}"
    rng = np.random.default_rng([seed, 13])
    if source.format == "libsvm":
        _libsvm(path, out, rng)
    elif source.format in ("csv", "parquet"):
        _columnar(path, out, source.format, source.label, rng)
    else:
        raise DataError(f"cannot permute the labels of a {source.format} table; use a file")
    return source.model_copy(update={"path": str(out)})


def _columnar(path: Path, out: Path, fmt: str, label: str, rng: np.random.Generator) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(path) if fmt == "csv" else pq.read_table(path)
    if label not in table.column_names:
        raise DataError(f"the active party's table has no column '{label}'")
    at = table.column_names.index(label)
    shuffled = table.column(label).take(rng.permutation(table.num_rows))
    table = table.set_column(at, label, shuffled)
    if fmt == "csv":
        pacsv.write_csv(table, out)
    else:
        pq.write_table(table, out)


def _libsvm(path: Path, out: Path, rng: np.random.Generator) -> None:
    """LIBSVM lines `[@id] label idx:val ...`: the label tokens permuted."""
    lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
    at = [1 if tokens[0].startswith("@") else 0 for tokens in lines]
    labels = [tokens[i] for tokens, i in zip(lines, at, strict=True)]
    order = rng.permutation(len(labels))
    for tokens, i, j in zip(lines, at, order, strict=True):
        tokens[i] = labels[j]
    out.write_text("\n".join(" ".join(tokens) for tokens in lines) + "\n")
