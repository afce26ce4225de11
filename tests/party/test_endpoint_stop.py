"""A daemon that stops refuses its peers' envelopes as unavailable (their jobs pause),
also one whose header it took before it began to stop and whose job it closed while the
payload came in: that envelope is refused as unavailable too, never as an ended job."""

from __future__ import annotations

import pytest
from vfl.party.errors import ShuttingDown
from vfl.party.transport.endpoint import Endpoint
from vfl.secure.channel import Mailbox
from vfl.secure.errors import ChannelClosed


def endpoint(mailbox: Mailbox) -> Endpoint:
    return Endpoint("shop", None, lambda job, sender, tag: mailbox, lambda *a: None, 1 << 20)


def test_an_envelope_admitted_before_the_stop_is_refused_as_unavailable() -> None:
    mailbox = Mailbox()
    ends = endpoint(mailbox)
    arrival = ends.admit("job", "bank", "shop", "train/r2/grad", 3)
    assert arrival is not None
    ends.stop_taking()
    mailbox.close("party daemon shutting down")
    with pytest.raises(ShuttingDown, match="party 'shop' is shutting down"), arrival:
        arrival.deliver(b"abc")
    with pytest.raises(ShuttingDown):
        ends.admit("job", "bank", "shop", "train/r3/grad", 3)


def test_a_job_closed_for_another_reason_is_still_an_ended_job() -> None:
    mailbox = Mailbox()
    ends = endpoint(mailbox)
    arrival = ends.admit("job", "bank", "shop", "train/r2/grad", 3)
    assert arrival is not None
    mailbox.close("cancelled")
    with pytest.raises(ChannelClosed, match="cancelled"), arrival:
        arrival.deliver(b"abc")
    with pytest.raises(ChannelClosed, match="cancelled"):
        ends.admit("job", "bank", "shop", "train/r3/grad", 3)
