"""The tree protocols' messages: tags, packed bits, and receives that name the sender.

Round n (n = 1, 2, ...) of a job (`R` = `tree/r<n>`, level d = 0 .. depth - 1):

    B -> A_k  R/go           control {stop: 0}, or {stop: 1, keep: rounds kept}
    B -> A_k  R/rows         indices: the round's rows (with subsample < 1 only)
    B -> A_k  R/gh           the exchange's (g, h) of those rows (`histograms`)
    A_k -> B  R/d<d>/sizes   indices: candidates per open node
    A_k -> B  R/d<d>/hist    the exchange's candidate sums
    B -> A_k  R/d<d>/pick    int64 tensor: per open node, the candidate of A_k's it
                             takes, or -1
    A_k -> B  R/d<d>/ids     indices: the split ids A_k gave its picked candidates }  when
    A_k -> B  R/d<d>/part    uint8: per picked node, which of its rows go left     }  picked
    B -> A_k  R/d<d>/grow    uint8: which open nodes split, and for each, which of its
                             rows go left (below the last level)
    A_k -> B  R/eval         uint8: A_k's splits of the round on the rows outside the
                             round's and on the validation rows
    B -> A_k  tree/gains     float64: each kept split of A_k's gain (importance)

Scoring (batch `predict/b<n>`, online `score/b<n>`): A_k -> B `<tag>/bits`, uint8: every
split of A_k's on the rows scored. Bits are `np.packbits`, rows in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from vfl.secure.channel import Channel
from vfl.secure.errors import PayloadError
from vfl.secure.wire.payload import (
    Payload,
    control_from_payload,
    control_to_payload,
    indices_from_payload,
    indices_to_payload,
    tensor_from_payload,
    tensor_to_payload,
)

MAX_SPLIT_ID = 1 << 40
T = TypeVar("T")


def round_tag(rnd: int) -> str:
    return f"tree/r{rnd}"


def level_tag(rnd: int, level: int) -> str:
    return f"tree/r{rnd}/d{level}"


GAINS = "tree/gains"


def pack(masks: Sequence[np.ndarray]) -> Payload:
    """Boolean vectors, end to end, as one uint8 tensor of packed bits."""
    bits = np.concatenate([np.zeros(0, dtype=bool), *(np.asarray(m, dtype=bool) for m in masks)])
    return tensor_to_payload(np.packbits(bits))


def unpack(payload: Payload, lengths: Sequence[int]) -> list[np.ndarray]:
    """The boolean vectors of `lengths` that `pack` sent.

    Raises:
        PayloadError: not that many bits.
    """
    total = int(sum(lengths))
    data = tensor_from_payload(payload, shape=((total + 7) // 8,), dtype="uint8")
    bits = np.unpackbits(data, count=total).astype(bool)
    bounds = np.cumsum([0, *lengths])
    return [bits[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def pack_matrix(decisions: np.ndarray) -> Payload:
    """Splits x rows of bools, each split's row packed (`unpack_matrix`)."""
    return tensor_to_payload(np.packbits(decisions, axis=1))


def unpack_matrix(payload: Payload, splits: int, rows: int) -> np.ndarray:
    """Raises:
    PayloadError: not `splits` x `rows` bits."""
    data = tensor_from_payload(payload, shape=(splits, (rows + 7) // 8), dtype="uint8")
    return np.unpackbits(data, axis=1, count=rows).astype(bool)


def go(stop: bool, keep: int = 0) -> Payload:
    return control_to_payload({"stop": int(stop), "keep": keep})


def read_go(payload: Payload) -> tuple[bool, int]:
    fields = control_from_payload(payload, ["stop", "keep"])
    try:
        return fields["stop"] == "1", int(fields["keep"])
    except ValueError:
        raise PayloadError(f"a round's go message holds {fields}") from None


def indices(values: Sequence[int] | np.ndarray) -> Payload:
    return indices_to_payload(np.asarray(values, dtype=np.int64))


def read_indices(payload: Payload, upper: int = MAX_SPLIT_ID) -> np.ndarray:
    return indices_from_payload(payload, upper)


def picks(ties: Sequence[Sequence[int]]) -> Payload:
    """Per open node, the candidates of the receiver's tied at the best gain (none: it
    is not picked), as one int64 tensor: each node's count, then its candidates."""
    flat = [v for node in ties for v in (len(node), *node)]
    return tensor_to_payload(np.asarray(flat, dtype=np.int64))


def read_picks(payload: Payload, nodes: int) -> list[np.ndarray]:
    """Raises:
    PayloadError: not a count and that many candidates for each of `nodes` nodes.
    """
    flat = tensor_from_payload(payload, shape=(None,), dtype="int64")
    out, at = [], 0
    for _ in range(nodes):
        count = int(flat[at]) if at < len(flat) else -1
        if count < 0 or at + 1 + count > len(flat):
            raise PayloadError(f"the picks of {nodes} open nodes do not fit {len(flat)} values")
        out.append(flat[at + 1 : at + 1 + count])
        at += 1 + count
    if at != len(flat):
        raise PayloadError(f"{len(flat) - at} values beyond the picks of {nodes} open nodes")
    return out


def gains(values: np.ndarray) -> Payload:
    return tensor_to_payload(np.asarray(values, dtype=np.float64))


def read_gains(payload: Payload, splits: int) -> np.ndarray:
    return tensor_from_payload(payload, shape=(splits,), dtype="float64")


class Peer:
    """One peer of a role: sends, and receives that name it when what came is
    malformed."""

    def __init__(self, channel: Channel, peer: str, timeout: float) -> None:
        self.channel, self.peer, self.timeout = channel, peer, timeout

    def send(self, tag: str, payload: Payload) -> None:
        self.channel.send(self.peer, tag, payload)

    def recv(self, tag: str) -> Payload:
        return self.channel.recv(self.peer, tag, self.timeout)

    def read(self, tag: str, reader: Callable[..., T], *args: Any) -> T:
        """`reader(payload, *args)` of what came under `tag`.

        Raises:
            PayloadError: it is malformed (names the peer and the tag).
        """
        try:
            return reader(self.recv(tag), *args)
        except PayloadError as exc:
            raise PayloadError(f"party '{self.peer}' sent a malformed {tag}: {exc}") from None


def read_sizes(payload: Payload, nodes: int) -> np.ndarray:
    """Candidates per open node: `nodes` counts.

    Raises:
        PayloadError: not one count per open node.
    """
    sizes = indices_from_payload(payload, MAX_SPLIT_ID)
    if len(sizes) != nodes:
        raise PayloadError(f"{len(sizes)} candidate counts for {nodes} open nodes")
    return sizes


def grow(lefts: Sequence[np.ndarray | None]) -> Payload:
    """Which open nodes split (those with a partition), then each one's partition."""
    flags = np.array([left is not None for left in lefts], dtype=bool)
    return pack([flags, *(left for left in lefts if left is not None)])


def read_grow(payload: Payload, sizes: Sequence[int]) -> list[np.ndarray | None]:
    """Per open node (of `sizes` rows each), which of its rows go left, or None (a leaf).

    Raises:
        PayloadError: not the flags and partitions of these nodes.
    """
    data = tensor_from_payload(payload, shape=(None,), dtype="uint8")
    bits = np.unpackbits(data).astype(bool)
    n = len(sizes)
    if len(bits) < n:
        raise PayloadError(f"{len(bits)} bits cannot flag {n} open nodes")
    flags = bits[:n]
    total = n + int(sum(s for s, f in zip(sizes, flags, strict=True) if f))
    if len(data) != (total + 7) // 8:
        raise PayloadError(f"{len(data)} bytes where the partitions need {(total + 7) // 8}")
    out: list[np.ndarray | None] = []
    at = n
    for size, flag in zip(sizes, flags, strict=True):
        out.append(bits[at : at + size] if flag else None)
        at += size if flag else 0
    return out


def read_split_ids(payload: Payload, first: int, count: int) -> np.ndarray:
    """The split ids a passive party gave its `count` picked candidates: its next ones,
    `first`, `first + 1`, ... (a split's id is its index in the party's table).

    Raises:
        PayloadError: other ids.
    """
    ids = indices_from_payload(payload, MAX_SPLIT_ID)
    if not np.array_equal(ids, np.arange(first, first + count)):
        raise PayloadError(f"split ids {ids[:8].tolist()} where {first}.. ({count}) were due")
    return ids
