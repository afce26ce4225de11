"""One typed table reader: a dataset's CSV or Parquet file as typed columns (pyarrow).

`read_table` reads a `TableSource` of format `csv` (a header row; parsed by
`pyarrow.csv`, multi-threaded, straight into typed column buffers) or `parquet` (a file or
a folder of `.parquet` files) into a `ReadTable` (`party.columns`). Ids are read as text
("007" stays "007"). With `typed` (what training loads) the label and feature columns are
parsed as float64 and the categorical columns as text, to become integer codes; without
it (`vfl data describe`) each column's type is inferred.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.columns import ReadTable
from vfl.party.errors import DataError

__all__ = ["ReadTable", "read_table"]


def read_table(source: TableSource, name: str, typed: bool = False) -> ReadTable:
    """Read dataset `name` (csv or parquet); `typed`: label and features as float64,
    categorical columns as text (see the module docstring).

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or
            categorical column, a row with another number of cells than the header.
    """
    path = existing(source, name)
    if source.format == "parquet":
        read = _read_parquet(path, name)
    elif source.format == "csv":
        read = _read_csv(path, source, name, typed)
    else:
        raise DataError(
            f"dataset '{name}': the table reader reads csv or parquet, not '{source.format}'"
        )
    read.column(source.id, "id")
    if source.label:
        read.column(source.label, "label")
    for column in source.categorical or ():
        read.column(column, "categorical")
    return read


def existing(source: TableSource, name: str) -> Path:
    """The path of dataset `name`'s file (for Parquet, a file or a folder).

    Raises:
        DataError: it does not exist (names the path; its public form does not).
    """
    path = Path(source.path)
    if path.is_file() or (source.format == "parquet" and path.is_dir()):
        return path
    raise DataError(
        f"dataset '{name}': file '{source.path}' does not exist; fix the path in the "
        "party config (or the job spec for `vfl run`)",
        public=f"dataset '{name}': its file does not exist; the party must fix its config",
    )


def _read_parquet(path: Path, name: str) -> ReadTable:
    """A Parquet file, or a folder of them (read as one table, in file-name order)."""
    try:
        data = pq.read_table(path, partitioning=None)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"dataset '{name}': '{path}' cannot be read as Parquet ({exc}); give a .parquet "
            "file or a folder of them",
            public=f"dataset '{name}': its file cannot be read as Parquet",
        ) from None
    header = tuple(n.strip() for n in data.column_names)
    return ReadTable(name, str(path), header, data.rename_columns(list(header)), csv=False)


def _read_csv(path: Path, source: TableSource, name: str, typed: bool) -> ReadTable:
    with path.open(newline="") as fh:
        first = next(csv.reader(fh), None)
    if not first:
        raise DataError(
            f"dataset '{name}': '{path}' is empty; a header row is needed",
            public=f"dataset '{name}': its file is empty; a header row is needed",
        )
    header = tuple(h.strip() for h in first)
    types: dict[str, pa.DataType] = {h: pa.float64() for h in header} if typed else {}
    types.update({c: pa.string() for c in (*(source.categorical or ()), source.id or "id")})
    try:
        data = _parse_csv(path, header, types, typed)
    except pa.ArrowInvalid as exc:
        if "columns, got" in str(exc):
            _ragged(path, len(header), name)
        if "conversion error" not in str(exc):
            raise DataError(
                f"dataset '{name}': '{path}' cannot be read as CSV ({exc})",
                public=f"dataset '{name}': its file cannot be read as CSV",
            ) from None
        # a cell that is not a number: as text, so that `floats` names it and its line
        data = _parse_csv(path, header, {h: pa.string() for h in header}, typed)
    return ReadTable(name, str(path), header, data, csv=True)


def _parse_csv(
    path: Path, header: tuple[str, ...], types: dict[str, pa.DataType], typed: bool
) -> pa.Table:
    """Typed: only an empty cell is missing (preprocess: none); else also the usual
    markers of a missing value (NA, N/A, NULL, nan, ...), in text columns too."""
    convert = (
        pacsv.ConvertOptions(column_types=types, null_values=[""])
        if typed
        else pacsv.ConvertOptions(column_types=types, strings_can_be_null=True)
    )
    return pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=list(header), skip_rows=1),
        convert_options=convert,
    )


def _ragged(path: Path, cells: int, name: str) -> None:
    """Raise for the first row whose number of cells is not the header's."""
    with path.open(newline="") as fh:
        rows = (r for r in csv.reader(fh) if r)
        next(rows)
        for n, row in enumerate(rows):
            if len(row) != cells:
                raise DataError(
                    f"dataset '{name}': line {n + 2} of '{path}' has {len(row)} cells, the "
                    f"header has {cells}; fix the row",
                    public=f"dataset '{name}': a row has another number of cells than the header",
                )
