"""Arrow record batches into the buffers a party keeps (`collect`, a `Scanned`):

- ids as numpy strings (`IDS`, `StringDType`: 16 bytes an id, ids longer than 15 bytes
  beside), stripped, read as text ("007" stays "007");
- the label as float64;
- every numeric column as float32, NaN where a cell is empty;
- every text column as int32 codes into its distinct words (-1 where a cell is empty); a
  text column whose every present cell is a number is read as numbers.

Each column's parts are joined as they are freed, so the peak is the whole plus one part.
A batch that does not fit the types the reader asked for raises `Widen` (the scanner reads
the file again with that column widened, or names the bad cell).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from vfl.party.errors import DataError
from vfl.party.tables.reader.columns import row_place, stripped, text_ids, word_codes
from vfl.party.tables.reader.files import not_utf8

IDS = np.dtypes.StringDType()  # the dtype of a table's ids
POLL_COLUMNS = 512  # columns of a batch between two polls of a read that may be stopped
Text = tuple[np.ndarray, tuple[str, ...]]  # int32 codes (-1: empty), the distinct words


@dataclass(frozen=True)
class Scanned:
    """A dataset's columns as `scan_table` collected them, by header name."""

    name: str
    header: tuple[str, ...]
    lines: bool  # CSV: data row r is on line r + 2; Parquet: row r + 1
    ids: np.ndarray  # IDS
    labels: np.ndarray | None  # float64
    numbers: dict[str, np.ndarray]  # float32, NaN where empty
    texts: dict[str, Text]

    @property
    def rows(self) -> int:
        return len(self.ids)

    def where(self, row: int) -> str:
        """Where data row `row` (from 0) is in the file: 'line 7' (CSV) or 'row 6'."""
        return row_place(row, self.lines)


class Widen(Exception):
    """A streamed CSV block does not fit the type inferred for `column`."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


def collect(
    batches: Iterator[pa.RecordBatch],
    name: str,
    header: tuple[str, ...],
    id_col: str,
    label: str | None,
    text: Collection[str],
    lines: bool,
    typed: bool,
    poll: Callable[[], None] | None = None,
) -> Scanned:
    """The columns of `batches` in the reader's buffers. `poll` is called every
    `POLL_COLUMNS` columns and before the columns are joined: it raises to stop the read
    (the guard failed the job), so a wide table stops within a few columns."""
    poll = poll or (lambda: None)
    seen = 0
    ids: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    numbers: dict[str, list[np.ndarray]] = {}
    texts: dict[str, list[pa.Array]] = {}
    for batch in batches:
        for column, values in zip(batch.schema.names, batch.columns, strict=True):
            seen += 1
            if seen % POLL_COLUMNS == 0:
                poll()
            if typed and values.null_count and column != id_col and column not in text:
                raise Widen(column)  # an empty cell: named with its line
            try:
                if column == id_col:
                    ids.append(text_ids(values).astype(IDS))
                elif column == label:
                    labels.append(_label(values, name, column))
                elif _is_number(values.type):
                    numbers.setdefault(column, []).append(_float32(values))
                else:
                    texts.setdefault(column, []).append(stripped(values))
            except pa.ArrowInvalid as exc:  # bytes read as text
                if "UTF8" not in str(exc):
                    raise
                raise not_utf8("its file", name, column) from None
    mixed = set(numbers) & set(texts)
    if mixed:  # only across the files of a Parquet folder
        raise DataError(
            f"dataset '{name}': column '{sorted(mixed)[0]}' holds numbers in some files of "
            "the folder and text in others; give it one type in every file",
            public=f"dataset '{name}': a column has different types in the files of its folder",
        )
    poll()
    out_numbers = {c: _joined(parts, np.float32) for c, parts in numbers.items()}
    if not ids:  # no data rows: every column empty
        out_numbers = {c: np.empty(0, np.float32) for c in header if c not in (id_col, label)}
    out_texts: dict[str, Text] = {}
    for column, parts in texts.items():
        chunked = pa.chunked_array(parts, type=pa.string())
        as_numbers = None if column in text else _text_numbers(chunked)
        if as_numbers is not None:
            out_numbers[column] = as_numbers
        else:
            out_texts[column] = word_codes(chunked)
    return Scanned(
        name,
        header,
        lines,
        _joined(ids, IDS),
        _joined(labels, np.float64) if label is not None else None,
        {c: out_numbers[c] for c in header if c in out_numbers},
        {c: out_texts[c] for c in header if c in out_texts},
    )


def _joined(parts: list[np.ndarray], dtype: object) -> np.ndarray:
    """The parts as one array, each part freed once copied (the peak is the whole plus one
    part, not twice the whole)."""
    if len(parts) == 1:
        return parts.pop()
    out = np.empty(sum(len(p) for p in parts), dtype=dtype)  # type: ignore[call-overload]
    at = 0
    while parts:
        part = parts.pop(0)
        out[at : at + len(part)] = part
        at += len(part)
    return out


def _is_number(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_null(kind)
        or pa.types.is_decimal(kind)
    )


def _float32(values: pa.Array) -> np.ndarray:
    if pa.types.is_null(values.type):
        return np.full(len(values), np.nan, dtype=np.float32)
    wide = pc.cast(values, pa.float64(), safe=False)
    return wide.to_numpy(zero_copy_only=False).astype(np.float32)  # nulls as NaN


def _label(values: pa.Array, name: str, column: str) -> np.ndarray:
    if not _is_number(values.type):
        numbers = _text_numbers(pa.chunked_array([stripped(values)], type=pa.string()))
        if numbers is None:
            raise Widen(column)  # names the cell
        return numbers.astype(np.float64)
    return pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def _text_numbers(text: pa.ChunkedArray) -> np.ndarray | None:
    """A text column whose every present cell is a number, as float32 (NaN where empty);
    None if one is not."""
    try:
        wide = pc.cast(text, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return wide.to_numpy().astype(np.float32)
