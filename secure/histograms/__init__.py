"""Encrypted bucket sums: the one kernel behind secure trees' histograms and WOE/IV.

The active party (the key owner) encrypts, per row, k values in one Okamoto-Uchiyama
ciphertext (trees: gradient and hessian, or two per class; WOE/IV: the event indicator
and 1); a passive party sums those ciphertexts per bucket (its column, its bin) over a
subset of rows, subtracts a child's sums from its parent's, packs several buckets per
ciphertext and re-randomises them; the active party decrypts a (buckets, k) array.

    layout      `Layout`: fixed point, slots, packing, and the checks that no sum wraps
    rows        `EncryptedRows`, `encrypt_rows` (active)
    buckets     `Bins`, `EncryptedBuckets`, `BucketSummer`, `bucket_sums`, `subtract`,
                `cumulative`, `join` (passive)
    packing     `PackedBuckets`, `pack` (passive), `decrypt` (active)
    wire        the layout, row ciphertexts and packed buckets as `Payload`s, checked
    blocks      the executor's task functions

    layout = Layout.create(values=2, rows=n, bound=1.0, scale_bits=24,
                           capacity=keys.public.plaintext_bits)
    rows = encrypt_rows(gh, keys.private, layout, executor)          # active, per tree
    summer = BucketSummer(rows, bins, executor)                      # passive, per tree
    node = summer.sums(select)                                       # a node's rows
    level = summer.sums_each([select, ...])                          # or a level's nodes
    sibling = subtract(parent, node)
    packed = pack(node, order, executor)                             # to the active party
    packed = pack(join([cumulative(n) for n in level]), candidates)  # or a level's candidates
    sums = decrypt(packed, keys.private)                             # (buckets, 2)

Why Okamoto-Uchiyama and not packed Paillier, the parameters and the costs:
docs/protocols.md, "Encrypted bucket sums"; what each party learns: docs/security.md.
Nothing here imports grpc.
"""

from vfl.secure.histograms.buckets import (
    Bins,
    BucketSummer,
    EncryptedBuckets,
    bucket_sums,
    cumulative,
    join,
    subtract,
)
from vfl.secure.histograms.layout import Layout
from vfl.secure.histograms.packing import PackedBuckets, decrypt, pack
from vfl.secure.histograms.rows import EncryptedRows, encrypt_rows
from vfl.secure.histograms.wire import (
    layout_from_payload,
    layout_to_payload,
    packed_from_payload,
    packed_to_payload,
    rows_from_payload,
    rows_to_payload,
)

__all__ = [
    "Bins",
    "BucketSummer",
    "EncryptedBuckets",
    "EncryptedRows",
    "Layout",
    "PackedBuckets",
    "bucket_sums",
    "cumulative",
    "decrypt",
    "encrypt_rows",
    "join",
    "layout_from_payload",
    "layout_to_payload",
    "pack",
    "packed_from_payload",
    "packed_to_payload",
    "rows_from_payload",
    "rows_to_payload",
    "subtract",
]
