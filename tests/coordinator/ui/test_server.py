"""Starting the dashboard: its address, a port already taken, and what is left behind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from vfl.coordinator.errors import CoordinatorError
from vfl.coordinator.server import create_coordinator_server
from vfl.coordinator.ui.server import parse_listen

pytestmark = pytest.mark.grpc


@pytest.mark.parametrize("bad", ["8080", "localhost", ":8080", "127.0.0.1:http", "h:70000"])
def test_an_address_that_is_not_host_port_names_the_flag(bad: str) -> None:
    with pytest.raises(CoordinatorError, match=r"--ui .* is not host:port; e\.g\. --ui 127"):
        parse_listen(bad)


def test_loopback_is_told_apart() -> None:
    assert parse_listen("127.0.0.1:0").loopback and parse_listen("[::1]:8080").loopback
    assert parse_listen("localhost:1").loopback and not parse_listen("0.0.0.0:8080").loopback


def test_a_taken_port_fails_the_start_and_frees_the_database(tmp_path: Path) -> None:
    # Prepare: a port something else listens on
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    db = str(tmp_path / "jobs.sqlite")
    try:
        # Execute / Assert: the coordinator does not start half-way
        with pytest.raises(CoordinatorError, match=rf"--ui 127.0.0.1:{port}: cannot listen"):
            create_coordinator_server(db, "127.0.0.1:0", ui=f"127.0.0.1:{port}")
    finally:
        taken.close()
    # the database lock was released: another coordinator starts on it
    again = create_coordinator_server(db, "127.0.0.1:0", ui="127.0.0.1:0")
    assert again.ui is not None and again.ui.url.startswith("http://127.0.0.1:")
    again.stop(0)
