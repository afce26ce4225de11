"""Okamoto-Uchiyama keys as plain values, for checkpoints.

A party's own key pair (`keypair_state`: the public key and its factors p, q, t) is only
ever written into that party's own state directory; a peer's public key
(`public_state`) is n, G and H. Both are dicts of big-endian bytes, as the other keys'
states are (`secure.source_layers.state`). Loading re-runs every check of the key
classes, so a corrupt state is an `OuKeyError`, a state of another party or with a field
missing a `StateError`.
"""

from __future__ import annotations

from typing import Any

from gmpy2 import mpz
from vfl.secure.errors import StateError
from vfl.secure.ou.keys import OuKeyPair, OuPrivateKey, OuPublicKey
from vfl.secure.paillier.blocks import int_bytes

_PUBLIC = ("n", "g", "h")
_PRIVATE = ("p", "q", "t")


def _ints(state: dict[str, Any], fields: tuple[str, ...], what: str) -> list[mpz]:
    try:
        return [mpz(int.from_bytes(bytes(state[f]), "big")) for f in fields]
    except (KeyError, TypeError) as exc:
        raise StateError(
            f"{what} lacks a field or holds one of the wrong type ({exc!r}); it was written "
            "by another version"
        ) from None


def public_state(key: OuPublicKey) -> dict[str, Any]:
    return {"owner": key.owner, **{f: int_bytes(getattr(key, f)) for f in _PUBLIC}}


def public_from_state(state: dict[str, Any], owner: str) -> OuPublicKey:
    """Raises:
    StateError: the key of another party, or a field missing.
    OuKeyError: a malformed key.
    """
    what = f"the saved Okamoto-Uchiyama key of '{owner}'"
    if str(state.get("owner")) != owner:
        raise StateError(f"{what} names '{state.get('owner')}': the state is another job's")
    n, g, h = _ints(state, _PUBLIC, what)
    return OuPublicKey(n, g, h, owner)


def keypair_state(keypair: OuKeyPair) -> dict[str, Any]:
    private = keypair.private
    return {
        **public_state(keypair.public),
        **{f: int_bytes(getattr(private, f)) for f in _PRIVATE},
    }


def keypair_from_state(state: dict[str, Any], owner: str) -> OuKeyPair:
    """Raises:
    StateError: the key pair of another party, or a field missing.
    OuKeyError: factors that do not fit the public key.
    """
    public = public_from_state(state, owner)
    p, q, t = _ints(state, _PRIVATE, f"the saved Okamoto-Uchiyama key pair of '{owner}'")
    return OuKeyPair(public, OuPrivateKey(public, p, q, t))
