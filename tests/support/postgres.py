"""A throwaway PostgreSQL server for tests: Debian's binaries (`apt-get install
postgresql`, which `.ci/run` does when they are missing) in a temporary folder, on a free
loopback port, with a password login, stopped and removed at the end.

PostgreSQL refuses to run as root. Run as root (as CI is), the cluster belongs to the
`postgres` user that the Debian package creates, and its commands run through `runuser`.
`start_postgres()` returns the running server, or the reason it cannot start (no
binaries, no user to run them as, a failed start) for the tests to skip with. A test can
`halt()` the server and `start()` it again (a database that goes down and comes back).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USER = "vfl"  # the server's superuser, also the login the parties' datasets use
DATABASE = "vfl"


@dataclass
class Postgres:
    """A running server: `url` (no password in it) and `password` reach database `vfl`."""

    folder: Path
    bin: Path
    port: int
    password: str
    runas: str | None  # the user the server runs as when this process is root

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def connect(self) -> Any:
        """An autocommit connection as the superuser (psycopg imported here: the tests
        that need no server run without the driver)."""
        import psycopg

        return psycopg.connect(self.url, password=self.password, autocommit=True)

    def execute(self, statement: str, params: Any = None) -> None:
        with self.connect() as conn:
            conn.execute(statement, params)

    def load_csv(self, table: str, path: Path, types: dict[str, str]) -> None:
        """(Re)create `table` with `types` (column -> SQL type, in the file's order) plus a
        column `ord` numbering the rows in file order, and COPY the CSV file into it."""
        columns = ", ".join(f'"{c}" {t}' for c, t in types.items())
        names = ", ".join(f'"{c}"' for c in types)
        with self.connect() as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            conn.execute(f'CREATE TABLE "{table}" ({columns}, ord bigserial)')
            copy = f'COPY "{table}" ({names}) FROM STDIN WITH (FORMAT csv, HEADER true)'
            with conn.cursor().copy(copy) as cp:
                cp.write(path.read_bytes())

    def start(self) -> str | None:
        """Start the server (again, after `halt`) on its port, waiting until it accepts
        connections; None, or why it did not start."""
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        data, log = str(self.folder / "data"), str(self.folder / "server.log")
        done = self._run("pg_ctl", "-D", data, "-l", log, "-w", "-o", options, "start")
        if done.returncode == 0:
            return None
        tail = Path(log).read_text()[-500:] if Path(log).exists() else ""
        return f"pg_ctl start failed: {done.stdout[-500:]}{done.stderr[-500:]}{tail}"

    def halt(self) -> None:
        """Stop the server as an operator would (fast: its sessions are ended), keeping
        its data for `start`."""
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        return _run(self.bin / tool, args, self.runas)


def start_postgres() -> Postgres | str:
    """A server started in a fresh temporary folder, or why none can start."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        return "no PostgreSQL server binaries (apt-get install postgresql)"
    bin_dir = Path(found[-1]).parent
    runas = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no 'postgres' user to run the server as"
        runas = "postgres"
    folder = Path(tempfile.mkdtemp(prefix="vfl-pg-"))
    server = Postgres(folder, bin_dir, _free_port(), "pw-" + secrets.token_hex(12), runas)
    (folder / "pwfile").write_text(server.password + "\n")
    if runas is not None:
        shutil.chown(folder, runas)
        shutil.chown(folder / "pwfile", runas)
    init = ("-D", str(folder / "data"), "-U", USER, "--pwfile", str(folder / "pwfile"))
    done = server._run("initdb", *init, "--auth", "scram-sha-256", "-E", "UTF8", "--no-sync")
    failed = f"initdb failed: {done.stdout[-500:]}{done.stderr[-500:]}" if done.returncode else None
    failed = failed or server.start()
    if failed is not None:
        shutil.rmtree(folder, ignore_errors=True)
        return failed
    (folder / "pwfile").unlink()
    import psycopg

    url = f"postgresql://{USER}@127.0.0.1:{server.port}/postgres"
    with psycopg.connect(url, password=server.password, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")
    return server


def _run(tool: Path, args: tuple[str, ...], runas: str | None) -> subprocess.CompletedProcess:
    command = [str(tool), *args]
    if runas is not None:
        command = ["runuser", "-u", runas, "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
