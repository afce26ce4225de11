"""The histogram exchange: the one seam between the tree learner and its protocol.

Each round the active party hands every passive party the (g, h) of the round's rows
(`Gradients.payload`), each passive party sums them per (own column, bin) over the rows of
each node (`Histograms.build`, or a parent's minus its smaller child's: `subtract`),
takes each candidate split's left-side sums from them (`select`) and sends those
(`payload`); the active party reads them back as an array per node (`Gradients.sums`).
Everything else, candidates, gains, partitions, trees, is the same whatever the protocol:

    protocol: split         `PlainGradients`, `PlainHistograms` (here): (g, h) as float64
                            tensors, sums in the clear
    protocol: secureboost   the same four steps over Okamoto-Uchiyama ciphertexts of
                            each row's (g, h) (`encrypted`, over `vfl.secure.histograms`):
                            one encryption per row per round, ciphertext products per
                            bucket, candidates' sums packed several to a ciphertext, one
                            decryption per packed ciphertext at the active party

Around the exchange, a protocol may exchange keys before the first round and keep them
in each party's checkpoints: its `ActiveSide` and `PassiveSide` (`protocols.SIDES`).

A histogram is whatever the protocol sums into (an array here, ciphertexts there); only
its own `Histograms` reads it. The active party's own columns always take the plaintext
kernel (`PlainHistograms.load_array`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from vfl.party.training.trees.candidates import Candidates, Layout
from vfl.party.training.trees.wire import Peer
from vfl.secure.errors import PayloadError
from vfl.secure.wire.payload import Payload, tensor_from_payload, tensor_to_payload

CHUNK_ROWS = 8192  # rows summed at a time (a chunk's rows x columns of bucket ids)


class Gradients(Protocol):
    """The active party's side of the exchange (one per passive party and round)."""

    def payload(self, gh: np.ndarray) -> Payload:
        """The round's (g, h): rows x 2K (tree k's g and h in columns 2k, 2k + 1)."""
        ...

    def sums(
        self, payload: Payload, sizes: Sequence[int], trees: Sequence[int]
    ) -> list[np.ndarray]:
        """A level's candidate sums from one passive party: per node, candidates x 2
        (left-side g, h), `sizes[i]` candidates for node i of tree `trees[i]`.

        Raises:
            PayloadError: not the sums of that many candidates.
        """
        ...


class Histograms(Protocol):
    """A passive party's side of the exchange over its own bin codes."""

    def load(self, payload: Payload, rows: int) -> int:
        """Take the round's (g, h) of its `rows` rows; returns K, the trees of the round.

        Raises:
            PayloadError: not the (g, h) of that many rows.
        """
        ...

    def build_each(self, nodes: Sequence[tuple[np.ndarray, int]]) -> list[Any]:
        """For each (positions, k): tree k's (g, h) summed per bucket over the round's rows
        at those positions (a level's nodes at once)."""
        ...

    def subtract(self, parent: Any, child: Any) -> Any:
        """A parent's histogram minus one of its children's: the other child's."""
        ...

    def select(self, hist: Any, cands: Candidates) -> Any:
        """The left-side sums of each candidate (in `cands`' order)."""
        ...

    def payload(self, sums: Sequence[Any]) -> Payload:
        """A level's `select`ed sums, node after node, as sent to the active party."""
        ...

    def close(self) -> None:
        """Release what the round's sums hold (the executor's shared rows)."""
        ...


class PlainGradients:
    """`protocol: split`: (g, h) and the candidates' sums cross as float64 tensors."""

    def payload(self, gh: np.ndarray) -> Payload:
        return tensor_to_payload(np.asarray(gh, dtype=np.float64))

    def sums(
        self, payload: Payload, sizes: Sequence[int], trees: Sequence[int]
    ) -> list[np.ndarray]:
        total = int(sum(sizes))
        flat = tensor_from_payload(payload, shape=(total, 2), dtype="float64")
        bounds = np.cumsum([0, *sizes])
        return [flat[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


class PlainHistograms:
    """The plaintext kernel: numpy sums of (g, h) per bucket over a party's bin codes."""

    def __init__(self, codes: np.ndarray, layout: Layout) -> None:
        """`codes`: the round's rows' bin codes (rows x columns), laid out by `layout`."""
        self.codes, self.layout = codes, layout
        self.gh = np.zeros((len(codes), 0))

    def load(self, payload: Payload, rows: int) -> int:
        gh = tensor_from_payload(payload, shape=(rows, None), dtype="float64")
        if gh.shape[1] < 2 or gh.shape[1] % 2:
            raise PayloadError(f"(g, h) must come in column pairs, got {gh.shape[1]} columns")
        return self.load_array(gh)

    def load_array(self, gh: np.ndarray) -> int:
        """Take (g, h) already in the clear (the active party's own columns)."""
        self.gh = np.asarray(gh, dtype=np.float64)
        return self.gh.shape[1] // 2

    def build_each(self, nodes: Sequence[tuple[np.ndarray, int]]) -> list[np.ndarray]:
        return [
            bucket_sums(self.codes, self.layout, rows, self.gh[:, 2 * k : 2 * k + 2])
            for rows, k in nodes
        ]

    def subtract(self, parent: np.ndarray, child: np.ndarray) -> np.ndarray:
        return parent - child

    def select(self, hist: np.ndarray, cands: Candidates) -> np.ndarray:
        return cands.left_sums(hist)

    def payload(self, sums: Sequence[np.ndarray]) -> Payload:
        return tensor_to_payload(np.concatenate([np.zeros((0, 2)), *sums]))

    def close(self) -> None:
        """Nothing held."""


def bucket_sums(
    codes: np.ndarray, layout: Layout, node: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Per bucket, the sums of `weights` (rows x m) over the rows `node` of `codes`
    (buckets x m), or without weights the rows' count per bucket (int64, buckets)."""
    buckets, width = layout.buckets, codes.shape[1]
    out = np.zeros(buckets if weights is None else (buckets, weights.shape[1]))
    if not width:
        return out.astype(np.int64) if weights is None else out
    for lo in range(0, len(node), CHUNK_ROWS):
        rows = node[lo : lo + CHUNK_ROWS]
        ids = (codes[rows].astype(np.int64) + layout.offsets[:-1]).ravel()
        if weights is None:
            out += np.bincount(ids, minlength=buckets)
            continue
        for c in range(weights.shape[1]):
            w = np.repeat(weights[rows, c], width)
            out[:, c] += np.bincount(ids, weights=w, minlength=buckets)
    return out.astype(np.int64) if weights is None else out


class ActiveSide(Protocol):
    """The active party's part of a protocol around the exchange: what it sends its
    peers before the first round (`setup`), keeps in its checkpoints, and its
    `Gradients` (one for every peer: a round's (g, h) is encrypted once)."""

    def setup(self, peers: Sequence[Peer]) -> None: ...
    def state(self) -> dict[str, Any]: ...
    def restore(self, state: dict[str, Any]) -> None: ...
    def gradients(self) -> Gradients: ...


class PassiveSide(Protocol):
    """A passive party's part: what it takes from the active party before the first
    round, keeps in its checkpoints, and its `Histograms` of a round's bin codes."""

    def setup(self, active: Peer) -> None: ...
    def state(self) -> dict[str, Any]: ...
    def restore(self, state: dict[str, Any]) -> None: ...
    def histograms(self, codes: np.ndarray, layout: Layout) -> Histograms: ...


class PlainActive:
    """`protocol: split`: no keys."""

    def setup(self, peers: Sequence[Peer]) -> None:
        """Nothing to send."""

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Nothing kept."""

    def gradients(self) -> Gradients:
        return PlainGradients()


class PlainPassive:
    def setup(self, active: Peer) -> None:
        """Nothing to take."""

    def state(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Nothing kept."""

    def histograms(self, codes: np.ndarray, layout: Layout) -> Histograms:
        return PlainHistograms(codes, layout)
