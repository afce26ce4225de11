"""One typed table reader: a dataset's CSV or Parquet file as typed columns (pyarrow).

`read_table` reads a `TableSource` of format `csv` (a header row; parsed by
`pyarrow.csv`, multi-threaded, straight into typed column buffers) or `parquet` (a file or
a folder of `.parquet` files). Ids are read as text ("007" stays "007"). With `typed`
(what training loads) the label and feature columns are parsed as float64 and the
categorical columns as text, to become integer codes; without it (`vfl data describe`)
each column's type is inferred. A `ReadTable` gives a column as numbers (`floats`),
integer codes (`codes`) or its inferred kind (`kind`), and every malformed value raises
`DataError` naming the dataset, column and line (its public form names neither). Only an
empty cell is missing: "nan" is a number (NaN), as Python's `float` reads it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError

Kind = Literal["numeric", "text", "empty"]


@dataclass(frozen=True)
class ReadTable:
    """The columns of dataset `name`'s file at `path`, named by its (stripped) header."""

    name: str
    path: str
    header: tuple[str, ...]
    data: pa.Table
    csv: bool  # lines are numbered (header = line 1); Parquet rows from 1

    @property
    def rows(self) -> int:
        return self.data.num_rows

    def where(self, row: int) -> str:
        """Where data row `row` (from 0) is in the file: 'line 7' (CSV) or 'row 6'."""
        return f"line {row + 2}" if self.csv else f"row {row + 1}"

    def ids(self, col: int) -> np.ndarray:
        """Column `col` as stripped text ids (dtype object)."""
        ids = self.data.column(col)
        if not pa.types.is_string(ids.type):
            ids = pc.cast(ids, pa.string())
        return pc.fill_null(pc.utf8_trim_whitespace(ids), "").to_numpy(zero_copy_only=False)

    def floats(self, col: int) -> np.ndarray:
        """Column `col` as float64; every cell must be a number.

        Raises:
            DataError: an empty cell or a word, naming the column, value and line.
        """
        values = _numbers(self.data.column(col))
        if values is not None and not values.mask.any():
            return values.data
        cells = self.data.column(col).to_pylist()
        out = np.empty(len(cells), dtype=np.float64)
        for r, cell in enumerate(cells):
            try:
                out[r] = float("" if cell is None else cell)
            except (TypeError, ValueError):
                raise DataError(
                    f"dataset '{self.name}': column '{self.header[col]}' has the non-numeric "
                    f"value {_text(cell)!r} at {self.where(r)}; features must be numbers "
                    "(encode categories as integers, fill empty cells)",
                    public=f"dataset '{self.name}': a column holds a value that is not a number",
                ) from None
        return out

    def codes(self, col: int) -> np.ndarray:
        """Column `col` as int64 codes; every cell must be an integer.

        Raises:
            DataError: a cell that is not an integer, naming the column, value and line.
        """
        column = self.data.column(col)
        if pa.types.is_integer(column.type) and not column.null_count:
            return column.to_numpy().astype(np.int64)
        if pa.types.is_string(column.type):
            try:
                return pc.cast(pc.utf8_trim_whitespace(column), pa.int64()).to_numpy()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass  # each cell as Python reads it, to name the first that is not a code
        cells = column.to_pylist()
        out = np.empty(len(cells), dtype=np.int64)
        for r, cell in enumerate(cells):
            try:
                out[r] = _code(cell)
            except (TypeError, ValueError):
                raise DataError(
                    f"dataset '{self.name}': categorical column '{self.header[col]}' has "
                    f"{_text(cell)!r} at {self.where(r)}; categorical values must be integer "
                    "codes (hash or label-encode them)",
                    public=f"dataset '{self.name}': a categorical column holds a value that "
                    "is not an integer code",
                ) from None
        return out

    def kind(self, col: int) -> Kind:
        """numeric (every present cell a number), text, or empty (no cell present)."""
        values = _numbers(self.data.column(col))
        if values is None:
            return "text"
        return "empty" if values.mask.all() else "numeric"

    def numbers(self, col: int) -> np.ma.MaskedArray | None:
        """Column `col` as float64, empty cells masked; None for a text column."""
        return _numbers(self.data.column(col))

    def column(self, column: str | None, what: str) -> int:
        """The index of header column `column` (`what`: id, label, categorical).

        Raises:
            DataError: no such column; lists the header.
        """
        if column not in self.header:
            shown = f"{', '.join(self.header[:12])}{', ...' if len(self.header) > 12 else ''}"
            raise DataError(
                f"dataset '{self.name}': {what} column '{column}' is not in the header "
                f"({shown}); set '{what}' to one of these columns",
                public=f"dataset '{self.name}': its header has no such {what} column; check "
                f"the dataset's '{what}' setting",
            )
        return self.header.index(column)


def _numbers(column: pa.ChunkedArray) -> np.ma.MaskedArray | None:
    """A column as float64 with missing cells (null, empty text) masked, or None when a
    present cell is not a number."""
    kind = column.type
    if pa.types.is_null(kind):
        return np.ma.masked_all(len(column), dtype=np.float64)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = pc.utf8_trim_whitespace(column)
        column = pc.if_else(pc.equal(text, ""), pa.scalar(None, text.type), text)
        try:
            column = pc.cast(column, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        if not pa.types.is_boolean(kind):
            return None
    values = pc.cast(column, pa.float64()).to_numpy()  # nulls as NaN
    missing = pc.is_null(column).to_numpy(zero_copy_only=False)
    return np.ma.MaskedArray(values, mask=missing)


def _code(cell: object) -> int:
    if isinstance(cell, float) and not cell.is_integer():
        raise ValueError(cell)
    return int("" if cell is None else cell)  # type: ignore[call-overload]


def _text(cell: object) -> str:
    return "" if cell is None else str(cell)


def read_table(source: TableSource, name: str, typed: bool = False) -> ReadTable:
    """Read dataset `name` (csv or parquet); `typed`: label and features as float64,
    categorical columns as text (see the module docstring).

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or
            categorical column, a row with another number of cells than the header.
    """
    path = Path(source.path)
    if source.format == "parquet":
        if not path.exists():
            _missing(source, name)
        read = _read_parquet(path, name)
    elif source.format == "csv":
        if not path.is_file():
            _missing(source, name)
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


def _missing(source: TableSource, name: str) -> None:
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
        data = _parse_csv(path, header, types)
    except pa.ArrowInvalid as exc:
        if "columns, got" in str(exc):
            _ragged(path, len(header), name)
        if "conversion error" not in str(exc):
            raise DataError(
                f"dataset '{name}': '{path}' cannot be read as CSV ({exc})",
                public=f"dataset '{name}': its file cannot be read as CSV",
            ) from None
        # a cell that is not a number: as text, so that `floats` names it and its line
        data = _parse_csv(path, header, {h: pa.string() for h in header})
    return ReadTable(name, str(path), header, data, csv=True)


def _parse_csv(path: Path, header: tuple[str, ...], types: dict[str, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=list(header), skip_rows=1),
        convert_options=pacsv.ConvertOptions(column_types=types, null_values=[""]),
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
