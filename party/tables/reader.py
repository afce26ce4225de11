"""One typed table reader: a dataset's CSV or Parquet file as typed columns (pyarrow).

`scan_table` is what jobs, predictions and online scoring read with. It streams the
file batch by batch (CSV: `pyarrow.csv.open_csv`, parsed on every core; Parquet: a file
or a folder of `.parquet` files, row group by row group) into the buffers a party keeps:

- ids as numpy strings (`StringDType`: 16 bytes an id, ids longer than 15 bytes beside),
  stripped, read as text ("007" stays "007");
- the label as float64;
- every numeric column as float32, NaN where a cell is empty;
- every text column as int32 codes into its distinct words (-1 where a cell is empty).

No whole-file Arrow table is built: memory grows with the cells times 4 bytes, plus the
ids. A column's type is inferred from its first block; a later block that does not fit
(a word after numbers) reads the file again with that column widened (integer ->
float64 -> text). With `typed` (preprocess: none) features must be numbers and only an
empty cell is missing; a cell that is not a number is named with its line by reading
that one column again as text (`read_table`).

`scan_arrow` does the same for rows already in memory as an Arrow table (rows a
database gave by id, for online scoring).

`read_table` reads a whole file as one Arrow table, for `vfl data describe` and to name
the line of a malformed cell.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.columns import ReadTable, column_index, row_place

__all__ = [
    "IDS",
    "ReadTable",
    "Scanned",
    "name_bad_cell",
    "read_table",
    "scan_arrow",
    "scan_table",
]

IDS = np.dtypes.StringDType()  # the dtype of a table's ids
CSV_BLOCK = 1 << 24  # bytes of a CSV parsed per block (16 MiB)
PARQUET_BATCH = 1 << 17  # rows per Parquet batch
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


def scan_table(
    source: TableSource,
    name: str,
    typed: bool = False,
    text: Collection[str] = (),
    skip: Collection[str] = (),
    check: Callable[[int], None] | None = None,
) -> Scanned:
    """Stream dataset `name` (csv or parquet) into a party's buffers (module docstring).
    `text`: columns read as text whatever they hold; `skip`: columns not read at all
    (names not in the header are left to the caller); `check`: called before each block
    with the bytes of the blocks read so far (it may raise: the party's limits guard stops
    a job whose data outgrows its memory, and learns how much each job has read).

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or named
            column, a row with another number of cells than the header, (typed) a
            feature or label that is not a number.
    """
    path = existing(source, name)
    header = _header(path, source, name)
    text, skip = set(text) & set(header), set(skip) & set(header)
    id_col = header[column_index(header, source.id, "id", name)]
    label = header[column_index(header, source.label, "label", name)] if source.label else None
    forced: dict[str, pa.DataType] = {c: pa.string() for c in (*text, id_col)}
    if typed:
        forced.update({c: pa.float64() for c in header if c not in forced})
    keep = [c for c in header if c not in skip or c in (id_col, label)]
    while True:
        try:
            batches = _batches(path, source, name, header, keep, forced, typed)
            if check is not None:
                batches = _checked(batches, check)
            scanned = _collect(
                batches, name, header, id_col, label, text, source.format == "csv", typed
            )
        except _Widen as widen:
            column = widen.column
            if typed or source.format != "csv" or forced.get(column) == pa.string():
                name_bad_cell(source, name, column)
            forced[column] = pa.string() if column in forced else pa.float64()
            continue
        pa.default_memory_pool().release_unused()  # the blocks parsed: back to the system
        return scanned


def _checked(
    batches: Iterator[pa.RecordBatch], check: Callable[[int], None]
) -> Iterator[pa.RecordBatch]:
    read = 0
    for batch in batches:
        check(read)
        read += batch.nbytes
        yield batch
    check(read)  # before the columns are joined and encoded


def scan_arrow(
    data: pa.Table,
    source: TableSource,
    name: str,
    typed: bool = False,
    text: Collection[str] = (),
    skip: Collection[str] = (),
) -> Scanned:
    """`scan_table` of rows already in memory as an Arrow table (those a database gave for
    some ids, with the types of a snapshot of it: `party.tables.sql`), into the same buffers.

    Raises:
        DataError: no such id or label column; (typed) an empty cell, or a feature or
            label that is not a number (names the column).
    """
    header = tuple(data.column_names)
    text, skip = set(text) & set(header), set(skip) & set(header)
    id_col = header[column_index(header, source.id, "id", name)]
    label = header[column_index(header, source.label, "label", name)] if source.label else None
    keep = [c for c in header if c not in skip or c in (id_col, label)]
    try:
        return _collect(
            iter(data.select(keep).to_batches()), name, header, id_col, label, text, False, typed
        )
    except _Widen as widen:
        raise DataError(
            f"dataset '{name}': column '{widen.column}' holds an empty cell or a value that "
            "is not a number; fill or fix it, or preprocess the dataset (preprocess: auto)",
            public=f"dataset '{name}': a column holds an empty cell or a value that is not "
            "a number",
        ) from None


class _Widen(Exception):
    """A streamed CSV block does not fit the type inferred for `column`."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


def _header(path: Path, source: TableSource, name: str) -> tuple[str, ...]:
    """The table's column names, each once.

    Raises:
        DataError: no file or header, another format, or a name given to two columns.
    """
    header = _names(path, source, name)
    twice = sorted(h for h, n in Counter(header).items() if n > 1)
    if twice:
        shown = ", ".join(f"'{h}'" for h in twice[:5]) + (" ..." if len(twice) > 5 else "")
        raise DataError(
            f"dataset '{name}': the header names {shown} more than once; give each column "
            "its own name"
        )
    return header


def _names(path: Path, source: TableSource, name: str) -> tuple[str, ...]:
    if source.format == "parquet":
        files = _parquet_files(path)
        if not files:
            raise DataError(
                f"dataset '{name}': folder '{path}' holds no .parquet file",
                public=f"dataset '{name}': its folder holds no Parquet file",
            )
        try:
            names = pq.ParquetFile(files[0]).schema_arrow.names
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(path, name, exc) from None
        return tuple(n.strip() for n in names)
    if source.format != "csv":
        raise DataError(
            f"dataset '{name}': the table reader reads csv or parquet, not '{source.format}'"
        )
    with path.open(newline="") as fh:
        first = next(csv.reader(fh), None)
    if not first:
        raise DataError(
            f"dataset '{name}': '{path}' is empty; a header row is needed",
            public=f"dataset '{name}': its file is empty; a header row is needed",
        )
    return tuple(h.strip() for h in first)


def _batches(
    path: Path,
    source: TableSource,
    name: str,
    header: tuple[str, ...],
    keep: list[str],
    forced: dict[str, pa.DataType],
    typed: bool,
) -> Iterator[pa.RecordBatch]:
    """The file's record batches (columns `keep`, renamed to the stripped header)."""
    if source.format == "parquet":
        for file in _parquet_files(path):
            yield from _parquet_batches(file, path, name, header, keep)
        return
    null = {"null_values": [""]} if typed else {"strings_can_be_null": True}
    options = pacsv.ConvertOptions(
        column_types={c: t for c, t in forced.items() if c in keep},
        include_columns=keep,
        **null,  # type: ignore[arg-type]
    )
    read = pacsv.ReadOptions(column_names=list(header), skip_rows=1, block_size=CSV_BLOCK)
    try:
        reader = pacsv.open_csv(path, read_options=read, convert_options=options)
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            yield batch
    except pa.ArrowInvalid as exc:
        message = str(exc)
        if "columns, got" in message:
            _ragged(path, len(header), name)
        at = re.search(r"In CSV column #(\d+)", message)
        if at is not None and "conversion error" in message:
            raise _Widen(keep[int(at.group(1))]) from None
        raise _unreadable(path, name, exc, "CSV") from None


def _parquet_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    return [path]


def _parquet_batches(
    file: Path, path: Path, name: str, header: tuple[str, ...], keep: list[str]
) -> Iterator[pa.RecordBatch]:
    try:
        parquet = pq.ParquetFile(file)
        names = tuple(n.strip() for n in parquet.schema_arrow.names)
        if names != header:
            raise DataError(
                f"dataset '{name}': '{file}' has the columns {list(names)}, the folder's "
                f"first file {list(header)}; give every file of the folder the same columns",
                public=f"dataset '{name}': the files of its folder have different columns",
            )
        wanted = [parquet.schema_arrow.names[header.index(c)] for c in keep]
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, columns=wanted):
            yield pa.RecordBatch.from_arrays(batch.columns, names=keep)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, name, exc) from None


def _collect(
    batches: Iterator[pa.RecordBatch],
    name: str,
    header: tuple[str, ...],
    id_col: str,
    label: str | None,
    text: Collection[str],
    lines: bool,
    typed: bool,
) -> Scanned:
    ids: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    numbers: dict[str, list[np.ndarray]] = {}
    texts: dict[str, list[pa.Array]] = {}
    for batch in batches:
        for column, values in zip(batch.schema.names, batch.columns, strict=True):
            if typed and values.null_count and column != id_col and column not in text:
                raise _Widen(column)  # an empty cell: named with its line
            if column == id_col:
                ids.append(_ids(values))
            elif column == label:
                labels.append(_label(values, name, column))
            elif _is_number(values.type):
                numbers.setdefault(column, []).append(_float32(values))
            else:
                texts.setdefault(column, []).append(_stripped(values))
    mixed = set(numbers) & set(texts)
    if mixed:  # only across the files of a Parquet folder
        raise DataError(
            f"dataset '{name}': column '{sorted(mixed)[0]}' holds numbers in some files of "
            "the folder and text in others; give it one type in every file",
            public=f"dataset '{name}': a column has different types in the files of its folder",
        )
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
            out_texts[column] = _words(chunked)
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
        numbers = _text_numbers(pa.chunked_array([_stripped(values)], type=pa.string()))
        if numbers is None:
            raise _Widen(column)  # names the cell
        return numbers.astype(np.float64)
    return pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def _ids(values: pa.Array) -> np.ndarray:
    text = values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    text = pc.fill_null(pc.utf8_trim_whitespace(text), "")
    return text.to_numpy(zero_copy_only=False).astype(IDS)


def _stripped(values: pa.Array) -> pa.Array:
    """Text with surrounding blanks removed; an empty cell as null."""
    text = values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    text = pc.utf8_trim_whitespace(text)
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)


def _text_numbers(text: pa.ChunkedArray) -> np.ndarray | None:
    """A text column whose every present cell is a number, as float32 (NaN where empty);
    None if one is not."""
    try:
        wide = pc.cast(text, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return wide.to_numpy().astype(np.float32)


def _words(text: pa.ChunkedArray) -> Text:
    encoded = pc.dictionary_encode(text.combine_chunks())
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int32), tuple(encoded.dictionary.to_pylist())


def name_bad_cell(source: TableSource, name: str, column: str) -> None:
    """Raise the error naming column `column`'s first cell that is not a number."""
    path = existing(source, name)
    read = read_table(source, name, typed=True, columns=(column,))
    read.floats(0)
    raise DataError(
        f"dataset '{name}': column '{column}' of '{path}' cannot be read as numbers",
        public=f"dataset '{name}': a column cannot be read as numbers",
    )


def read_table(
    source: TableSource, name: str, typed: bool = False, columns: Collection[str] = ()
) -> ReadTable:
    """Read dataset `name` (csv or parquet) whole, as one Arrow table: for `vfl data
    describe` and to name a malformed cell. `typed`: label and features as float64,
    categorical columns as text; `columns`: only these, as text.

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or
            categorical column, a row with another number of cells than the header.
    """
    path = existing(source, name)
    header = _header(path, source, name)
    if source.format == "parquet":
        try:
            data = pq.read_table(path, partitioning=None)
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(path, name, exc) from None
        read = ReadTable(name, str(path), header, data.rename_columns(list(header)), csv=False)
        if columns:
            picked = [read.data.column(read.column(c, "named")) for c in columns]
            data = pa.table([pc.cast(c, pa.string()) for c in picked], names=list(columns))
            return ReadTable(name, str(path), tuple(columns), data, csv=False)
    else:
        read = _read_csv(path, source, name, header, typed, tuple(columns))
    if columns:
        return read
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


def _unreadable(path: Path, name: str, exc: Exception, kind: str = "Parquet") -> DataError:
    fix = "; give a .parquet file or a folder of them" if kind == "Parquet" else ""
    return DataError(
        f"dataset '{name}': '{path}' cannot be read as {kind} ({exc}){fix}",
        public=f"dataset '{name}': its file cannot be read as {kind}",
    )


def _read_csv(
    path: Path,
    source: TableSource,
    name: str,
    header: tuple[str, ...],
    typed: bool,
    columns: tuple[str, ...],
) -> ReadTable:
    if columns:
        for column in columns:
            column_index(header, column, "named", name)
        data = _parse_csv(path, name, header, {c: pa.string() for c in columns}, typed, columns)
        return ReadTable(name, str(path), columns, data, csv=True)
    types: dict[str, pa.DataType] = {h: pa.float64() for h in header} if typed else {}
    types.update({c: pa.string() for c in (*(source.categorical or ()), source.id or "id")})
    try:
        data = _parse_csv(path, name, header, types, typed)
    except pa.ArrowInvalid as exc:
        if "conversion error" not in str(exc):
            raise _unreadable(path, name, exc, "CSV") from None
        # a cell that is not a number: as text, so that `floats` names it and its line
        data = _parse_csv(path, name, header, {h: pa.string() for h in header}, typed)
    return ReadTable(name, str(path), header, data, csv=True)


def _parse_csv(
    path: Path,
    name: str,
    header: tuple[str, ...],
    types: dict[str, pa.DataType],
    typed: bool,
    columns: tuple[str, ...] = (),
) -> pa.Table:
    """Typed: only an empty cell is missing (preprocess: none); else also the usual
    markers of a missing value (NA, N/A, NULL, nan, ...), in text columns too."""
    convert = (
        pacsv.ConvertOptions(column_types=types, null_values=[""], include_columns=columns)
        if typed
        else pacsv.ConvertOptions(
            column_types=types, strings_can_be_null=True, include_columns=columns
        )
    )
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=list(header), skip_rows=1),
            convert_options=convert,
        )
    except pa.ArrowInvalid as exc:
        if "columns, got" in str(exc):
            _ragged(path, len(header), name)
        raise


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
