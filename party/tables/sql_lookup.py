"""The rows of a `format: sql` dataset looked up by id, for online scoring.

`Lookup.rows(ids)` runs the dataset's query for those ids only, the ids bound as one
parameter, never written into the statement:

    SELECT * FROM (<query>) AS q WHERE q.<id> = ANY(%s)      (`table:` FROM <table> AS q)

and gives the rows as an Arrow table of a snapshot's types (`party.tables.sql.result_table`),
so a row looked up scores as the same row of a snapshot. PostgreSQL moves the condition
into the query, so an index on the id column serves it. How the ids are compared is
learnt at the first lookup from the id column's type (`Lookup.describe`, the query with
`LIMIT 0`): an integer column is compared with the ids as integers (an id that is not a
plain integer cannot match one and is not sent), a `text` or `varchar` column with the
ids as text; any other type is compared as text (`q.<id>::text`), which an index on
the column does not serve. Rows whose id, read as a snapshot reads it, is not one of
those asked are dropped.

Connections (`Pool`): at most `POOL_SIZE` idle connections to the database, made when a
lookup needs one, in autocommit mode, every transaction read-only, with PostgreSQL's
`statement_timeout` set to the lookup's timeout, so that a lookup that takes longer is
cancelled by the server rather than stalling the scoring session. A connection that
fails is closed, never reused; one the server dropped while idle (a restart) is
found when a lookup fails on it, and the lookup is tried once more on a new
connection. While the database is down, each lookup fails at once with the connection's
named error; the first lookup after it is back connects again. The `Lookup` owns its
pool and closes it with `close()`.

Why not `psycopg_pool`: each micro-batch of a model runs on one thread at a party (the
model's micro-batcher at the active party, the session's thread at a passive one), so a
lookup needs one connection at a time; `psycopg_pool` runs worker threads per pool and,
while the database is down, makes a lookup wait for its timeout and fail with "no
connection in time", where connecting on demand fails at once with libpq's reason,
which `party.tables.sql` names (unreachable, refused credential, refused otherwise).

Errors (`party.errors`), each naming the dataset; the public form also omits the host:

    ConfigError   as `party.tables.sql`: the driver, the url or the credential
    DataError     as `party.tables.sql`: the server cannot be reached or refused; the query
                  failed, returns no id column or a column twice; and here: the lookup
                  took longer than its timeout; an id asked for is held by two rows
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from vfl.contract.spec import TableSource
from vfl.party.errors import DataError
from vfl.party.tables.sql import Database, query_text, result_columns, result_table, table_name

LOOKUP_TIMEOUT_S = 2.0  # a lookup's statement_timeout (well under a scoring timeout)
POOL_SIZE = 2  # idle connections kept per dataset
INTEGER_TYPES = frozenset({"int2", "int4", "int8"})
TEXT_TYPES = frozenset({"text", "varchar"})
INT8 = (-(2**63), 2**63)

T = TypeVar("T")


class Pool:
    """Up to `size` idle connections to one database, made on demand (thread-safe)."""

    def __init__(self, database: Database, settings: dict[str, Any], size: int) -> None:
        self.database, self.settings, self.size = database, settings, size
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> tuple[Any, bool]:
        """An idle connection (False), else a new one (True).

        Raises:
            ConfigError, DataError: a new connection fails (`Database.connect`).
        """
        with self._lock:
            if self._idle:
                return self._idle.pop(), False
        return self.database.connect(**self.settings), True

    def give(self, conn: Any) -> None:
        """Keep `conn` for a later lookup, or close it (broken, the pool full or closed)."""
        with self._lock:
            if not (self._closed or conn.closed or conn.broken or len(self._idle) >= self.size):
                self._idle.append(conn)
                return
        conn.close()

    def clear(self) -> None:
        """Close the idle connections (the server dropped them, or the pool closes)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections now, and those in use when they are given back."""
        with self._lock:
            self._closed = True
        self.clear()


@dataclass(frozen=True)
class IdMatch:
    """How a lookup compares the id column with the ids asked: `statement` takes them as
    one array parameter, `integers` says whether as integers (else as text)."""

    statement: Any  # psycopg.sql.Composed
    integers: bool

    def parameter(self, ids: Sequence[str]) -> list[int] | list[str]:
        """The ids as the statement's parameter (integers: those that are one)."""
        if not self.integers:
            return list(ids)
        return [int(i) for i in ids if _plain_integer(i)]


class Lookup:
    """Dataset `name`'s rows by id, through a pool of connections to its database."""

    def __init__(
        self,
        source: TableSource,
        name: str,
        timeout_s: float = LOOKUP_TIMEOUT_S,
        pool_size: int = POOL_SIZE,
    ) -> None:
        """Connects nothing yet.

        Raises:
            ConfigError: the driver is not installed, or the url cannot be read.
        """
        self.database = Database.of(source, name)
        self.source, self.name, self.timeout_s = source, name, timeout_s
        self.id_column = source.id or "id"  # a sql dataset's default
        settings = {
            "autocommit": True,
            "connect_timeout": max(2, math.ceil(timeout_s)),  # libpq's least
            "options": f"-c statement_timeout={max(1, round(timeout_s * 1000))} "
            "-c default_transaction_read_only=on",
        }
        self.pool = Pool(self.database, settings, pool_size)
        self._match: IdMatch | None = None  # learnt at the first lookup

    def describe(self) -> pa.Table:
        """No rows, with the query's columns and their types.

        Raises:
            ConfigError, DataError: see the module docstring.
        """
        return self._run(lambda conn: self._learn(conn)[1])

    def rows(self, ids: Sequence[str]) -> pa.Table:
        """The rows of `ids` (those the query returns for them), in the server's order.

        Raises:
            ConfigError, DataError: see the module docstring.
        """
        return self._run(lambda conn: self._select(conn, ids))

    def close(self) -> None:
        self.pool.close()

    def _run(self, work: Callable[[Any], T]) -> T:
        """`work(connection)` on a pooled connection; once more on a new connection if the
        server had dropped the idle one it got."""
        psycopg = _driver()
        while True:
            conn, fresh = self.pool.take()
            try:
                result = work(conn)
            except psycopg.Error as exc:
                dropped = conn.broken and not fresh  # while idle (e.g. a server restart)
                conn.close()  # never reused after a failure (its prepared statements too)
                self._match = None  # the query may have changed: learnt again
                if dropped:
                    self.pool.clear()
                    continue
                raise self._failed(exc, psycopg) from None
            except BaseException:
                conn.close()
                raise
            self.pool.give(conn)
            return result

    def _select(self, conn: Any, ids: Sequence[str]) -> pa.Table:
        match = self._match or self._learn(conn)[0]
        with conn.cursor() as cur:
            cur.execute(match.statement, [match.parameter(ids)])
            columns = result_columns(cur.description, conn, self.source, self.name)
            table = result_table(cur.fetchall(), columns, self.source, self.name)
        return self._asked(table, ids)

    def _learn(self, conn: Any) -> tuple[IdMatch, pa.Table]:
        """How to compare the id column (by its type), and no rows of the query."""
        from psycopg import sql

        with conn.cursor() as cur:
            cur.execute(sql.SQL("{} LIMIT 0").format(self._base()))
            columns = result_columns(cur.description, conn, self.source, self.name)
            at = [d.name for d in cur.description].index(self.id_column)
            info = conn.adapters.types.get(cur.description[at].type_code)
        kind = "" if info is None else info.name
        column = sql.SQL("q.{}").format(sql.Identifier(self.id_column))
        if kind in INTEGER_TYPES:
            condition = sql.SQL("{} = ANY(%s::int8[])").format(column)
        elif kind in TEXT_TYPES:
            condition = sql.SQL("{} = ANY(%s::text[])").format(column)
        else:
            condition = sql.SQL("{}::text = ANY(%s::text[])").format(column)
        statement = sql.SQL("{} WHERE {}").format(self._base(), condition)
        self._match = IdMatch(statement, kind in INTEGER_TYPES)
        return self._match, result_table([], columns, self.source, self.name)

    def _base(self) -> Any:
        """SELECT * FROM the dataset's table or query, as `q`; a `%` of the query doubled
        (it runs with a parameter: `%` starts a placeholder)."""
        from psycopg import sql

        if self.source.table is not None:
            return sql.SQL("SELECT * FROM {} AS q").format(table_name(self.source))
        query = sql.SQL(query_text(self.source).replace("%", "%%"))
        return sql.SQL("SELECT * FROM ({}) AS q").format(query)

    def _asked(self, table: pa.Table, ids: Sequence[str]) -> pa.Table:
        """The rows of `table` whose id (stripped, as a snapshot is read) is one of `ids`.

        Raises:
            DataError: two rows hold the same id.
        """
        held = pc.utf8_trim_whitespace(table.column(self.id_column))
        table = table.filter(pc.is_in(held, value_set=pa.array(list(ids), pa.string())))
        kept = pc.utf8_trim_whitespace(table.column(self.id_column))
        if len(pc.unique(kept)) < table.num_rows:
            raise DataError(
                f"dataset '{self.name}': its query returns more than one row for an id "
                "asked for; make its id column unique (a row per id)",
                public=f"dataset '{self.name}': the party's query returns two rows for one "
                "id; the party must make its ids unique",
            )
        return table

    def _failed(self, exc: Exception, psycopg: Any) -> DataError:
        """The named error of a lookup that failed with the driver's `exc`."""
        name = self.name
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return DataError(
                f"dataset '{name}': a lookup on the database at {self.database.server} took "
                f"longer than {self.timeout_s:g} s and was cancelled (statement_timeout); "
                f"index the id column '{self.id_column}', or make the query cheaper",
                public=f"dataset '{name}': the party's database took longer than "
                f"{self.timeout_s:g} s to look ids up; the party must speed its query up",
            )
        if isinstance(exc, psycopg.OperationalError):  # the connection went down mid-lookup
            return DataError(
                f"dataset '{name}': the database at {self.database.server} dropped the "
                "connection during a lookup; start it again, or check the server's log",
                public=f"dataset '{name}': the party's database cannot be reached; the "
                "party must start it or fix its config",
            )
        return self.database.query_failed(exc)


def _plain_integer(text: str) -> bool:
    """Whether `text` is an integer as PostgreSQL's int8 prints it ("7", "-3")."""
    try:
        value = int(text)
    except ValueError:
        return False
    return str(value) == text and INT8[0] <= value < INT8[1]


def _driver() -> Any:
    import psycopg  # present: `Database.of` checked it

    return psycopg
