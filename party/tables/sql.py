"""A dataset read from PostgreSQL: its query's rows streamed into a Parquet file.

A party config's dataset of `format: sql` (`vfl.contract.spec.TableSource`: `url`,
`query` or `table`, `password_env` or `password_file`) is read once per job, at PREPARE:
`write_parquet` runs the query on a server-side (named) cursor in a read-only transaction
and writes its rows, `BATCH_ROWS` at a time, with `pyarrow.parquet.ParquetWriter`, so
memory holds one batch, never the whole result. The job keeps that file as its snapshot
(`party.state.snapshots`) and reads it through the table reader like any Parquet dataset
(`as_parquet`).

Column types: integers, floating point, `numeric` and booleans become float64; every other
type (text, dates, ...) becomes text, as it prints; NULL stays null (an empty cell). The id
column is always text (`7` reads as "7").

Online scoring does not snapshot: it looks the rows of the ids it scores up at each
micro-batch (`party.tables.sql_lookup`), with the same column types (`result_columns`,
`result_table`), so that a row scores online as it does in a snapshot.

The password is read at each connection (`Database.connect`), from the daemon's
environment or a file the config names, and handed to the driver alone: it is never in
the url, a log line or an error.
Errors (`party.errors`), each with a public form that names only the dataset:

    ConfigError   the driver is not installed; the credential is unset or unreadable; the
                  server refused the credential
    DataError     the server cannot be reached (names host:port); it refused the
                  connection otherwise; the query failed (PostgreSQL's message, locally);
                  the query returns no id column, a column twice, or a row without an id

The driver is psycopg 3, the optional extra `pip install "vfl-platform[sql]"`; it is
imported only when a sql dataset is read.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from vfl.contract.spec import TableSource
from vfl.party.errors import ConfigError, DataError

BATCH_ROWS = 20_000  # rows fetched from the server and written per Parquet row group
CONNECT_TIMEOUT_S = 10
# PostgreSQL types read as numbers (float64); any other type is read as text
NUMBER_TYPES = frozenset({"int2", "int4", "int8", "oid", "float4", "float8", "numeric", "bool"})


def as_parquet(source: TableSource, path: Path) -> TableSource:
    """`source`'s column settings over the Parquet file `path` (its snapshot), without
    its database fields: what the table reader reads."""
    none = dict.fromkeys(("url", "query", "table", "password_env", "password_file"))
    return source.model_copy(update={"format": "parquet", "path": str(path), **none})


@dataclass(frozen=True)
class Server:
    """Where a dataset's database is, for messages (never its password)."""

    host: str
    port: str
    user: str
    database: str

    @classmethod
    def of(cls, url: str) -> Server:
        """The url's parts, with libpq's defaults for those it leaves out."""
        from psycopg.conninfo import conninfo_to_dict

        info = {k: str(v) for k, v in conninfo_to_dict(url).items() if v}
        user = info.get("user") or os.environ.get("PGUSER") or getpass.getuser()
        host, port = info.get("host", "localhost"), info.get("port", "5432")
        return cls(host, port, user, info.get("dbname", user))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Database:
    """Where dataset `name`'s rows are (`source`, format sql): connections to it, and the
    named errors of its failures."""

    source: TableSource
    name: str
    server: Server

    @classmethod
    def of(cls, source: TableSource, name: str) -> Database:
        """Raises:
        ConfigError: the driver is not installed; `source` is not a sql dataset; its url
            cannot be read."""
        psycopg = _driver(name)
        if source.format != "sql" or source.url is None:
            raise ConfigError(f"dataset '{name}' is not read from a database (format: sql, url)")
        try:
            server = Server.of(source.url)
        except psycopg.Error as exc:  # the url has no password: the config refuses one
            raise ConfigError(
                f"dataset '{name}': its url cannot be read ({exc}); write it as "
                "postgresql://USER@HOST:PORT/DATABASE",
                public=f"dataset '{name}': the party's database url is malformed",
            ) from None
        return cls(source, name, server)

    def connect(self, **settings: Any) -> Any:
        """A new connection (`settings`: more of psycopg's connection settings), the
        password read now and handed to the driver alone.

        Raises:
            ConfigError: the credential is unset, unreadable or refused.
            DataError: the server cannot be reached, or refused the connection otherwise.
        """
        psycopg = _driver(self.name)
        password = read_password(self.source, self.name)
        extra = {} if password is None else {"password": password}
        given = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "vfl-party"}
        try:
            return psycopg.connect(self.source.url, **{**given, **settings, **extra})
        except psycopg.Error as exc:
            detail = _text(exc, password)
            raise _connect_error(detail, self.server, self.source, self.name) from None

    def query_failed(self, exc: Exception) -> DataError:
        """The named error of the dataset's query failing with the driver's `exc`."""
        name = self.name
        return DataError(
            f"dataset '{name}': its query failed on the database at {self.server}: "
            f"{_text(exc, self._password())}; fix 'query' (or 'table') in the party config",
            public=f"dataset '{name}': the party's query failed; the party must fix it",
        )

    def _password(self) -> str | None:
        """The password, to scrub it from a message (None: none, or not readable now)."""
        try:
            return read_password(self.source, self.name)
        except ConfigError:
            return None


def write_parquet(source: TableSource, name: str, path: Path, batch_rows: int = BATCH_ROWS) -> int:
    """Run dataset `name`'s query (`source`, format sql) and write its rows to `path` as
    Parquet; returns how many rows it wrote.

    Raises:
        ConfigError, DataError: see the module docstring.
    """
    database = Database.of(source, name)
    psycopg = _driver(name)
    conn = database.connect()
    try:
        with conn:
            conn.read_only = True  # a dataset's query reads; it never changes the database
            return _stream(conn, source, name, path, batch_rows)
    except psycopg.Error as exc:
        raise database.query_failed(exc) from None


def read_password(source: TableSource, name: str) -> str | None:
    """The password `source` names (its environment variable, or its file's first line);
    None if it names none.

    Raises:
        ConfigError: the variable is unset, or the file is missing, unreadable or empty.
    """
    public = f"dataset '{name}': the party's database credential is not set; the party must fix it"
    if source.password_env is not None:
        value = os.environ.get(source.password_env)
        if not value:
            raise ConfigError(
                f"dataset '{name}': password_env names {source.password_env}, which is not "
                "set in this daemon's environment; set it where the daemon starts, or name a "
                "file with password_file",
                public=public,
            )
        return value
    if source.password_file is not None:
        try:
            value = Path(source.password_file).read_text().split("\n", 1)[0].rstrip("\r")
        except OSError as exc:
            raise ConfigError(
                f"dataset '{name}': its password_file {source.password_file} cannot be read "
                f"({exc.strerror}); fix the path or the file's permissions",
                public=public,
            ) from None
        if not value:
            raise ConfigError(
                f"dataset '{name}': its password_file {source.password_file} is empty; write "
                "the password on its first line",
                public=public,
            )
        return value
    return None


@dataclass(frozen=True)
class Column:
    """A column of a query's result, with the Arrow type its values take."""

    name: str
    type: pa.DataType  # float64 or string


def _stream(conn: Any, source: TableSource, name: str, path: Path, batch_rows: int) -> int:
    """Declare a server-side cursor over the query and write its rows in batches."""
    with conn.cursor(name="vfl_snapshot") as cur:
        cur.execute(_statement(source))
        columns = result_columns(cur.description, conn, source, name)
        schema = pa.schema([(c.name, c.type) for c in columns])
        rows = 0
        with pq.ParquetWriter(path, schema) as writer:
            while batch := cur.fetchmany(batch_rows):
                writer.write_table(result_table(batch, columns, source, name))
                rows += len(batch)
        return rows


def _statement(source: TableSource) -> Any:
    from psycopg import sql

    if source.table is not None:
        return sql.SQL("SELECT * FROM {}").format(table_name(source))
    return query_text(source)


def table_name(source: TableSource) -> Any:
    """The dataset's `table` (or `schema.table`), quoted as an identifier."""
    from psycopg import sql

    assert source.table is not None
    return sql.Identifier(*source.table.split("."))


def query_text(source: TableSource) -> str:
    """The dataset's `query`, without a final semicolon."""
    assert source.query is not None
    return source.query.strip().rstrip(";")


def result_columns(description: Any, conn: Any, source: TableSource, name: str) -> list[Column]:
    """A result's columns (the cursor's `description`) with their Arrow types (the id
    column: text).

    Raises:
        DataError: no id column, or a column name given twice.
    """
    names = [d.name for d in description]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DataError(
            f"dataset '{name}': its query returns column(s) {twice} more than once; name "
            "each column once (SELECT a.x AS a_x, ...)",
            public=f"dataset '{name}': the party's query returns a column twice",
        )
    if source.id not in names:
        raise DataError(
            f"dataset '{name}': its query returns no id column '{source.id}' (it returns "
            f"{names}); select the id AS {source.id}, or set 'id' in the party config",
            public=f"dataset '{name}': the party's query returns no id column; the party "
            "must fix its query or its 'id' setting",
        )
    columns = []
    for d in description:
        info = conn.adapters.types.get(d.type_code)
        number = info is not None and info.name in NUMBER_TYPES and d.name != source.id
        columns.append(Column(d.name, pa.float64() if number else pa.string()))
    return columns


def result_table(
    rows: list[tuple], columns: list[Column], source: TableSource, name: str
) -> pa.Table:
    """Rows of a result (Python tuples from the driver) as Arrow columns of `columns`'
    types: what a snapshot holds of them.

    Raises:
        DataError: a row whose id is NULL.
    """
    arrays = []
    for j, column in enumerate(columns):
        if column.type == pa.float64():
            values: list[Any] = [None if r[j] is None else float(r[j]) for r in rows]
        else:
            values = [None if r[j] is None else str(r[j]) for r in rows]
        arrays.append(pa.array(values, type=column.type))
        if column.name == source.id and arrays[-1].null_count:
            raise DataError(
                f"dataset '{name}': its query returns a row whose id '{source.id}' is NULL; "
                "filter such rows out (WHERE id IS NOT NULL)",
                public=f"dataset '{name}': the party's query returns a row without an id",
            )
    return pa.Table.from_arrays(arrays, schema=pa.schema([(c.name, c.type) for c in columns]))


def _connect_error(detail: str, server: Server, source: TableSource, name: str) -> Exception:
    """The named error of a failed connection, by what libpq said."""
    lowered = detail.lower()
    if "password" in lowered or "authentication" in lowered:
        credential = (
            f"password_env {source.password_env}"
            if source.password_env
            else f"password_file {source.password_file}"
            if source.password_file
            else "password_env or password_file (none is set)"
        )
        return ConfigError(
            f"dataset '{name}': the database at {server} refused user '{server.user}' "
            f"({detail}); fix the password in {credential}, or the user in 'url'",
            public=f"dataset '{name}': the party's database refused its credential; the "
            "party must fix its config",
        )
    if "fatal:" in lowered:  # the server answered: no such database, too many clients, ...
        return DataError(
            f"dataset '{name}': the database at {server} refused the connection ({detail}); "
            "fix 'url' in the party config, or the server's settings",
            public=f"dataset '{name}': the party's database refused the connection; the "
            "party must fix its config",
        )
    return DataError(
        f"dataset '{name}': the database at {server} cannot be reached ({detail}); start it, "
        "or fix the host and port in 'url' in the party config",
        public=f"dataset '{name}': the party's database cannot be reached; the party must "
        "start it or fix its config",
    )


def _text(exc: Exception, password: str | None) -> str:
    """The driver's message in one line, without the password should it appear."""
    primary = getattr(getattr(exc, "diag", None), "message_primary", None)
    text = str(primary or exc).strip()
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    text = text.removeprefix("connection failed: ")
    return text.replace(password, "***") if password else text


def _driver(name: str) -> Any:
    """The psycopg module.

    Raises:
        ConfigError: it is not installed (names the extra to install).
    """
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            f"dataset '{name}' is read from PostgreSQL, but its driver is not installed "
            'beside this daemon; install it with pip install "vfl-platform[sql]"',
            public=f"dataset '{name}': the party lacks its database driver; the party "
            "must install it",
        ) from None
    return psycopg
