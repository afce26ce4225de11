"""`protocol: secureboost`: the histogram exchange over Okamoto-Uchiyama ciphertexts
(`vfl.secure.histograms`; docs/protocols.md, "Secure trees").

Before the first round (KEYING) the active party makes a key pair and sends every passive
party its public key (`tree/key`) and the bucket layout (`tree/layout`: values per row,
fixed-point scale and bound, rows), both kept in each party's checkpoints. Then each
round:

    active     encrypts each row's (g, h) of each tree of the round (one tree a round,
               or one a class) in one ciphertext, once for all passive parties
               (`EncryptedGradients.payload`: tree k's rows after tree k - 1's)
    passive    sums the ciphertexts per (own column, bin) over a level's smaller
               children at once (`EncryptedHistograms.build_each`), takes each larger
               child as its parent minus the smaller (`subtract`), forms each
               candidate's left-side sums (`select`: a running product per column, times
               the empty cells' bucket when they go left), packs a level's candidates
               several to a ciphertext and re-randomises them (`payload`)
    active     decrypts them (`EncryptedGradients.sums`)

So the active party sees the left-side (g, h) sums of each passive candidate, in the
order that party shuffled them, and nothing of which rows a sum covers; a passive party
sees ciphertexts only. A passive party's bin codes are laid out for the kernel with code
0 (an empty cell, or a categorical column's other words) last in its column, so the
running product of a column's first t buckets is its codes 1..t.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gmpy2 import mpz
from vfl.party.errors import DataError
from vfl.party.training.context import RoleContext
from vfl.party.training.trees.candidates import Candidates, Layout
from vfl.party.training.trees.wire import Peer
from vfl.secure.errors import EncodingError, PayloadError
from vfl.secure.histograms import (
    Bins,
    BucketSummer,
    EncryptedBuckets,
    EncryptedRows,
    Layout as BucketLayout,
    cumulative,
    decrypt,
    encrypt_rows,
    join,
    layout_from_payload,
    layout_to_payload,
    pack,
    packed_from_payload,
    packed_to_payload,
    rows_from_payload,
    rows_to_payload,
    subtract,
)
from vfl.secure.ou import OuKeyPair, OuPrivateKey, OuPublicKey, generate_ou_keypair
from vfl.secure.ou.state import keypair_from_state, keypair_state, public_from_state, public_state
from vfl.secure.wire.keys import ou_public_key_from_payload, ou_public_key_to_payload
from vfl.secure.wire.payload import Payload

KEY, LAYOUT = "tree/key", "tree/layout"
# binary and multiclass: |g| <= 1 and h <= K / (K - 1) / 4 < 1, at 2^-19: 20-bit values,
# so at the credit shape's 24,000 rows a bucket's (g, h) takes 2 x 37 bits and 9 buckets
# share a 2048-bit key's ciphertext (8 at 2^-24): 11% fewer packed ciphertexts to
# re-randomise and decrypt, and 10% fewer squarings to pack them
SCALE_BITS, BOUND = 19, 1.0
# regression: g = margin - standardised label, at 2^-16 within 2^16 standard deviations
REGRESSION_SCALE_BITS, REGRESSION_BOUND = 16, float(2**16)


def bucket_layout(kind: str, trees: int, rows: int, capacity: int) -> BucketLayout:
    """The layout of a job's (g, h): 2 values a row of each of the round's `trees` trees
    (so a node's sums, packed, hold its own tree's only), `rows` rows a tree at most."""
    regression = kind == "regression"
    return BucketLayout.create(
        values=2,
        rows=max(rows, 1) * trees,
        bound=REGRESSION_BOUND if regression else BOUND,
        scale_bits=REGRESSION_SCALE_BITS if regression else SCALE_BITS,
        capacity=capacity,
    )


class EncryptedGradients:
    """The active party's side: (g, h) encrypted once a round, candidates' sums decrypted."""

    def __init__(self, ctx: RoleContext, key: OuPrivateKey, layout: BucketLayout) -> None:
        self.ctx, self.key, self.layout = ctx, key, layout
        self._last: tuple[np.ndarray, Payload] | None = None  # the round's, for every peer

    def payload(self, gh: np.ndarray) -> Payload:
        if self._last is not None and self._last[0] is gh:
            return self._last[1]
        trees = gh.shape[1] // 2
        stacked = gh.reshape(len(gh), trees, 2).transpose(1, 0, 2).reshape(-1, 2)
        try:
            rows = encrypt_rows(
                stacked, self.key, self.layout, self.ctx.executor, self.ctx.instruments.op_counts
            )
        except EncodingError as exc:
            party = self.ctx.party_id
            message = (
                f"party '{party}': a gradient lies beyond the secure range of secureboost "
                f"({exc}); a regression label this far from its mean (2^16 standard "
                "deviations) needs clipping or a transform first"
            )
            raise DataError(message) from None
        self._last = (gh, rows_to_payload(rows))
        return self._last[1]

    def sums(
        self, payload: Payload, sizes: Sequence[int], trees: Sequence[int]
    ) -> list[np.ndarray]:
        total = int(sum(sizes))
        packed = packed_from_payload(payload, self.key.public_key, self.layout, total)
        counts = self.ctx.instruments.op_counts
        values = decrypt(packed, self.key, executor=self.ctx.executor, counts=counts)
        bounds = np.cumsum([0, *sizes])
        return [values[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


class EncryptedHistograms:
    """A passive party's side over the round's bin codes (rows x columns, `layout`)."""

    def __init__(
        self,
        ctx: RoleContext,
        codes: np.ndarray,
        layout: Layout,
        key: OuPublicKey,
        buckets: BucketLayout,
    ) -> None:
        self.ctx, self.key, self.buckets = ctx, key, buckets
        self.offsets = layout.offsets[:-1]
        self.sizes = np.diff(layout.offsets)
        wide = codes.astype(np.int64)
        self.bins = Bins(np.where(wide == 0, self.sizes - 1, wide - 1), tuple(self.sizes))
        self.summers: list[BucketSummer] = []  # one a tree of the round

    def load(self, payload: Payload, rows: int) -> int:
        encrypted = rows_from_payload(payload, self.key, self.buckets)
        if not rows or not encrypted.count or encrypted.count % rows:
            raise PayloadError(f"{encrypted.count} rows of (g, h) for the round's {rows} rows")
        self.close()
        counts, data = self.ctx.instruments.op_counts, encrypted.data
        for lo in range(0, encrypted.count, rows):
            tree = EncryptedRows(self.key, self.buckets, data[lo : lo + rows])
            self.summers.append(BucketSummer(tree, self.bins, self.ctx.executor, counts))
        return len(self.summers)

    def build_each(self, nodes: Sequence[tuple[np.ndarray, int]]) -> list[EncryptedBuckets]:
        out: list[EncryptedBuckets | None] = [None] * len(nodes)
        for k, summer in enumerate(self.summers):
            mine = [i for i, (_, tree) in enumerate(nodes) if tree == k]
            if mine:
                sums = summer.sums_each([nodes[i][0] for i in mine])
                for i, tree_sums in zip(mine, sums, strict=True):
                    out[i] = tree_sums
        done = [sums for sums in out if sums is not None]
        if len(done) != len(nodes):
            raise PayloadError("bucket sums asked for a tree the round's (g, h) do not hold")
        return done

    def subtract(self, parent: EncryptedBuckets, child: EncryptedBuckets) -> EncryptedBuckets:
        return subtract(parent, child)

    def select(self, hist: EncryptedBuckets, cands: Candidates) -> EncryptedBuckets:
        """Each candidate's left-side sums: a numeric one's the running product of its
        column's codes 1..t (times code 0's bucket with the empty cells left, or that
        bucket alone for t = 0), a categorical one's its code's bucket."""
        raw, running = hist.ciphertexts, cumulative(hist).ciphertexts
        parts, n = self.buckets.parts, self.key.n
        column = cands.column
        t = (cands.last - cands.first).astype(np.int64)
        size, first = self.sizes[column], self.offsets[column]
        empty = first + size - 1
        code = first + (t - 1) % size  # a categorical candidate's bucket
        out: list[mpz] = []
        for c in range(len(cands)):
            for p in range(parts):
                if cands.categorical[c]:
                    value = raw[code[c] * parts + p]
                elif t[c] == 0:
                    value = raw[empty[c] * parts + p]
                else:
                    value = running[(first[c] + t[c] - 1) * parts + p]
                    if cands.missing_left[c]:
                        value = value * raw[empty[c] * parts + p] % n
                out.append(value)
        counts = (len(cands),) if len(cands) else ()
        return EncryptedBuckets(self.key, self.buckets, counts, out, hist.rows)

    def payload(self, sums: Sequence[EncryptedBuckets]) -> Payload:
        offered = [s for s in sums if s.total]
        if offered:
            level = join(offered)
        else:
            level = EncryptedBuckets(self.key, self.buckets, (), [], 0)
        counts = self.ctx.instruments.op_counts
        return packed_to_payload(pack(level, executor=self.ctx.executor, counts=counts))

    def close(self) -> None:
        for summer in self.summers:
            summer.close()
        self.summers = []


class EncryptedActive:
    """The active party's keys and layout: made and sent at setup, kept in checkpoints."""

    def __init__(self, ctx: RoleContext, kind: str, trees: int) -> None:
        self.ctx, self.kind, self.trees = ctx, kind, trees
        self.keypair: OuKeyPair | None = None
        self.layout: BucketLayout | None = None
        self._gradients: EncryptedGradients | None = None

    def setup(self, peers: Sequence[Peer]) -> None:
        crypto = self.ctx.spec.crypto
        self.keypair = generate_ou_keypair(
            self.ctx.party_id, crypto.key_bits, crypto.allow_insecure_test_keys
        )
        capacity = self.keypair.public.plaintext_bits
        self.layout = bucket_layout(self.kind, self.trees, len(self.ctx.plan.train_rows), capacity)
        for peer in peers:
            peer.send(KEY, ou_public_key_to_payload(self.keypair.public))
            peer.send(LAYOUT, layout_to_payload(self.layout))

    def state(self) -> dict[str, Any]:
        keypair, layout = self._ready()
        return {"keypair": keypair_state(keypair), "layout": _layout_state(layout)}

    def restore(self, state: dict[str, Any]) -> None:
        self.keypair = keypair_from_state(state["keypair"], self.ctx.party_id)
        self.layout = _layout_from_state(state["layout"], self.keypair.public)

    def gradients(self) -> EncryptedGradients:
        if self._gradients is None:
            keypair, layout = self._ready()
            self._gradients = EncryptedGradients(self.ctx, keypair.private, layout)
        return self._gradients

    def _ready(self) -> tuple[OuKeyPair, BucketLayout]:
        if self.keypair is None or self.layout is None:
            raise ValueError("secureboost has no keys before setup() or restore()")
        return self.keypair, self.layout


class EncryptedPassive:
    """A passive party's copy of the active party's public key and layout."""

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.key: OuPublicKey | None = None
        self.layout: BucketLayout | None = None

    def setup(self, active: Peer) -> None:
        crypto = self.ctx.spec.crypto
        key = active.read(
            KEY, ou_public_key_from_payload, active.peer, crypto.allow_insecure_test_keys
        )
        if key.bits < crypto.key_bits:
            raise PayloadError(
                f"party '{active.peer}' sent a {key.bits}-bit key; the job asks for "
                f"crypto.key_bits {crypto.key_bits}"
            )
        layout = active.read(LAYOUT, layout_from_payload, key)
        rows = len(self.ctx.plan.train_rows)
        if layout.rows < rows or layout.values != 2:
            raise PayloadError(
                f"party '{active.peer}' sent a layout of {layout.values} values for "
                f"{layout.rows} rows; the job has {rows} training rows of (g, h) pairs"
            )
        self.key, self.layout = key, layout

    def state(self) -> dict[str, Any]:
        key, layout = self._ready()
        return {"key": public_state(key), "layout": _layout_state(layout)}

    def restore(self, state: dict[str, Any]) -> None:
        self.key = public_from_state(state["key"], self.ctx.spec.active.id)
        self.layout = _layout_from_state(state["layout"], self.key)

    def histograms(self, codes: np.ndarray, layout: Layout) -> EncryptedHistograms:
        key, buckets = self._ready()
        return EncryptedHistograms(self.ctx, codes, layout, key, buckets)

    def _ready(self) -> tuple[OuPublicKey, BucketLayout]:
        if self.key is None or self.layout is None:
            raise ValueError("secureboost has no keys before setup() or restore()")
        return self.key, self.layout


def _layout_state(layout: BucketLayout) -> np.ndarray:
    fields = (layout.values, layout.scale_bits, layout.value_bits, layout.rows)
    return np.asarray(fields, dtype=np.int64)


def _layout_from_state(state: Any, key: OuPublicKey) -> BucketLayout:
    values, scale_bits, value_bits, rows = (int(v) for v in np.asarray(state).tolist())
    return BucketLayout(values, scale_bits, value_bits, rows, key.plaintext_bits)
