"""The WAN shaper delays every envelope by its serialisation time plus half the RTT."""

from __future__ import annotations

import time

import numpy as np
import pytest
from vfl.contract.spec import NetworkSpec
from vfl.party.transport.wan import ShapedChannel
from vfl.secure.channel import InProcessHub
from vfl.secure.wire.payload import tensor_to_payload


def pair(profile: NetworkSpec):
    hub = InProcessHub()
    return ShapedChannel(hub.channel("a"), profile), ShapedChannel(hub.channel("b"), profile)


def test_round_trip_pays_the_rtt() -> None:
    a, b = pair(NetworkSpec(bandwidth_mbps=1000, rtt_ms=60))
    small = tensor_to_payload(np.zeros(4, np.float32))
    start = time.monotonic()
    for i in range(3):
        a.send("b", f"ping{i}", small)
        b.recv("a", f"ping{i}")
        b.send("a", f"pong{i}", small)
        a.recv("b", f"pong{i}")
    per_round_trip = (time.monotonic() - start) / 3
    assert 0.060 <= per_round_trip < 0.060 + 0.1


def test_bandwidth_limits_big_envelopes_and_pipelines_them() -> None:
    a, b = pair(NetworkSpec(bandwidth_mbps=20, rtt_ms=0))
    payload = tensor_to_payload(np.zeros(125_000, np.float32))  # 0.5 MB = 0.2 s at 20 Mbit/s
    start = time.monotonic()
    for i in range(3):
        a.send("b", f"t{i}", payload)
    for i in range(3):
        b.recv("a", f"t{i}")
    elapsed = time.monotonic() - start
    expected = 3 * payload.ByteSize() * 8 / 20e6
    assert expected <= elapsed < expected + 0.25


def test_profile_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="bandwidth_mbps"):
        NetworkSpec(bandwidth_mbps=0, rtt_ms=10)


def test_flush_waits_for_envelopes_in_flight() -> None:
    a, b = pair(NetworkSpec(bandwidth_mbps=1000, rtt_ms=200))
    a.send("b", "last", tensor_to_payload(np.zeros(4, np.float32)))
    a.flush()
    assert b.recv("a", "last", timeout=0.01).WhichOneof("kind") == "tensor"
