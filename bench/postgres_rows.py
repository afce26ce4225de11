"""The passive party's rows in PostgreSQL for the benchmarks: a throwaway server started
as the tests start one (tests/support/postgres.py: Debian's binaries, a temporary folder,
a free loopback port, a password login), the shop's credit table loaded into it with its
id as an int8 primary key, and the party config's dataset that reads it (`format: sql`,
the password in the daemons' environment). Needs the [sql] extra and Debian's
`postgresql` package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.contract.spec import TableSource

ENV = "VFL_BENCH_PGPASS"  # the variable the daemons read the password from


@dataclass(frozen=True)
class PostgresRows:
    """A table in a running server, and the party config's dataset that reads it."""

    server: Any  # tests.support.postgres.Postgres
    table: str
    source: TableSource

    def scans(self) -> tuple[int, int]:
        """How many scans of the table the server has counted so far: (all, through an
        index). A backend's counts arrive when it is idle a while, or exits."""
        with self.server.connect() as conn:
            row = conn.execute(
                "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0), coalesce(idx_scan, 0) "
                "FROM pg_stat_user_tables WHERE relname = %s",
                (self.table,),
            ).fetchone()
        return int(row[0]), int(row[1])


@contextmanager
def rows_in_postgres(table: TableSource, name: str = "shop_rows") -> Iterator[PostgresRows]:
    """A server holding `table`'s CSV file (id and float columns) as table `name`, and
    the dataset that reads it. The server is stopped and removed on exit."""
    from tests.support.postgres import start_postgres

    server = start_postgres()
    if isinstance(server, str):
        raise SystemExit(f"--sql: no PostgreSQL server can start: {server}")
    try:
        path = Path(table.path)
        header = path.read_text().split("\n", 1)[0].split(",")
        types = {c: "int8" if c == table.id else "float8" for c in header}
        server.load_csv(name, path, types)
        server.execute(f'ALTER TABLE "{name}" DROP COLUMN ord, ADD PRIMARY KEY ("{table.id}")')
        server.execute(f'ANALYZE "{name}"')
        os.environ[ENV] = server.password  # the party daemons started later inherit it
        given = {"format": "sql", "url": server.url, "table": name, "password_env": ENV}
        yield PostgresRows(server, name, TableSource.model_validate({**given, "id": table.id}))
    finally:
        os.environ.pop(ENV, None)
        server.stop()
