"""TESTS ONLY: pin the Paillier key pairs blindfl parties generate, and read them back from
their checkpoints.

A blindfl party draws its initial weight shares from the job seed *and* its private key
(docs/security.md), so two runs of one job spec with fresh keys start from different
plaintext-equivalent weights. An "uninterrupted run" that a resumed run can be compared
with must therefore use the same key pairs: either pinned ones, or those a run wrote
into its checkpoints (which only a test ever reads outside its party).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from vfl.contract.spec import JobSpec
from vfl.party.state import StateDir
from vfl.secure.config import SecureConfig
from vfl.secure.paillier.keys import KeyPair, generate_keypair
from vfl.secure.source_layers.state import keypair_from_state

TRAINERS = ("vfl.party.training.blindfl.active", "vfl.party.training.blindfl.passive")


def new_keys(parties: Iterable[str], key_bits: int) -> dict[str, KeyPair]:
    config = SecureConfig(key_bits=key_bits, allow_insecure_test_keys=True)
    return {party: generate_keypair(party, config) for party in parties}


class _SeededSecrets:
    """The two `secrets` calls key generation makes, from a seeded generator (TESTS ONLY:
    reproducible keys make accuracy tests deterministic, since shares depend on them)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randbits(self, bits: int) -> int:
        return self._rng.getrandbits(bits)

    def randbelow(self, n: int) -> int:
        return self._rng.randrange(n)


def seeded_keys(monkeypatch, parties: Iterable[str], key_bits: int, seed: int) -> dict:
    """The same INSECURE test key pairs for the same parties, size and seed, every run."""
    with monkeypatch.context() as patch:
        patch.setattr("vfl.secure.paillier.keys.secrets", _SeededSecrets(seed))
        return new_keys(sorted(parties), key_bits)


def pin_keys(monkeypatch, keys: dict[str, KeyPair] | None) -> None:
    """Make the blindfl trainers use `keys` instead of generating key pairs; with None,
    any key generation fails the test (a resumed job must use its checkpoint's keys)."""

    def generate(owner: str, config: SecureConfig) -> KeyPair:
        if keys is None:
            raise AssertionError(f"party '{owner}' generated a key pair while resuming")
        return keys[owner]

    for module in TRAINERS:
        monkeypatch.setattr(f"{module}.generate_keypair", generate)


def checkpointed_keys(
    states: dict[str, StateDir], job_id: str, spec: JobSpec
) -> dict[str, KeyPair]:
    """Every party's key pair from its newest checkpoint of `job_id`."""
    config = SecureConfig(
        key_bits=spec.crypto.key_bits,
        allow_insecure_test_keys=spec.crypto.allow_insecure_test_keys,
    )
    keys = {}
    for party, state in states.items():
        ck = state.load(job_id, state.rounds(job_id)[-1], spec.spec_hash(), party)
        keys[party] = keypair_from_state(ck.state["trainer"]["keypair"], party, config)
    return keys
