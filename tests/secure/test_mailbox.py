"""A job's `Mailbox` holds a bounded number of bytes, books room for an envelope before
its payload is read, and drops every payload it holds when it is closed."""

from __future__ import annotations

import pytest
from vfl.secure.channel import Mailbox
from vfl.secure.errors import ChannelBusy, ChannelClosed, PayloadError

MiB = 1 << 20


def test_room_is_booked_before_the_payload_and_counted_until_it_is_taken() -> None:
    box = Mailbox(max_bytes=10 * MiB)
    assert box.reserve("shop", "a", 6 * MiB)
    with pytest.raises(
        ChannelBusy, match="holds 6.0 MiB of its 10.0 MiB.*'b' of 5.0 MiB from party 'shop'"
    ):
        box.reserve("shop", "b", 5 * MiB)  # refused before a byte of it is read
    with pytest.raises(ChannelBusy, match="'a' from party 'shop' is still arriving"):
        box.reserve("shop", "a", 6 * MiB)
    box.fill("shop", "a", b"6" * 6 * MiB)
    assert not box.reserve("shop", "a", 6 * MiB)  # a duplicate: nothing to read
    assert box.held_bytes == 6 * MiB
    assert box.get("shop", "a") == b"6" * 6 * MiB
    assert box.held_bytes == 0 and box.put("shop", "b", b"5" * 5 * MiB)


def test_room_of_an_envelope_that_never_came_whole_is_given_back() -> None:
    box = Mailbox(max_bytes=10)
    assert box.reserve("shop", "a", 8)
    box.cancel("shop", "a")
    assert box.held_bytes == 0
    assert box.put("shop", "a", b"x" * 8)  # a retry of it is taken
    with pytest.raises(PayloadError, match="more than the mailbox holds"):
        box.reserve("shop", "big", 11)


def test_closing_drops_every_payload_and_refuses_the_rest() -> None:
    # Prepare: two envelopes nobody takes, one still arriving
    box = Mailbox(max_bytes=100)
    box.put("shop", "unknown/1", b"x" * 30)
    box.put("shop", "unknown/2", b"x" * 30)
    box.reserve("shop", "late", 30)
    # Execute
    box.close("job finished")
    # Assert: nothing held once the late one is refused; every call says why
    assert box.held_bytes == 30
    with pytest.raises(ChannelClosed, match="job finished"):
        box.fill("shop", "late", b"x" * 30)
    assert box.held_bytes == 0
    with pytest.raises(ChannelClosed, match="job finished"):
        box.get("shop", "unknown/1", timeout=0)
    with pytest.raises(ChannelClosed):
        box.put("shop", "more", b"x")
