"""A dataset's typed columns, as a file read whole (`party.tables.reader.whole`) holds
them; where a row or a column is in a file (`row_place`, `column_index`); and the cell
conversions both readers share (`text_ids`, `stripped`, `word_codes`).

A `ReadTable` holds a file's columns as a `pyarrow.Table` and gives a column as ids
(text), numbers (`floats`, float64), integer codes (`codes`) or its inferred kind
(`kind`: numeric, text or empty). Every malformed value raises `DataError` naming the
dataset, column and line (its public form names neither). Only an empty cell is missing:
"nan" is a number (NaN), as Python's `float` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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
        return row_place(row, self.csv)

    def ids(self, col: int) -> np.ndarray:
        """Column `col` as stripped text ids (dtype object)."""
        return text_ids(self.data.column(col))

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

    def words(self, col: int) -> tuple[np.ndarray, tuple[str, ...]]:
        """Column `col` as text: (int32 codes into the words, -1 for an empty cell; the
        distinct stripped words)."""
        return word_codes(stripped(self.data.column(col)))

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
        return column_index(self.header, column, what, self.name)


def row_place(row: int, lines: bool) -> str:
    """Where data row `row` (from 0) of a file is: 'line 7' in a CSV (header = line 1),
    else 'row 6'."""
    return f"line {row + 2}" if lines else f"row {row + 1}"


def column_index(header: tuple[str, ...], column: str | None, what: str, name: str) -> int:
    """The index of column `column` in dataset `name`'s `header` (`what`: id, label, ...).

    Raises:
        DataError: no such column; lists the header.
    """
    if column not in header:
        shown = f"{', '.join(header[:12])}{', ...' if len(header) > 12 else ''}"
        raise DataError(
            f"dataset '{name}': {what} column '{column}' is not in the header "
            f"({shown}); set '{what}' to one of these columns",
            public=f"dataset '{name}': its header has no such {what} column; check "
            f"the dataset's '{what}' setting",
        )
    return header.index(column)


def text_ids(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Cells as stripped text ids (dtype object; an empty cell as "")."""
    text = values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    return pc.fill_null(pc.utf8_trim_whitespace(text), "").to_numpy(zero_copy_only=False)


def stripped(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Cells as text with surrounding blanks removed; an empty cell as null."""
    text = values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    text = pc.utf8_trim_whitespace(text)
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)


def word_codes(text: pa.ChunkedArray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Text cells as (int32 codes into the distinct words, -1 for a null; the words)."""
    encoded = pc.dictionary_encode(text.combine_chunks())
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int32), tuple(encoded.dictionary.to_pylist())


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
