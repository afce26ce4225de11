"""A dataset's CSV or Parquet file read whole, as one Arrow table (`read_table`, a
`ReadTable`): for `vfl data describe`, and to name the line of a malformed cell
(`name_bad_cell`) once the streaming reader has met one.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.reader.columns import ReadTable, column_index
from vfl.party.tables.reader.files import (
    check_flat,
    csv_column,
    existing,
    name_ragged_row,
    not_utf8,
    read_header,
    unreadable,
)


def read_table(
    source: TableSource, name: str, typed: bool = False, columns: Collection[str] = ()
) -> ReadTable:
    """Read dataset `name` (csv or parquet) whole, as one Arrow table: for `vfl data
    describe` and to name a malformed cell. `typed`: label and features as float64,
    categorical columns as text; `columns`: only these, as text.

    Raises:
        DataError: a missing or unreadable file, an empty one, no such id, label or
            categorical column, a row with another number of cells than the header, a
            Parquet column of lists, structs or maps not set ignore.
    """
    path = existing(source, name)
    header = read_header(path, source, name)
    if source.format == "parquet":
        try:
            data = pq.read_table(path, partitioning=None)
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(path, name, exc) from None
        read = ReadTable(name, str(path), header, data.rename_columns(list(header)), csv=False)
        ignored = {c for c, kind in (source.columns or {}).items() if kind == "ignore"}
        read_columns = set(columns) if columns else set(header) - ignored
        check_flat(data.schema, header, read_columns, f"'{path}'", name)
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


def name_bad_cell(source: TableSource, name: str, column: str) -> None:
    """Raise the error naming column `column`'s first cell that is not a number."""
    path = existing(source, name)
    read = read_table(source, name, typed=True, columns=(column,))
    read.floats(0)
    raise DataError(
        f"dataset '{name}': column '{column}' of '{path}' cannot be read as numbers",
        public=f"dataset '{name}': a column cannot be read as numbers",
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
            raise unreadable(path, name, exc, "CSV") from None
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
            name_ragged_row(path, len(header), name)
        if "invalid UTF8" in str(exc):
            raise not_utf8(f"'{path}'", name, csv_column(str(exc), columns or header)) from None
        raise
