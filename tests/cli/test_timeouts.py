"""A timeout of zero, a negative one or one that is not a number is refused where it is
given: a usage error (exit 2) naming the value in the CLI, a ValueError in the API."""

from __future__ import annotations

import pytest
from vfl.cli.main import main
from vfl.client import Client


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_the_cli_refuses_a_timeout_that_is_not_a_positive_number(value, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["score", "m", "--id", "1", "--party", "127.0.0.1:1", "--timeout", value])
    assert info.value.code == 2
    assert f"{value!r} is not a positive number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize("value", [0, -5, float("nan")])
def test_the_client_refuses_a_timeout_that_is_not_a_positive_number(value) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        Client("127.0.0.1:1", timeout=value)
    client = Client("127.0.0.1:1")
    try:
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            client.score("m", ["1"], party="127.0.0.1:1", timeout=value)
    finally:
        client.close()
