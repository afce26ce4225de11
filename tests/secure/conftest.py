"""Fixtures of the `secure` tests: one session-scoped set of small TEST keys (Paillier per
party, and one Okamoto-Uchiyama key), and the hub the protocols run over (in-process and
real gRPC)."""

from __future__ import annotations

import pytest
from vfl.secure.channel import InProcessHub
from vfl.secure.ou.keys import OuKeyPair, generate_ou_keypair
from vfl.secure.paillier.keys import KeyPair, generate_keypair

from tests.support.secure import TEST_KEY_BITS, TEST_PARTIES, config_for_tests


@pytest.fixture(scope="session")
def test_keys() -> dict[str, KeyPair]:
    """One INSECURE 1024-bit test key pair (with h_s) per party name, generated once per
    session."""
    config = config_for_tests(key_bits=TEST_KEY_BITS)
    return {party: generate_keypair(party, config) for party in TEST_PARTIES}


@pytest.fixture(scope="session")
def ou_test_key() -> OuKeyPair:
    """One INSECURE 1024-bit Okamoto-Uchiyama test key pair, owned by B, made once per
    session."""
    return generate_ou_keypair("B", TEST_KEY_BITS, allow_insecure_test_keys=True)


@pytest.fixture(params=["inprocess", "grpc"])
def hub(request):
    """The same protocol tests over the in-process channel and over real gRPC servers."""
    if request.param == "inprocess":
        yield InProcessHub()
        return
    from tests.support.grpc_hub import GrpcHub

    grpc_hub = GrpcHub()
    yield grpc_hub
    grpc_hub.close()
