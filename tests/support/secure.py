"""Helpers of the secure-protocol tests: small TEST keys' config, `phe` oracles, parties
as threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

from phe import paillier
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.keys import KeyPair

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


def phe_form(keypair: KeyPair) -> tuple[paillier.PaillierPublicKey, paillier.PaillierPrivateKey]:
    """The same key as `phe` objects, for oracle checks."""
    pk = paillier.PaillierPublicKey(int(keypair.public.n))
    return pk, paillier.PaillierPrivateKey(pk, int(keypair.private.p), int(keypair.private.q))


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
