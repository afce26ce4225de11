"""LIBSVM files (a9a split files) as a `RawTable` whose features stay a CSR matrix
(`scipy.sparse`) from the file on.

A dataset of `format: libsvm` names its id with `id`: "auto" (a leading `@7`/`7` token is
the id, otherwise the line number), "line" or "first"; any `label` means the file carries
a label token. Only the columns that occur in the file are held (named by their index,
`f<index>`), so a table of 1e6 hashed columns takes memory in proportion to its nonzeros,
never rows x columns. A feature index is a whole number from 0 to `MAX_INDEX` (what an
int64 holds). A malformed line raises `DataError` naming the file and line.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.reader.buffers import IDS
from vfl.party.tables.table import RawTable

MAX_INDEX = (1 << 63) - 1  # a feature index: what the reader's int64 columns hold
CHECK_LINES = 1 << 16  # lines read between two calls of a reader's check


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_libsvm(
    path: Path, cfg: TableSource, name: str, check: Callable[[int, int], None] | None = None
) -> RawTable:
    """Dataset `name`'s LIBSVM file at `path` as a `RawTable` of a CSR matrix of the
    columns that occur in the file (memory O(nonzeros)). `check`: called every
    `CHECK_LINES` lines and at the end with the bytes (about: characters) and rows read so
    far (it may raise: the party's limits guard).

    Raises:
        DataError: a line with other leading tokens than the id and label settings say, a
            label that is not a number, a token that is not an `index:value` pair, a
            feature index that is not a whole number from 0 to `MAX_INDEX`.
        Exception: what `check` raises (a job the party's limits guard failed).
    """
    ids: list[str] = []
    labels = array("d")
    indptr, cols, vals = array("q", [0]), array("q"), array("f")
    has_label = bool(cfg.label)
    read = 0
    with path.open() as fh:
        for line_no, line in enumerate(fh):
            read += len(line)
            if check is not None and line_no % CHECK_LINES == 0:
                check(read, len(ids))
            tokens = line.split()
            if not tokens:
                continue
            lead = 0
            while lead < len(tokens) and ":" not in tokens[lead]:
                lead += 1
            rid, label = _libsvm_lead(tokens[:lead], line_no, has_label, cfg, name, path)
            ids.append(rid)
            if has_label:
                labels.append(label)
            for tok in tokens[lead:]:
                c, v = _libsvm_entry(tok, line_no, name, path)
                cols.append(c)
                vals.append(v)
            indptr.append(len(cols))
    if check is not None:
        check(read, len(ids))
    index = np.frombuffer(cols, dtype=np.int64) if cols else np.zeros(0, dtype=np.int64)
    used, inverse = np.unique(index, return_inverse=True)  # the columns that occur
    feats = sp.csr_matrix(
        (
            np.frombuffer(vals, dtype=np.float32) if vals else np.zeros(0, np.float32),
            inverse.astype(np.int32),
            np.frombuffer(indptr, dtype=np.int64),
        ),
        shape=(len(ids), len(used)),
    )
    feats.sum_duplicates()  # a repeated index in a line adds up, as in a sum of one-hots
    names = tuple(f"f{int(i)}" for i in used)  # as the file numbers them (0- or 1-based)
    return RawTable(
        name,
        np.array(ids, dtype=IDS),
        np.frombuffer(labels, dtype=np.float64).copy() if has_label else None,
        (),
        sparse=feats,
        sparse_names=names,
    )


def _libsvm_lead(lead, line_no, has_label, cfg, name, path) -> tuple[str, float]:
    want_id = (
        cfg.id == "first"
        or (cfg.id == "auto" and len(lead) == 1 + has_label)
        or (cfg.id == "auto" and lead and lead[0].startswith("@"))
    )
    if cfg.id == "line":
        want_id = False
    expected = int(want_id) + int(has_label)
    if len(lead) != expected:
        settings = f"(id: {cfg.id}, label: {'yes' if has_label else 'no'})"
        raise DataError(
            f"dataset '{name}': line {line_no + 1} of '{path}' has {len(lead)} leading "
            f"token(s) before the features, expected {expected} {settings}; check the "
            "dataset's 'id' and 'label' settings",
            public=f"dataset '{name}': a line has {len(lead)} leading token(s) before the "
            f"features, expected {expected} {settings}; check its 'id' and 'label' settings",
        )
    rid = lead[0].lstrip("@") if want_id else str(line_no)
    label = 0.0
    if has_label:
        text = lead[-1]
        if not _is_float(text):
            raise DataError(
                f"dataset '{name}': label {text!r} at line {line_no + 1} of "
                f"'{path}' is not a number",
                public=f"dataset '{name}': a label is not a number",
            )
        label = float(text)
    return rid, label


def _libsvm_entry(tok: str, line_no: int, name: str, path: Path) -> tuple[int, float]:
    idx, colon, val = tok.partition(":")
    if not colon or not idx or not _is_float(val):
        raise DataError(
            f"dataset '{name}': '{tok}' at line {line_no + 1} of '{path}' is not a "
            "LIBSVM 'index:value' pair",
            public=f"dataset '{name}': a token is not a LIBSVM 'index:value' pair",
        )
    if not (idx.isascii() and idx.isdigit()):
        raise DataError(
            f"dataset '{name}': feature index {idx!r} at line {line_no + 1} of '{path}' is "
            f"not a non-negative integer; write each feature's index as a whole number from "
            f"0 to {MAX_INDEX}",
            public=f"dataset '{name}': a LIBSVM feature index is not a non-negative integer",
        )
    index = int(idx)
    if index > MAX_INDEX:
        raise DataError(
            f"dataset '{name}': feature index {idx!r} at line {line_no + 1} of '{path}' is "
            f"beyond the largest the reader holds ({MAX_INDEX}); number the features from "
            "0 or 1 (hash them into fewer buckets)",
            public=f"dataset '{name}': a LIBSVM feature index is beyond the largest the "
            "reader holds",
        )
    return index, float(val)
