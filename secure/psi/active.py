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
from collections.abc import Callable, Iterable

import numpy as np
from vfl.secure.errors import PayloadError, SecureError
from vfl.secure.psi.curve import (
    HASH_CHUNK,
    POINT_BYTES,
    Blinder,
    IdColumn,
    OwnSet,
    byte_order,
    distinct,
    equal_rows,
    first_word,
    id_texts,
)
from vfl.secure.psi.wire import PsiWire
from vfl.secure.wire.payload import control_to_payload, indices_to_payload

_ORDER_DOMAIN = b"vfl/psi/order/v1\x00"


KEY_BYTES = 16  # of a double-blinded point, kept to match (unequal points tie with p 2^-128)


def run_active(
    wire: PsiWire,
    blinder: Blinder,
    own: OwnSet,
    passives: list[str],
    seed: int | None,
    send_own: Callable[[], None],
) -> tuple[np.ndarray, int, dict[str, int]]:
    """Stream the own set (`send_own`), blind every passive party's set again and take
    in the own set they blinded again, all at once (so no set waits whole in a mailbox;
    the blinding pool is shared); then match, and send every passive party the result.

    Returns this party's aligned row positions, the intersection size (0 means no rows
    were sent: the caller raises) and every party's set size.

    Raises:
        PayloadError: a passive party sent malformed, duplicate or miscounted points.
        PsiError: a passive party aborted.
        ChannelTimeout, ChannelClosed: from the channel.
    """

    def blind(peer: str) -> Callable[[], np.ndarray]:
        return lambda: _blind_theirs(wire, blinder, peer)

    def take(peer: str) -> Callable[[], np.ndarray]:
        return lambda: _recv_double(wire, peer, own.size)

    def send() -> np.ndarray:
        send_own()
        return np.empty((0, KEY_BYTES), dtype=np.uint8)

    def digests() -> np.ndarray:  # while the pool blinds: no serial step after matching
        return order_words(own.ids, own.size, seed)

    steps = [blind(p) for p in passives] + [take(p) for p in passives]
    try:
        _, order_keys, *keys = wire.together(send, digests, *steps)
        theirs = dict(zip(passives, keys[: len(passives)], strict=True))
        mine = dict(zip(passives, keys[len(passives) :], strict=True))
        common, lookups = match(own.size, theirs, mine)
    except SecureError as exc:
        wire.abort(passives, "result", str(exc))
        raise
    sizes = {wire.channel.party_id: own.size}
    sizes.update({peer: len(keys) for peer, keys in theirs.items()})
    del theirs, mine
    result = {"intersection": common.size, **{f"size:{p}": n for p, n in sizes.items()}}
    wire.send(passives, "result", control_to_payload(result))
    if common.size == 0:
        return common, 0, sizes
    rows = own.perm[common]
    order = _aligned(own.ids, rows, order_keys[rows], seed)
    del order_keys
    for peer in passives:
        wire.send([peer], f"rows/{peer}", indices_to_payload(lookups[peer][common[order]]))
    return rows[order], int(common.size), sizes


def match(
    own_size: int, theirs: dict[str, np.ndarray], mine: dict[str, np.ndarray]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Own shuffled positions whose double-blinded point every peer also holds, and per
    peer a lookup from own shuffled position to the peer's shuffled position (-1: none).

    `theirs[p]`: p's points in p's order; `mine[p]`: own points in own order, both
    double-blinded, as (n, KEY_BYTES) uint8 rows; each array must hold distinct rows.
    """
    present = np.ones(own_size, dtype=bool)
    lookups: dict[str, np.ndarray] = {}
    for peer, their_keys in theirs.items():
        own_pos, their_pos = common_rows(mine[peer], their_keys)
        lookup = np.full(own_size, -1, dtype=np.int64)
        lookup[own_pos] = their_pos
        del own_pos, their_pos
        present &= lookup >= 0
        lookups[peer] = lookup
    return np.flatnonzero(present), lookups


def common_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `a`, positions in `b`) of the rows the two hold alike; `a` and `b`
    are (n, k) uint8 arrays of distinct rows each. Matched on their first 8 bytes when
    those are distinct in each (a sort of `b`'s and a search for `a`'s, then the rest of
    each pair compared), else on every byte. Each temporary is freed as soon as it is
    used: at 1e7 rows a side, every one is 80 MB."""
    a0 = first_word(a)
    by_b = np.argsort(first_word(b))
    ranked = first_word(b)[by_b]
    if distinct(a0) and not np.any(ranked[1:] == ranked[:-1]):
        at = np.searchsorted(ranked, a0)
        np.minimum(at, len(ranked) - 1, out=at)
        hit = ranked[at] == a0
        del a0, ranked
        ia = np.flatnonzero(hit)
        del hit
        ib = by_b[at[ia]]
        del at, by_b
        same = np.ones(len(ia), dtype=bool)  # 8 equal bytes of different points: no match
        for lo in range(0, len(ia), HASH_CHUNK):
            pair = slice(lo, lo + HASH_CHUNK)
            same[pair] = np.all(a[ia[pair]] == b[ib[pair]], axis=1)
        return (ia, ib) if same.all() else (ia[same], ib[same])
    del a0, by_b, ranked
    both = np.concatenate([a, b])
    order = byte_order(both)
    ranked_rows = both[order]
    hits = np.flatnonzero(np.all(ranked_rows[1:] == ranked_rows[:-1], axis=1))
    first, second = order[hits], order[hits + 1]
    return np.minimum(first, second), np.maximum(first, second) - len(a)


def aligned_order(ids: IdColumn, rows: np.ndarray, seed: int | None) -> np.ndarray:
    """The permutation of `rows` (own row positions) into the aligned order: by
    SHA-256(seed, id) (a fresh salt if no seed)."""
    return byte_order(order_digests(ids, rows, seed))


def _aligned(ids: IdColumn, rows: np.ndarray, first: np.ndarray, seed: int | None) -> np.ndarray:
    """`aligned_order` from the first 8 bytes of each row's digest (`first`, as uint64 in
    byte order), with the whole digests hashed again only if two of them tie."""
    if not distinct(first):
        return aligned_order(ids, rows, seed)
    return np.argsort(first.byteswap() if _LITTLE else first)


_LITTLE = np.little_endian


def order_words(ids: IdColumn, count: int, seed: int | None) -> np.ndarray:
    """The first 8 bytes of SHA-256(seed, id) of the first `count` ids (a fresh salt if
    no seed), as uint64 (`first_word`), computed `HASH_CHUNK` ids at a time (never every
    whole digest at once)."""
    salt = _salt(seed)
    out = np.empty(count, dtype=np.uint64)
    for lo in range(0, count, HASH_CHUNK):
        rows = np.arange(lo, min(lo + HASH_CHUNK, count))
        out[lo : lo + len(rows)] = first_word(order_digests(ids, rows, seed, salt))
    return out


def _salt(seed: int | None) -> bytes:
    return secrets.token_bytes(16) if seed is None else str(int(seed)).encode()


def order_digests(
    ids: IdColumn, rows: np.ndarray, seed: int | None, salt: bytes | None = None
) -> np.ndarray:
    """The first KEY_BYTES of SHA-256(seed, id) of the ids at `rows` (`salt` if given,
    else a fresh salt if no seed), as (len(rows), KEY_BYTES) uint8 rows, hashed
    `HASH_CHUNK` ids at a time."""
    prefix = _ORDER_DOMAIN + (salt or _salt(seed)) + b"\x00"
    keys = np.empty((len(rows), KEY_BYTES), dtype=np.uint8)
    for lo in range(0, len(rows), HASH_CHUNK):
        canon = id_texts(ids, rows[lo : lo + HASH_CHUNK])
        blob = b"".join([hashlib.sha256(prefix + item).digest()[:KEY_BYTES] for item in canon])
        keys[lo : lo + len(canon)] = np.frombuffer(blob, dtype=np.uint8).reshape(-1, KEY_BYTES)
    return keys


def _blind_theirs(wire: PsiWire, blinder: Blinder, peer: str) -> np.ndarray:
    """A passive party's points blinded by both scalars, in its shuffled order."""
    count, chunk = wire.recv_header(peer, f"own/{peer}")
    if count == 0:
        raise PayloadError(f"party '{peer}' sent an empty set")
    stream = blinder.stream(wire.recv_points(peer, f"own/{peer}", count, chunk))
    return _distinct_keys(stream, count, peer)


def _recv_double(wire: PsiWire, peer: str, expected: int) -> np.ndarray:
    """This party's points blinded by both scalars, in this party's shuffled order."""
    count, chunk = wire.recv_header(peer, f"double/{peer}")
    if count != expected:
        raise PayloadError(f"party '{peer}' returned {count} points for {expected} sent")
    return _distinct_keys(wire.recv_points(peer, f"double/{peer}", count, chunk), count, peer)


def _distinct_keys(blobs: Iterable[bytes], count: int, peer: str) -> np.ndarray:
    """The first KEY_BYTES of each point of a stream of `count` points, as (count,
    KEY_BYTES) uint8 rows, filled as the chunks arrive."""
    keys = np.empty((count, KEY_BYTES), dtype=np.uint8)
    at = 0
    for blob in blobs:
        points = np.frombuffer(blob, dtype=np.uint8).reshape(-1, POINT_BYTES)
        keys[at : at + len(points)] = points[:, :KEY_BYTES]
        at += len(points)
    if not distinct(first_word(keys)) and equal_rows(keys):
        raise PayloadError(f"points exchanged with party '{peer}' contain duplicates")
    return keys
