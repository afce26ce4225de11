"""Shared fixtures of the `secure` tests: one session-scoped set of small TEST keys."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from phe import paillier

from secure.channel import InProcessHub
from secure.config import SecureConfig
from secure.keys import KeyPair, keypair_from_phe

TEST_KEY_BITS = 1024  # INSECURE, tests only (see SecureConfig.allow_insecure_test_keys)
TEST_PARTIES = ("B", "A1", "A2")


def config_for_tests(**overrides) -> SecureConfig:
    """Small test keys, everything in-process, no background threads."""
    settings = dict(
        key_bits=TEST_KEY_BITS,
        allow_insecure_test_keys=True,
        workers=1,
        threads=2,
        obfuscator_pool=0,
        background_refill=False,
        timeout_s=30.0,
    )
    settings.update(overrides)
    return SecureConfig(**settings)


@pytest.fixture(scope="session")
def test_keys() -> dict[str, KeyPair]:
    """One INSECURE 1024-bit test key pair per party name, generated once per session."""
    config = config_for_tests()
    keys = {}
    for party in TEST_PARTIES:
        pk, sk = paillier.generate_paillier_keypair(n_length=TEST_KEY_BITS)
        keys[party] = keypair_from_phe(party, pk, sk, config)
    return keys


def phe_form(keypair: KeyPair) -> tuple[paillier.PaillierPublicKey, paillier.PaillierPrivateKey]:
    """The same key as `phe` objects, for oracle checks."""
    pk = paillier.PaillierPublicKey(int(keypair.public.n))
    return pk, paillier.PaillierPrivateKey(pk, int(keypair.private.p), int(keypair.private.q))


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float) -> float:
    """Assert ||actual - expected|| <= rtol * ||expected|| and return the relative error."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    error = float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-300))
    assert error <= rtol, f"relative error {error:.3g} > {rtol:.3g}"
    return error


def run_parties(*calls: Callable[[], object]) -> list[object]:
    """Run each call in its own thread (a party); re-raise the first failure."""
    results: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def target(i: int, call: Callable[[], object]) -> None:
        try:
            results[i] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return results


@pytest.fixture(params=["inprocess", "grpc"])
def hub(request):
    """The same protocol tests over the in-process channel and over real gRPC servers."""
    if request.param == "inprocess":
        yield InProcessHub()
        return
    from tests.grpc_hub import GrpcHub

    grpc_hub = GrpcHub()
    yield grpc_hub
    grpc_hub.close()
