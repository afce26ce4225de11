"""Masks and shares: statistical masks, pairwise zero-sum masks, private share sampling.

- `statistical_masks`: uniform integers in [0, 2^bits). With bits = (packed value
  width) + sigma, V - R is within statistical distance 2^-sigma of V' - R for any two
  packed values V, V' of that width, so it hides every slot at once (PROTOCOLS 1.3.3).
- `ZeroSumMasks`: each pair of passive parties (j < k) shares a 256-bit seed; for every
  forward step both expand it with SHAKE-256 into values uniform in Z_n (n: the active
  party's modulus); party j adds them and party k subtracts them. The masks of all passive
  parties sum to 0 mod n, so the active party learns only the aggregate of their
  encrypted partial sums, and each single one looks uniform (PROTOCOLS 1.3.5).
- `private_rng`: share sampling seeded by the job seed *and* the party's private key, so
  runs are reproducible for a fixed key while a peer who knows the job seed still cannot
  recompute this party's shares.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import numpy as np
from vfl.secure.errors import StateError
from vfl.secure.paillier.keys import PrivateKey

SEED_BYTES = 32


def statistical_masks(rows: int, cols: int, bits: int) -> list[list[int]]:
    """rows x cols integers uniform in [0, 2^bits), from the OS CSPRNG."""
    return [[secrets.randbits(bits) for _ in range(cols)] for _ in range(rows)]


class ZeroSumMasks:
    """The pairwise masks of one passive party; they cancel over all passive parties."""

    def __init__(self, seeds: dict[str, tuple[int, bytes]]) -> None:
        """`seeds` maps each other passive party to (sign, shared seed), sign = +1 for
        the lower-ranked party of the pair and -1 for the higher-ranked one."""
        self._seeds = dict(seeds)
        self._counter = 0

    @property
    def active(self) -> bool:
        return bool(self._seeds)

    def state_dict(self) -> dict[str, Any]:
        """The pair seeds and the step counter, for a checkpoint between rounds (every
        passive party saves the same counter there, so masks keep cancelling)."""
        seeds = {pid: {"sign": sign, "seed": seed} for pid, (sign, seed) in self._seeds.items()}
        return {"seeds": seeds, "counter": self._counter}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ZeroSumMasks:
        """Raises:
        StateError: a malformed seed. KeyError, TypeError: not a `state_dict()`.
        """
        seeds = {
            str(pid): (int(entry["sign"]), bytes(entry["seed"]))
            for pid, entry in state["seeds"].items()
        }
        if any(sign not in (1, -1) or len(seed) != SEED_BYTES for sign, seed in seeds.values()):
            raise StateError("a saved pair seed of the zero-sum masks is malformed")
        masks = cls(seeds)
        masks._counter = int(state["counter"])
        return masks

    def next_masks(self, tag: str, rows: int, cols: int, modulus: int) -> list[list[int]]:
        """This party's mask for its next forward step (all parties call it in step)."""
        self._counter += 1
        nbytes = (int(modulus).bit_length() + 7) // 8 + 8
        total = [[0] * cols for _ in range(rows)]
        for _, (sign, seed) in sorted(self._seeds.items()):
            label = f"{self._counter}|{tag}".encode()
            stream = hashlib.shake_256(seed + label).digest(rows * cols * nbytes)
            for i in range(rows):
                for c in range(cols):
                    at = (i * cols + c) * nbytes
                    value = int.from_bytes(stream[at : at + nbytes], "big") % modulus
                    total[i][c] = (total[i][c] + sign * value) % modulus
        return total


def pair_sign(own: str, peer: str, order: list[str]) -> int:
    """+1 if `own` comes before `peer` in the passive-party order, else -1."""
    return 1 if order.index(own) < order.index(peer) else -1


def new_seed() -> bytes:
    return secrets.token_bytes(SEED_BYTES)


def private_rng(seed: int, key: PrivateKey, label: str) -> np.random.Generator:
    """A generator that depends on `seed`, `label` and the private key (see module doc)."""
    secret = int(key.p).to_bytes((int(key.p).bit_length() + 7) // 8, "big")
    return secret_rng("vfl-share", seed, label, secret)


def secret_rng(domain: str, seed: int, label: str, secret: bytes) -> np.random.Generator:
    """A generator of the job seed, `label` and a party's `secret` (key bytes), in its
    own `domain`: a peer that knows the seed cannot recompute what it draws."""
    h = hashlib.sha256(f"{domain}|{label}|{seed}|".encode())
    h.update(secret)
    return np.random.default_rng(int.from_bytes(h.digest(), "big"))


def sample_share(rng: np.random.Generator, in_dim: int, out_dim: int) -> np.ndarray:
    """One additive share of a weight matrix: N(0, 1/(6 in_dim)) entries, so the sum of
    two shares has the variance 1/(3 in_dim) of torch's default Linear initialisation."""
    std = 1.0 / np.sqrt(6.0 * max(in_dim, 1))
    return rng.normal(0.0, std, size=(in_dim, out_dim))
