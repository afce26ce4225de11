"""The typed table reader: a dataset's CSV or Parquet file streamed into a party's buffers.

`scan_table` is what jobs, predictions and online scoring read with. It streams the
file batch by batch (CSV: `pyarrow.csv.open_csv`, parsed on every core; Parquet: a file
or a folder of `.parquet` files, row group by row group) into the buffers a party keeps
(`party.tables.reader.buffers`: ids as text, the label as float64, numbers as float32,
words as int32 codes).

No whole-file Arrow table is built: memory grows with the cells times 4 bytes, plus the
ids. A column's type is inferred from its first block; a later block that does not fit
(a word after numbers) reads the file again with that column widened (integer ->
float64 -> text). With `typed` (preprocess: none) features must be numbers and only an
empty cell is missing; a cell that is not a number is named with its line by reading
that one column again as text (`party.tables.reader.whole.name_bad_cell`).

`scan_arrow` does the same for rows already in memory as an Arrow table (rows a
database gave by id, for online scoring).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.reader.buffers import Scanned, Widen, collect
from vfl.party.tables.reader.columns import column_index
from vfl.party.tables.reader.files import (
    check_flat,
    csv_column,
    existing,
    name_ragged_row,
    not_utf8,
    parquet_files,
    read_header,
    unreadable,
)
from vfl.party.tables.reader.whole import name_bad_cell

CSV_BLOCK = 1 << 24  # bytes of a CSV parsed per block (16 MiB)
PARQUET_BATCH = 1 << 17  # rows per Parquet batch


def scan_table(
    source: TableSource,
    name: str,
    typed: bool = False,
    text: Collection[str] = (),
    skip: Collection[str] = (),
    check: Callable[[int, int], None] | None = None,
) -> Scanned:
    """Stream dataset `name` (csv or parquet) into a party's buffers (module docstring).
    `text`: columns read as text whatever they hold; `skip`: columns not read at all
    (names not in the header are left to the caller); `check`: called before each block
    with the bytes and rows of the blocks read so far (it may raise: the party's limits
    guard stops a job whose data outgrows its memory or its max_rows, and learns how much
    each job has read).

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or named
            column, a row with another number of cells than the header, a Parquet column
            of lists, structs or maps not skipped, (typed) a feature or label that is not
            a number.
    """
    path = existing(source, name)
    header = read_header(path, source, name)
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
            poll = None if check is None else functools.partial(check, 0, 0)  # stopped?
            scanned = collect(
                batches, name, header, id_col, label, text, source.format == "csv", typed, poll
            )
        except Widen as widen:
            column = widen.column
            if typed or source.format != "csv" or forced.get(column) == pa.string():
                name_bad_cell(source, name, column)
            forced[column] = pa.string() if column in forced else pa.float64()
            continue
        pa.default_memory_pool().release_unused()  # the blocks parsed: back to the system
        return scanned


def _checked(
    batches: Iterator[pa.RecordBatch], check: Callable[[int, int], None]
) -> Iterator[pa.RecordBatch]:
    read = rows = 0
    for batch in batches:
        check(read, rows)
        read += batch.nbytes
        rows += batch.num_rows
        yield batch
    check(read, rows)  # before the columns are joined and encoded


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
    check_flat(data.schema, header, keep, "the rows read", name)
    try:
        return collect(
            iter(data.select(keep).to_batches()), name, header, id_col, label, text, False, typed
        )
    except Widen as widen:
        raise DataError(
            f"dataset '{name}': column '{widen.column}' holds an empty cell or a value that "
            "is not a number; fill or fix it, or preprocess the dataset (preprocess: auto)",
            public=f"dataset '{name}': a column holds an empty cell or a value that is not "
            "a number",
        ) from None


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
        for file in parquet_files(path):
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
            name_ragged_row(path, len(header), name)
        column = csv_column(message, keep)
        if "invalid UTF8" in message:
            raise not_utf8(f"'{path}'", name, column) from None
        if column is not None and "conversion error" in message:
            raise Widen(column) from None
        raise unreadable(path, name, exc, "CSV") from None


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
        check_flat(parquet.schema_arrow, header, keep, f"'{file}'", name)
        wanted = [parquet.schema_arrow.names[header.index(c)] for c in keep]
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH, columns=wanted):
            yield pa.RecordBatch.from_arrays(batch.columns, names=keep)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable(path, name, exc) from None
