"""The active party's side of the PSI (steps 3 and 4 of `secure.psi.protocol`).

It blinds every passive party's points a second time, matches them against its own
points that each passive party blinded a second time, keeps the rows common to all,
orders them by SHA-256(seed, id) and sends each passive party its positions in that
order. Positions refer to the passive party's shuffled list, so the active party never
learns a passive party's row order.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np
from vfl.secure.errors import PayloadError, SecureError
from vfl.secure.psi.curve import POINT_DTYPE, Blinder, OwnSet
from vfl.secure.psi.wire import PsiWire
from vfl.secure.wire.payload import control_to_payload, indices_to_payload

_ORDER_DOMAIN = b"vfl/psi/order/v1\x00"


def run_active(
    wire: PsiWire, blinder: Blinder, own: OwnSet, passives: list[str], seed: int | None
) -> tuple[np.ndarray, int, dict[str, int]]:
    """Match, then send every passive party the result; `own` was already sent blinded.

    Returns this party's aligned row positions, the intersection size (0 means no rows
    were sent: the caller raises) and every party's set size.

    Raises:
        PayloadError: a passive party sent malformed, duplicate or miscounted points.
        PsiError: a passive party aborted.
        ChannelTimeout, ChannelClosed: from the channel.
    """
    try:
        theirs = {peer: _blind_theirs(wire, blinder, peer) for peer in passives}
        mine = {peer: _recv_double(wire, peer, own.size) for peer in passives}
        common, lookups = match(own.size, theirs, mine)
    except SecureError as exc:
        wire.abort(passives, "result", str(exc))
        raise
    sizes = {wire.channel.party_id: own.size}
    sizes.update({peer: points.size for peer, points in theirs.items()})
    result = {"intersection": common.size, **{f"size:{p}": n for p, n in sizes.items()}}
    wire.send(passives, "result", control_to_payload(result))
    if common.size == 0:
        return common, 0, sizes
    rows = own.perm[common]
    order = np.argsort(order_keys([own.canon[r] for r in rows.tolist()], seed), kind="stable")
    for peer in passives:
        wire.send([peer], f"rows/{peer}", indices_to_payload(lookups[peer][common[order]]))
    return rows[order], int(common.size), sizes


def match(
    own_size: int, theirs: dict[str, np.ndarray], mine: dict[str, np.ndarray]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Own shuffled positions whose double-blinded point every peer also holds, and per
    peer a lookup from own shuffled position to the peer's shuffled position (-1: none).

    `theirs[p]`: p's points in p's order; `mine[p]`: own points in own order, both
    double-blinded; each array must hold distinct points.
    """
    present = np.ones(own_size, dtype=bool)
    lookups: dict[str, np.ndarray] = {}
    for peer, their_points in theirs.items():
        _, own_pos, their_pos = np.intersect1d(
            mine[peer], their_points, assume_unique=True, return_indices=True
        )
        lookup = np.full(own_size, -1, dtype=np.int64)
        lookup[own_pos] = their_pos
        present &= lookup >= 0
        lookups[peer] = lookup
    return np.flatnonzero(present), lookups


def order_keys(canon: list[bytes], seed: int | None) -> np.ndarray:
    """Sort keys of the aligned order: SHA-256 of (seed, id); a fresh salt if no seed."""
    salt = secrets.token_bytes(16) if seed is None else str(int(seed)).encode()
    prefix = _ORDER_DOMAIN + salt + b"\x00"
    blob = b"".join([hashlib.sha256(prefix + item).digest() for item in canon])
    return np.frombuffer(blob, dtype=POINT_DTYPE)


def _blind_theirs(wire: PsiWire, blinder: Blinder, peer: str) -> np.ndarray:
    """A passive party's points blinded by both scalars, in its shuffled order."""
    count, chunk = wire.recv_header(peer, f"own/{peer}")
    if count == 0:
        raise PayloadError(f"party '{peer}' sent an empty set")
    blob = b"".join(blinder.stream(wire.recv_points(peer, f"own/{peer}", count, chunk)))
    return _unique_points(blob, peer)


def _recv_double(wire: PsiWire, peer: str, expected: int) -> np.ndarray:
    """This party's points blinded by both scalars, in this party's shuffled order."""
    count, chunk = wire.recv_header(peer, f"double/{peer}")
    if count != expected:
        raise PayloadError(f"party '{peer}' returned {count} points for {expected} sent")
    return _unique_points(b"".join(wire.recv_points(peer, f"double/{peer}", count, chunk)), peer)


def _unique_points(blob: bytes, peer: str) -> np.ndarray:
    points = np.frombuffer(blob, dtype=POINT_DTYPE)
    if np.unique(points).size != points.size:
        raise PayloadError(f"points exchanged with party '{peer}' contain duplicates")
    return points
