"""A dataset's file as the table reader finds it: its path (a file, or for Parquet a folder
of `.parquet` files), its header (a CSV's UTF-8 byte-order mark, as Excel writes it, is
not part of its first name), and the errors that name the file (unreadable, a row with
another number of cells than the header, a column of lists or structs).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Collection
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError


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


def read_header(path: Path, source: TableSource, name: str) -> tuple[str, ...]:
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
        files = parquet_files(path)
        if not files:
            raise DataError(
                f"dataset '{name}': folder '{path}' holds no .parquet file",
                public=f"dataset '{name}': its folder holds no Parquet file",
            )
        try:
            names = pq.ParquetFile(files[0]).schema_arrow.names
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(path, name, exc) from None
        return tuple(n.strip() for n in names)
    if source.format != "csv":
        raise DataError(
            f"dataset '{name}': the table reader reads csv or parquet, not '{source.format}'"
        )
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:  # without a byte-order mark
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise not_utf8(f"'{path}'", name) from None
    if not first:
        raise DataError(
            f"dataset '{name}': '{path}' is empty; a header row is needed",
            public=f"dataset '{name}': its file is empty; a header row is needed",
        )
    return tuple(h.strip() for h in first)


def parquet_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    return [path]


def check_flat(
    schema: pa.Schema, header: tuple[str, ...], read: Collection[str], where: str, name: str
) -> None:
    """Check that the columns `read` of a table of `schema` (named by `header`) hold
    values the reader takes: numbers, text, dates, not lists, structs or maps.

    Raises:
        DataError: the first nested column, naming its type and the fix.
    """
    for field, column in zip(schema, header, strict=False):
        if column in read and pa.types.is_nested(field.type):
            raise DataError(
                f"dataset '{name}': column '{column}' of {where} holds {field.type} values, "
                "not numbers or words; flatten it into columns of their own before the party "
                f"reads it, or leave it out with `columns: {{{column}: ignore}}` in the "
                "dataset's settings",
                public=f"dataset '{name}': a column holds nested values (lists, structs or "
                "maps); the party must flatten it or set it ignore in the dataset's columns",
            )


def not_utf8(where: str, name: str, column: str | None = None) -> DataError:
    """Dataset `name`'s file (`where`: its path), or its column `column`, holds bytes that
    are not UTF-8 text."""
    held = f"column '{column}' of {where}" if column else where
    out = f", or leave the column out with `columns: {{{column}: ignore}}`" if column else ""
    return DataError(
        f"dataset '{name}': {held} holds bytes that are not UTF-8 text; save the file as "
        f"UTF-8 (in Excel: CSV UTF-8){out}",
        public=f"dataset '{name}': its file holds bytes that are not UTF-8 text; the party "
        "must save it as UTF-8",
    )


def csv_column(message: str, columns: list[str] | tuple[str, ...]) -> str | None:
    """The column an error of pyarrow's CSV reader names ("In CSV column #2: ..."), of
    `columns`, the columns it read."""
    at = re.search(r"In CSV column #(\d+)", message)
    return columns[int(at.group(1))] if at is not None and int(at.group(1)) < len(columns) else None


def unreadable(path: Path, name: str, exc: Exception, kind: str = "Parquet") -> DataError:
    fix = "; give a .parquet file or a folder of them" if kind == "Parquet" else ""
    return DataError(
        f"dataset '{name}': '{path}' cannot be read as {kind} ({exc}){fix}",
        public=f"dataset '{name}': its file cannot be read as {kind}",
    )


def name_ragged_row(path: Path, cells: int, name: str) -> None:
    """Raise for the first row whose number of cells is not the header's."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = (r for r in csv.reader(fh) if r)
        next(rows)
        for n, row in enumerate(rows):
            if len(row) != cells:
                raise DataError(
                    f"dataset '{name}': line {n + 2} of '{path}' has {len(row)} cells, the "
                    f"header has {cells}; fix the row",
                    public=f"dataset '{name}': a row has another number of cells than the header",
                )
