"""The cost floor of the blindfl source layers: the cryptographic operations a pass over
some rows needs, counted from each layer's own packing and cost models, times each
operation's cost measured on this machine.

    floor = (decryptions x t_dec + peer-key obfuscators x t_obf + own-key fresh
             obfuscators x t_fresh + products mod n^2 x t_mul
             + modular inverses mod n^2 x t_inv) / cores

MatMul layer (`MatmulCounter`), per batch of n rows (one passive party, K = 1):
- m2 (always) and m1 (unless the rows' m1 was made at setup): ceil(n / k) x cols
  ciphertexts each; the sender re-randomises (a peer-key obfuscator), the key owner
  decrypts. With m1 made at setup, those ciphertexts are counted once, in `setup`.
- m3 (training): n x cols fresh encryptions under B's key (short-exponent obfuscators).
- products: those the multi-exponentiation kernel's cost model counts for X_B [[U_B]]
  (when m1 goes per batch), X_A [[V_A]] and, in training, X_A^T [[eta G]], on these
  very rows; the row shifts of A's shifted copies after each update (one squaring per
  bit), or, where A folds its per-row products by Horner's rule instead (many features,
  e.g. a9a), (k - 1) row shifts and products per group of every m2; three products per
  ciphertext and party (plaintext addition, re-randomisation).

Embed-MatMul layer (`EmbedCounter`), per step of n rows, per passive party A_k, with
F fields, embedding width k, h outputs and the layer's layouts (`EMBED_SCALES`;
secure/source_layers/embed/setup.py): E layout of c_E plaintexts per row and s segments
(one per field unless a field spans two plaintexts), h layout of c_h plaintexts per row
of h, D layout of c_D plaintexts per row of F k. Every message that goes to its key's
owner is re-randomised by its sender (a peer-key obfuscator) and decrypted once; every
other ciphertext is a fresh encryption under the sender's own key:

    message   count            sender: kind      receiver
    e         n c_E            A_k: peer-key     B decrypts
    c         n c_h            B: peer-key       A_k decrypts
    z         n c_h            A_k: peer-key     B decrypts (the K z's multiplied first)
    m3        n c_h            B: fresh (once for all K)
    pb        F k c_h          B: fresh
    de        n c_D            B: peer-key       A_k decrypts
    st        n s              B: fresh          (one per row and field segment)
    y         F k c_h          A_k: peer-key     B decrypts
    phi, phit F k c_h, h c_D   A_k: fresh

  (forward only, e.g. validation: e, c, z.) Products mod n^2: the kernel's cost model
  for E'_A [[W]]_B and E'_B [[W]]_A (n x F k, 61-bit masked exponents) and, training,
  -E'_A^T [[eta G]]_B (F k x n) and eta G [[W^T]]_A (n x h, `step_bits`-bit exponents),
  one inverse (and one product) per output column with a negative term; one product per
  encryption, re-randomisation, ciphertext or plaintext addition, and per table entry
  looked up (s - c_E per row) or updated (two per row and segment). `Counts.terms` is
  the kernel's ciphertext-by-integer terms (nonzeros x columns), which the engine's
  `OpCounts.products` counts too (tests/bench/test_floor_embed.py checks every count
  against a real step).
Used by bench/predict.py and bench/secure_epoch.py.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import gmpy2
import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz
from vfl.secure.config import DENSE_FEATURE_BITS, SecureConfig
from vfl.secure.paillier.cipher_matmul import feature_exponents
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import generate_keypair
from vfl.secure.paillier.multiexp import product_count
from vfl.secure.paillier.obfuscators import ObfuscatorPool
from vfl.secure.source_layers.embed.setup import EmbedParams
from vfl.secure.source_layers.matmul.row_packing import REFERENCE_BATCH
from vfl.secure.source_layers.matmul.row_shares import RowChunks, worth_it
from vfl.secure.source_layers.matmul.setup import LayerParams

PRODUCTS_PER_CIPHERTEXT = 3  # per party: the (1 + m n) factor, its product, re-randomising


@dataclass
class Counts:
    """Cryptographic operations of some passes of the MatMul layer."""

    decryptions: int = 0
    obfuscators: int = 0  # for a peer's key (statistical)
    fresh: int = 0  # B's own fresh encryptions (m3)
    products: float = 0.0
    ciphertexts: int = 0  # MatMul: of m1 and m2 together; Embed-MatMul: every one sent
    inverses: int = 0  # modular inverses mod n^2 (the kernel's negative terms)
    terms: int = 0  # kernel terms: nonzero exponents x ciphertext columns (OpCounts.products)
    notes: dict = field(default_factory=dict)

    def add(self, other: Counts, times: int = 1) -> None:
        self.decryptions += times * other.decryptions
        self.obfuscators += times * other.obfuscators
        self.fresh += times * other.fresh
        self.products += times * other.products
        self.ciphertexts += times * other.ciphertexts
        self.inverses += times * other.inverses
        self.terms += times * other.terms

    def seconds(self, cost: dict[str, float]) -> float:
        """CPU seconds of one core."""
        return (
            self.decryptions * cost["decrypt"]
            + self.obfuscators * cost["obfuscator"]
            + self.fresh * cost["fresh"]
            + self.products * cost["product"]
            + self.inverses * cost["inverse"]
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
        if k > 1 and self.d_a * k > REFERENCE_BATCH:  # Horner folds A's per-row products
            # (row_packing.horner): k - 1 rounds, each shifting every group's accumulator
            # by one row (shift_bits squarings) and multiplying in the next row
            c.products += self.layout.groups(n) * (k - 1) * cols * (self.layout.shift_bits + 1)
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


STEP_BITS = 6  # bits of |lr G| at f_G = 2^-20 assumed for the floor (lr 0.05, |G| ~ 1e-3)


class EmbedCounter:
    """Counts for the Embed-MatMul layer of given shapes under the default SecureConfig and
    the layer's own scales, per party: "active" (B, for all `passives` parties) and
    "passive" (each A_k); see the module docstring for what is counted."""

    def __init__(
        self,
        key_bits: int,
        out_dim: int,
        emb_dim: int,
        fields: int,
        passives: int = 1,
        step_bits: int = STEP_BITS,
    ) -> None:
        config = SecureConfig(key_bits=key_bits, allow_insecure_test_keys=key_bits < 2048)
        ids = [f"A{i + 1}" for i in range(passives)]
        self.params = EmbedParams.for_active(config, emb_dim, out_dim, ids)
        self.e_lay = self.params.e_layout(fields)
        self.h_cols = self.params.h_layout().cols
        self.d_cols = self.params.d_layout(fields).cols
        self.segments = sum(len(parts) for parts in self.e_lay.segments)
        self.width, self.out_dim, self.passives = fields * emb_dim, out_dim, passives
        self.step_bits = step_bits
        self._rng = np.random.default_rng(0)

    @property
    def layouts(self) -> dict[str, int]:
        return {
            "e_cols": self.e_lay.cols,
            "e_slots": self.e_lay.slots,
            "segments": self.segments,
            "h_cols": self.h_cols,
            "h_slots": self.params.h_slots,
            "d_cols": self.d_cols,
            "d_slots": self.params.d_slots,
        }

    def setup(self, vocab_sizes: list[int]) -> dict[str, Counts]:
        """The initial shares for one passive party's fields (the same for each of the K;
        with K >= 2 the pair seeds, one encryption and decryption per pair, come on top):
        B encrypts [[Q^B_f]] (every table row, one ciphertext per segment) and [[W^B]],
        A_k [[W^A]] and [[(W^A)^T]]; each adds its plaintext share into the other's."""
        wk, hd = self.width * self.h_cols, self.out_dim * self.d_cols
        rows = sum(v * len(self.e_lay.segments[f]) for f, v in enumerate(vocab_sizes))
        active = Counts(fresh=rows + wk, ciphertexts=rows + wk, products=rows + 2 * wk + hd)
        passive = Counts(fresh=wk + hd, ciphertexts=wk + hd, products=2 * wk + hd)
        return {"active": _times(active, self.passives), "passive": passive}

    def step(self, n: int, *, train: bool, step_nonzeros: int | None = None) -> dict[str, Counts]:
        """One forward (and with `train` backward) step of n rows. `step_nonzeros`: the
        nonzero entries of B's encoded lr G (n x h); None: all of them."""
        prm, wk, h_cols = self.params, self.width, self.h_cols
        e_cols, segs = self.e_lay.cols, self.segments
        e_a = self._rng.integers(0, 1 << (prm.e_bits + prm.stat_bits), (n, wk), dtype=np.int64)
        a = Counts(ciphertexts=n * e_cols + n * h_cols)  # e and z leave A_k
        b = Counts(ciphertexts=n * h_cols)  # c leaves B
        # A_k: look up [[E^B]], add -R, re-randomise e; B decrypts it
        a.products += n * (segs - e_cols) + 2 * n * e_cols
        a.obfuscators += n * e_cols
        b.decryptions += n * e_cols
        # both: the cross terms E'_A [[W]]_B at A_k and E'_B [[W]]_A at B (E'_B = E^B - R)
        a.add(_kernel(e_a, h_cols))
        b.add(_kernel(-e_a, h_cols))
        # B: add -M, re-randomise c; A_k decrypts c, adds it into z, re-randomises z
        b.products += 2 * n * h_cols
        b.obfuscators += n * h_cols
        a.decryptions += n * h_cols
        a.products += 2 * n * h_cols
        a.obfuscators += n * h_cols
        # B multiplies the K z's (once per step) and decrypts their product
        shared = Counts(decryptions=n * h_cols, products=(self.passives - 1) * n * h_cols)
        if train:
            self._backward(n, e_a, a, b, shared, step_nonzeros)
        active = _times(b, self.passives)
        active.add(shared)
        return {"active": active, "passive": a}

    def _backward(
        self,
        n: int,
        e_a: np.ndarray,
        a: Counts,
        b: Counts,
        shared: Counts,
        step_nonzeros: int | None,
    ) -> None:
        wk, h, h_cols, d_cols, segs = (
            self.width,
            self.out_dim,
            self.h_cols,
            self.d_cols,
            self.segments,
        )
        # B: m3 = [[lr G]]_B once for all K
        shared.add(Counts(fresh=n * h_cols, products=n * h_cols))
        # B, per party: pb (F k x c_h fresh), de from lr G [[W^T]]_A (re-randomised), st
        b.ciphertexts += n * h_cols + wk * h_cols + n * d_cols + n * segs
        b.fresh += wk * h_cols + n * segs
        b.products += wk * h_cols + n * segs
        g = self._step(n, step_nonzeros)
        b.add(_kernel(g, d_cols))
        b.products += 2 * n * d_cols  # add -S, re-randomise
        b.obfuscators += n * d_cols
        a.decryptions += n * d_cols
        # A_k: [[-dW]]_B = -E'_A^T [[lr G]] + pb, into [[W]]_B; y (re-randomised), phi, phit
        a.add(_kernel(-e_a.T, h_cols))
        a.products += 2 * wk * h_cols  # + pb, into [[W]]_B
        a.products += 2 * wk * h_cols  # y: add -Phi, re-randomise
        a.obfuscators += wk * h_cols
        a.fresh += wk * h_cols + h * d_cols
        a.products += wk * h_cols + h * d_cols
        a.ciphertexts += 2 * wk * h_cols + h * d_cols
        b.decryptions += wk * h_cols
        b.products += 2 * wk * h_cols + 2 * h * d_cols  # [[W]]_A and [[W^T]]_A updates
        # A_k: the looked-up rows of [[Q^B]] absorb -round(P / 2^trunc) and st
        a.products += 2 * n * segs

    def _step(self, n: int, nonzeros: int | None) -> np.ndarray:
        """Exponents of an encoded lr G: `step_bits`-bit magnitudes, random signs, the
        first `nonzeros` (row-major) nonzero."""
        size = n * self.out_dim
        mags = self._rng.integers(1 << (self.step_bits - 1), 1 << self.step_bits, size)
        signs = self._rng.choice(np.array([-1, 1]), size)
        g = mags * signs
        g[size if nonzeros is None else nonzeros :] = 0
        return g.reshape(n, self.out_dim)


def _times(counts: Counts, times: int) -> Counts:
    out = Counts()
    out.add(counts, times)
    return out


def _kernel(exps: np.ndarray, cols: int) -> Counts:
    """[[E M]] by the kernel for dense integer E (outputs x bases) and M of `cols`
    ciphertext columns: its products by the cost model, one inverse and one product per
    output and column with a negative term, and its terms."""
    csr = sp.csr_matrix(exps)
    negative = int(np.count_nonzero((exps < 0).any(axis=1))) * cols
    return Counts(
        products=cols * _products(csr) + negative,
        inverses=negative,
        terms=int(csr.nnz) * cols,
    )


def _products(exps: sp.csr_matrix) -> float:
    """Products mod n^2 of [[E M]] for E (outputs x bases) by the kernel's cost model."""
    csc = sp.csc_matrix(exps)
    return float(product_count(csc.indptr, csc.indices, csc.data))


def time_primitives(key_bits: int, repeats: int = 3, count: int = 48) -> dict[str, float]:
    """Seconds per primitive at `key_bits`, one core, the minimum of `repeats` runs: CRT
    decryption, a fixed-base obfuscator for a peer's key, a short-exponent obfuscator for
    the own key (m3), a product and an inverse mod n^2; and the one-off cost of a peer
    key's table."""
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

    def inverses() -> None:
        for c in cts:
            gmpy2.invert(c, nsq)

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
        "inverse": best(inverses, count),
        "table": table,
    }


def cores() -> int:
    return os.cpu_count() or 1
