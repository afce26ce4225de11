"""A source layer's state between rounds as plain values, for checkpoints.

Each layer role's `state_dict()` returns, and its `load_state_dict()` takes, a dict of
ints, strings, bytes, lists and numpy arrays only (`secure.source_layers.role.LayerRole`:
its key, obfuscator tables and parameters, then the role's own fields): a ciphertext
matrix is one blob of fixed-width big-endian integers (its wire form, `cipher_state`), a
public key its modulus (a peer's h_s is not kept: only its owner uses it), the layer
parameters their fields. `load_state_dict()` replaces `setup()` when a job resumes:
nothing is exchanged, and every ciphertext a party holds stays under the restored keys
of its peers.

A party's own key pair is not part of a layer's state (both layers of a party share
it): its owner saves it once (`keypair_state`: the primes and h_s, which a state
written before h_s existed lacks; such a key makes statistical obfuscators only) and
hands it back to the layers' constructors. A layer's state names the public key it was
written with, and loading it into a layer with another key pair is refused. The secret
bases of the layer's fixed-base obfuscator tables are state (`tables_state`), so that a
resumed job or a prediction skips their exponentiations (short-exponent tables hold no
secret and are rebuilt, in 0.1 s); the obfuscators ready in its pools are not (they
refill). Not state either: the values a forward step keeps for its backward step
(checkpoints are taken between rounds).

Loading raises `StateError` naming what does not fit (or `PaillierKeyError` for a key
below the minimum size).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

import numpy as np
from gmpy2 import mpz
from vfl.secure.config import SecureConfig, check_key_bits
from vfl.secure.errors import PaillierKeyError, PayloadError, SecureError, StateError
from vfl.secure.paillier.blocks import int_bytes
from vfl.secure.paillier.cipher_matrix import join_blob, split_blob
from vfl.secure.paillier.keys import KeyPair, PrivateKey, PublicKey, warn_if_test_key

LayerState: TypeAlias = dict[str, Any]  # noqa: UP040


class LayerParamsLike(Protocol):
    """What the parameters of either layer (a frozen dataclass) have in common here."""

    @property
    def passive_ids(self) -> tuple[str, ...]: ...


P = TypeVar("P", bound=LayerParamsLike)


@contextmanager
def reading(what: str) -> Iterator[None]:
    """Turn a missing or mistyped field of a saved state, or saved parameters this layer
    refuses, into a `StateError` naming `what`."""
    try:
        yield
    except PayloadError as exc:
        raise StateError(f"{what} does not fit this layer: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise StateError(
            f"{what} lacks a field or holds one of the wrong type ({exc!r}); it was written "
            "by another version or for another layer"
        ) from None


def modulus_state(key: PublicKey) -> bytes:
    """How a state names a public key: its modulus."""
    return int_bytes(key.n)


def public_key_from_state(
    data: bytes, owner: str, config: SecureConfig, h_s: bytes | None = None
) -> PublicKey:
    """A peer's (or our own) public key from its saved modulus (and h_s, if saved).

    Raises:
        StateError: not an odd modulus of `config.key_bits` bits, or a malformed h_s.
        PaillierKeyError: below the minimum key size.
    """
    n = mpz(int.from_bytes(bytes(data), "big"))
    if n < 3 or n % 2 == 0:
        raise StateError(f"the saved public key of '{owner}' is not an odd modulus; it is corrupt")
    bits = int(n.bit_length())
    check_key_bits(bits, config.allow_insecure_test_keys, owner)
    if bits != config.key_bits:
        raise StateError(
            f"the saved public key of '{owner}' has {bits} bits, this job uses "
            f"{config.key_bits}; resume with the job's own crypto settings"
        )
    if h_s is None:
        return PublicKey(n, owner)
    try:
        return PublicKey(n, owner, mpz(int.from_bytes(bytes(h_s), "big")))
    except PaillierKeyError as exc:
        raise StateError(f"the saved public key of '{owner}' is corrupt: {exc}") from None


def keypair_state(keypair: KeyPair) -> LayerState:
    """A party's own key pair: its owner, the primes (the private key) and h_s, if the
    key has one. Only ever written into that party's own state directory."""
    private, public = keypair.private, keypair.public
    state = {"owner": public.owner, "p": int_bytes(private.p), "q": int_bytes(private.q)}
    if public.h_s is not None:
        state["h_s"] = int_bytes(public.h_s)
    return state


def keypair_from_state(state: LayerState, owner: str, config: SecureConfig) -> KeyPair:
    """A saved key pair; one saved without h_s (an older state) loads without it.

    Raises:
        StateError: the key pair of another party, of another size, or corrupt (h_s
            included).
        PaillierKeyError: below the minimum key size.
    """
    with reading(f"the saved key pair of '{owner}'"):
        saved_owner = str(state["owner"])
        p, q = (mpz(int.from_bytes(bytes(state[f]), "big")) for f in ("p", "q"))
        h_s = bytes(state["h_s"]) if "h_s" in state else None
    if saved_owner != owner:
        raise StateError(f"the saved key pair belongs to '{saved_owner}', not to '{owner}'")
    if p < 3 or q < 3 or p == q:
        raise StateError(f"the saved key pair of '{owner}' is corrupt")
    public = public_key_from_state(int_bytes(p * q), owner, config, h_s)
    warn_if_test_key(public)
    try:
        return KeyPair(public, PrivateKey(public, p, q))
    except PaillierKeyError as exc:
        raise StateError(f"the saved key pair of '{owner}' is corrupt: {exc}") from None


def check_own_key(saved: bytes, key: PublicKey, what: str) -> None:
    """Raises:
    StateError: `what` was saved by a layer with another key pair than `key`'s.
    """
    if bytes(saved) != modulus_state(key):
        raise StateError(
            f"{what} was saved with another key pair of '{key.owner}'; load it with the "
            "key pair of the same checkpoint"
        )


def cipher_state(rows: list[list[mpz]], key: PublicKey) -> LayerState:
    """Ciphertext rows under `key` as (rows, cols, blob)."""
    return {"rows": len(rows), "cols": len(rows[0]) if rows else 0, "blob": join_blob(rows, key)}


def cipher_from_state(
    state: LayerState, key: PublicKey, shape: tuple[int, int], what: str
) -> list[list[mpz]]:
    """Raises:
    StateError: another shape than `shape`, or values that are not ciphertexts of `key`.
    """
    with reading(what):
        saved = (int(state["rows"]), int(state["cols"]))
        blob = bytes(state["blob"])
    if saved != shape:
        raise StateError(f"{what} has shape {list(saved)}, this layer expects {list(shape)}")
    rows = split_blob(blob, key, shape[1])
    if rows is None or len(rows) != shape[0]:
        raise StateError(f"{what} does not hold ciphertexts of the key of '{key.owner}'")
    return rows


@dataclass(frozen=True)
class SavedTable:
    """The secret bases of one fixed-base obfuscator table and the key they serve."""

    key: PublicKey
    bases: list[list[mpz]]  # one list per modulus (n^2, or p^2 and q^2 for the owner)


def tables_state(tables: dict[str, tuple[PublicKey, list[list[mpz]]]]) -> LayerState:
    """Fixed-base table bases by key owner: the key's modulus and one blob of
    `key.width`-byte integers per modulus. Secret, like the private key: only ever
    written into the party's own state directory."""
    return {
        owner: {"key": modulus_state(key), "bases": [join_blob([row], key) for row in bases]}
        for owner, (key, bases) in tables.items()
    }


def tables_from_state(state: LayerState) -> dict[str, SavedTable]:
    """Raises:
    StateError: a field is missing or mistyped, or a blob does not hold whole values in
        [1, n^2) of its key.
    """
    what = "the saved obfuscator tables"
    out = {}
    with reading(what):
        for owner, saved in state.items():
            key = PublicKey(mpz(int.from_bytes(bytes(saved["key"]), "big")), str(owner))
            if key.n < 3:
                raise StateError(f"{what} of '{owner}' name no key; they are corrupt")
            rows = []
            for blob in saved["bases"]:
                data = bytes(blob)
                values = split_blob(data, key, max(1, len(data) // key.width))
                if values is None or len(values) != 1:
                    raise StateError(f"{what} of '{owner}' are corrupt")
                rows.append(values[0])
            out[str(owner)] = SavedTable(key, rows)
    return out


def array_from_state(
    value: Any, shape: tuple[int, ...], what: str, dtype: type = np.float64
) -> np.ndarray:
    """A saved array of `shape`, as a fresh array of `dtype`.

    Raises:
        StateError: another shape, or non-finite values.
    """
    arr = np.asarray(value)
    if arr.shape != shape or not np.all(np.isfinite(arr)):
        raise StateError(f"{what} has shape {list(arr.shape)}, expected {list(shape)} finite")
    return np.array(arr, dtype=dtype)


def params_state(params: Any) -> LayerState:
    """A layer's parameters (a frozen dataclass of ints and the passive ids)."""
    return {**asdict(params), "passive_ids": list(params.passive_ids)}


def params_from_state(cls: type[P], state: LayerState, what: str) -> P:
    """Raises:
    StateError: fields missing, unknown or mistyped.
    """
    with reading(what):
        return cls(**{**state, "passive_ids": tuple(str(p) for p in state["passive_ids"])})


def restored_params(cls: type[P], state: LayerState, key: PublicKey, loaded: bool, what: str) -> P:
    """The layer parameters of a saved state, once it is known to fit a new layer: one that
    has neither run `setup()` nor loaded a state (`loaded`), with the key pair it was saved
    under (`key`).

    Raises:
        SecureError: the layer was set up or loaded already.
        StateError: saved under another key pair, or its parameters are missing or mistyped.
    """
    if loaded:
        raise SecureError("load_state_dict() replaces setup(); call it on a new layer")
    with reading(what):
        check_own_key(state["key"], key, what)
        return params_from_state(cls, state["params"], what)
