"""The cost floor of the blindfl MatMul source layer: the cryptographic operations a
pass over some rows needs, counted from the layer's own packing and cost models, times
each operation's cost measured on this machine.

    floor = (decryptions x t_dec + peer-key obfuscators x t_obf + own-key fresh
             obfuscators x t_fresh + products mod n^2 x t_mul) / cores

Per batch of n rows (one passive party, K = 1):
- m2 (always) and m1 (unless the rows' m1 was made at setup): ceil(n / k) x cols
  ciphertexts each; the sender re-randomises (a peer-key obfuscator), the key owner
  decrypts. With m1 made at setup, those ciphertexts are counted once, in `setup`.
- m3 (training): n x cols fresh encryptions under B's key (short-exponent obfuscators).
- products: those the multi-exponentiation kernel's cost model counts for X_B [[U_B]]
  (when m1 goes per batch), X_A [[V_A]] and, in training, X_A^T [[eta G]], on these
  very rows; the row shifts of A's shifted copies after each update (one squaring per
  bit); three products per ciphertext and party (plaintext addition, re-randomisation).
Used by bench/predict.py and bench/secure_epoch.py.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz

from secure.config import DENSE_FEATURE_BITS, SecureConfig
from secure.paillier.cipher_matmul import feature_exponents
from secure.paillier.engine import Paillier
from secure.paillier.keys import generate_keypair
from secure.paillier.multiexp import product_count
from secure.paillier.obfuscators import ObfuscatorPool
from secure.source_layers.matmul.row_packing import REFERENCE_BATCH
from secure.source_layers.matmul.row_shares import RowChunks, worth_it
from secure.source_layers.matmul.setup import LayerParams

PRODUCTS_PER_CIPHERTEXT = 3  # per party: the (1 + m n) factor, its product, re-randomising


@dataclass
class Counts:
    """Cryptographic operations of some passes of the MatMul layer."""

    decryptions: int = 0
    obfuscators: int = 0  # for a peer's key (statistical)
    fresh: int = 0  # B's own fresh encryptions (m3)
    products: float = 0.0
    ciphertexts: int = 0  # of m1 and m2 together
    notes: dict = field(default_factory=dict)

    def add(self, other: Counts, times: int = 1) -> None:
        self.decryptions += times * other.decryptions
        self.obfuscators += times * other.obfuscators
        self.fresh += times * other.fresh
        self.products += times * other.products
        self.ciphertexts += times * other.ciphertexts

    def seconds(self, cost: dict[str, float]) -> float:
        """CPU seconds of one core."""
        return (
            self.decryptions * cost["decrypt"]
            + self.obfuscators * cost["obfuscator"]
            + self.fresh * cost["fresh"]
            + self.products * cost["product"]
        )


def feature_bits(x: np.ndarray | sp.spmatrix) -> int:
    """f_X as the platform picks it (party/training/blindfl/common.py)."""
    values = x.data if sp.issparse(x) else np.asarray(x)
    integral = (
        bool(np.all(values == np.round(values))) and float(np.abs(values).max(initial=0.0)) < 2**20
    )
    return 0 if integral else DENSE_FEATURE_BITS


class MatmulCounter:
    """Counts for the MatMul layer of given shapes under the default SecureConfig."""

    def __init__(self, key_bits: int, out_dim: int, d_b: int, d_a: int) -> None:
        config = SecureConfig(key_bits=key_bits, allow_insecure_test_keys=key_bits < 2048)
        params = LayerParams.for_active(config, d_b, out_dim, ["passive"])
        self.params = params.with_row_packing(config.rows_per_cipher, d_a)
        self.packer, self.layout = self.params.packer(), self.params.layout()
        self.cols = self.packer.columns(out_dim)
        self.chunks = RowChunks.of(
            out_dim, self.packer.slots, config.slot_bits, config.stat_bits, key_bits
        )
        self.d_a = d_a

    def precomputed(self, uses: int) -> bool:
        return worth_it(uses, self.chunks, self.layout)

    def setup(self, rows: int) -> Counts:
        """m1 of `rows` rows made once (decrypted by A, re-randomised by B)."""
        n = -(-rows // self.chunks.rows_per_cipher) * self.cols
        return Counts(
            decryptions=n, obfuscators=n, products=2 * PRODUCTS_PER_CIPHERTEXT * n, ciphertexts=n
        )

    def batch(
        self, x_b, x_a, *, train: bool, m1: bool, f_b: int | None = None, f_a: int | None = None
    ) -> Counts:
        """One batch's forward (and with `train` its backward) over rows x_b, x_a."""
        n, k, cols = x_a.shape[0], self.layout.rows, self.cols
        f_b = feature_bits(x_b) if f_b is None else f_b
        f_a = feature_bits(x_a) if f_a is None else f_a
        cts = self.layout.groups(n) * cols
        c = Counts(decryptions=cts, obfuscators=cts, ciphertexts=cts)
        c.products += 2 * PRODUCTS_PER_CIPHERTEXT * cts  # m2 at A and B
        c.products += cols * _products(self.layout.group_exponents(feature_exponents(x_a, f_a)))
        if m1:
            c.add(Counts(decryptions=cts, obfuscators=cts, ciphertexts=cts))
            c.products += 2 * PRODUCTS_PER_CIPHERTEXT * cts
            grouped = self.layout.group_exponents(feature_exponents(x_b, f_b))
            c.products += cols * _products(grouped)
        if train:
            c.fresh += n * cols
            exps_t = feature_exponents(x_a, f_a).T.tocsr()
            present = np.flatnonzero(np.diff(exps_t.indptr))
            c.products += cols * _products(exps_t[present])
            c.products += PRODUCTS_PER_CIPHERTEXT * n * cols  # encrypting m3
            if k > 1 and self.d_a * k <= REFERENCE_BATCH:  # shifted copies of [[V_A]]
                c.products += len(present) * (k - 1) * cols * self.layout.shift_bits
        return c


def _products(exps: sp.csr_matrix) -> float:
    """Products mod n^2 of [[E M]] for E (outputs x bases) by the kernel's cost model."""
    csc = sp.csc_matrix(exps)
    return float(product_count(csc.indptr, csc.indices, csc.data))


def time_primitives(key_bits: int, repeats: int = 3, count: int = 48) -> dict[str, float]:
    """Seconds per primitive at `key_bits`, one core, the minimum of `repeats` runs: CRT
    decryption, a fixed-base obfuscator for a peer's key, a short-exponent obfuscator for
    the own key (m3), a product mod n^2; and the one-off cost of a peer key's table."""
    config = SecureConfig(key_bits=key_bits, allow_insecure_test_keys=key_bits < 2048)
    keys = generate_keypair("bank", config)
    own = Paillier(keys.public, keys.private, threads=1)
    peer = ObfuscatorPool(keys.public, None, 0, 1, False, "fixed-base")
    fresh = ObfuscatorPool(keys.public, keys.private, 0, 1, False, short_exponent=True)
    begun = time.perf_counter()
    peer.prepare()
    table = time.perf_counter() - begun
    fresh.prepare()
    cts = Paillier(keys.public).encrypt(list(range(count)))
    nsq = keys.public.nsquare

    def products() -> None:
        acc = mpz(1)
        for c in cts * 20:
            acc = acc * c % nsq

    def best(fn, items: int) -> float:
        runs = []
        for _ in range(repeats):
            begun = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - begun) / items)
        return min(runs)

    return {
        "decrypt": best(lambda: own.decrypt(cts), count),
        "obfuscator": best(lambda: peer.compute(count), count),
        "fresh": best(lambda: fresh.compute(count), count),
        "product": best(products, 20 * count),
        "table": table,
    }


def cores() -> int:
    return os.cpu_count() or 1
