"""The WOE exchange's active side against a passive party that sends malformed bins or
sums: the job fails naming that party (a `JobError`), never an IndexError or a WOE of
impossible counts. Small test keys (768 bits)."""

from __future__ import annotations

import threading

import gmpy2
import numpy as np
import pytest
from vfl.party.analysis.protocol import TAG, active_exchange
from vfl.party.errors import JobError
from vfl.secure.channel import InProcessHub
from vfl.secure.histograms import (
    EncryptedBuckets,
    layout_from_payload,
    pack,
    packed_to_payload,
    rows_from_payload,
)
from vfl.secure.wire.keys import ou_public_key_from_payload
from vfl.secure.wire.payload import control_to_payload

from tests.party.test_secureboost import secure_spec

SPEC = secure_spec({"count": 1, "depth": 1})


def hostile_passive(channel, fields: dict[str, str], sums: list[tuple[int, int]] | None) -> None:
    """Take B's key, layout and rows; answer with `fields` and, when given, bucket sums
    that encrypt `sums` (events, rows) as they are."""
    active = SPEC.active.id
    key = ou_public_key_from_payload(channel.recv(active, f"{TAG}/pk"), active, True)
    layout = layout_from_payload(channel.recv(active, f"{TAG}/layout"), key)
    rows_from_payload(channel.recv(active, f"{TAG}/rows/0"), key, layout)
    channel.send(active, f"{TAG}/bins", control_to_payload(fields))
    if sums is not None:
        parts = [gmpy2.powmod(key.g, e + (r << layout.slot_bits), key.n) for e, r in sums]
        buckets = EncryptedBuckets(key, layout, (len(sums),), parts, layout.rows)
        channel.send(active, f"{TAG}/sums", packed_to_payload(pack(buckets)))


@pytest.mark.parametrize(
    ("fields", "sums", "why"),
    [
        ({"counts": "2,2", "ordered": "2"}, None, "2 columns' bins but other orders"),
        ({"counts": "0"}, None, "a column of no bins"),
        ({"counts": "2"}, [(3, 2), (0, 1)], "more events than rows"),
    ],
)
def test_malformed_bins_or_sums_fail_the_exchange_naming_the_party(fields, sums, why) -> None:
    # Prepare
    hub = InProcessHub()
    bank, shop = hub.channel(SPEC.active.id), hub.channel(SPEC.passives[0].id)
    peer = threading.Thread(target=hostile_passive, args=(shop, fields, sums), daemon=True)
    peer.start()
    # Execute / Assert
    with pytest.raises(JobError, match=f"party '{shop.party_id}' sent .*{why}"):
        active_exchange(bank, SPEC, np.array([1, 0, 1, 0, 0]), None)
    hub.close("test over")
    peer.join(5)
