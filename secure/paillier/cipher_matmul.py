"""Plaintext-matrix x ciphertext-matrix products, O(nnz), spread over processes.

`CipherMatmul.matmul(E, C)` computes [[E @ M]] from an integer matrix E (outputs x m,
scipy sparse or dense) and the ciphertexts C = [[M]] (m rows x cols packed ciphertexts):
    out[o][c] = prod_b C[b][c] ^ E[o, b]   (mod n^2)
Only the nonzero terms of E cost anything (`secure.paillier.multiexp`); when every nonzero is +-1
(binary features) each term is a single multiplication, done in-process. Typical uses:
    X (N x d)   @ [[V]] (d packed rows)  -> [[X V]]    forward, one output per instance
    X^T (d x N) @ [[G]] (N packed rows)  -> [[X^T G]]  update, one output per feature
Each packed ciphertext carries a row of `slots` outputs, so one multiplication serves
them all.

Parallelism: the bases (columns of E) are split into contiguous blocks of roughly equal
nnz, one per executor slot (`secure.executor`: this machine's process pool, or the
party's Ray cluster); each task (`secure.paillier.blocks.multiexp_block`) gets its block's
bases as a fixed-width blob and returns the per-output partial products the same way,
which the caller multiplies together (one modular inverse per output for negative
terms). Products with fewer than `parallel_min_terms` nonzero terms, or under two
tasks' worth of terms over all columns, run in-process. A
`CipherMatmul` made without an executor owns a local one (shut down by `close()`) whose
blocks get at least parallel_min_terms / workers terms; one handed in belongs to the
caller, and its blocks get `block_items(PRODUCT_TERM, key bits)` terms at least (the
party's `compute.min_task_ms` of work). Only our own integers and index arrays cross to the
workers; nothing received from a peer is ever unpickled.
"""

from __future__ import annotations

import os

import gmpy2
import numpy as np
import scipy.sparse as sp
from gmpy2 import mpz
from vfl.secure.config import SecureConfig
from vfl.secure.errors import InputError
from vfl.secure.executor.base import PRODUCT_TERM, BlockExecutor
from vfl.secure.executor.local import LocalExecutor
from vfl.secure.paillier.blocks import MultiexpBlock, blob, multiexp_block, partials, width_of
from vfl.secure.paillier.counters import OpCounts
from vfl.secure.paillier.encoding import encode
from vfl.secure.paillier.multiexp import multiexp_columns, unit_products
from vfl.secure.paillier.multiexp_rows import Partial

# One multiexp_columns call: (modulus, bases of a block of columns, the CSC matrix, the
# block's first and last column, output count), and the arguments it is called with.
_Job = tuple[mpz, list[mpz], sp.csc_matrix, int, int, int]
_Args = tuple[mpz, list[mpz], np.ndarray, np.ndarray, np.ndarray, int]


def feature_exponents(x: np.ndarray | sp.spmatrix, feature_bits: int) -> sp.csr_matrix:
    """Fixed-point exponents round(x * 2^feature_bits) as an int64 CSR matrix.

    Raises:
        InputError: x is not 2-D. EncodingError: NaN/inf, or a value too large for 62 bits.
    """
    if sp.issparse(x):
        csr = sp.csr_matrix(x, copy=True)
        csr.data = encode(csr.data, feature_bits)
        csr = csr.astype(np.int64)
    else:
        dense = np.asarray(x)
        if dense.ndim != 2:
            raise InputError(f"features must be a 2-D matrix, got shape {dense.shape}")
        csr = sp.csr_matrix(encode(dense, feature_bits))
    csr.eliminate_zeros()
    return csr


class CipherMatmul:
    """Computes [[E @ M]] for integer E and ciphertexts [[M]] on an executor."""

    def __init__(
        self,
        workers: int | None = None,
        parallel_min_terms: int = SecureConfig.parallel_min_terms,
        counts: OpCounts | None = None,
        executor: BlockExecutor | None = None,
    ) -> None:
        """`counts`: where to add the ciphertext products done (None: nowhere);
        `executor`: where the blocks run (None: a local pool of `workers`, owned)."""
        self.counts = counts
        self._owned = executor is None
        self._own_min_terms: int | None = None  # terms per block of an owned pool
        if executor is None:  # all workers once a product has parallel_min_terms terms
            local_workers = max(1, workers or os.cpu_count() or 1)
            executor = LocalExecutor(local_workers)
            self._own_min_terms = max(1, parallel_min_terms // local_workers)
        self.executor = executor
        self.parallel_min_terms = parallel_min_terms

    def matmul(
        self,
        exps: sp.spmatrix | np.ndarray,
        cipher_rows: list[list[mpz]],
        nsquare: mpz,
        cols: int,
    ) -> list[list[mpz]]:
        """[[exps @ M]] as rows of ciphertexts (outputs x cols); outputs without any
        term get mpz(1), the trivial encryption of 0.

        Raises:
            InputError: exps has a column count different from the number of cipher rows.
        """
        csc = sp.csc_matrix(exps).astype(np.int64)
        n_out, m = csc.shape
        if m != len(cipher_rows):
            raise InputError(f"cannot multiply a {n_out}x{m} matrix by {len(cipher_rows)} rows")
        if self.counts is not None:
            self.counts.add(products=int(csc.nnz) * cols)
        if csc.nnz and np.all(np.abs(csc.data) == 1):
            csr = csc.tocsr()
            csr.sort_indices()
            return unit_products(
                nsquare, cipher_rows, csr.indptr, csr.indices, csr.data, n_out, cols
            )
        min_terms = self._min_terms(nsquare)
        blocks = self._blocks(csc, min_terms)
        jobs = [
            (nsquare, [cipher_rows[j][c] for j in range(lo, hi)], csc, lo, hi, n_out)
            for c in range(cols)
            for lo, hi in blocks
        ]
        few = csc.nnz < self.parallel_min_terms or csc.nnz * cols < 2 * min_terms
        partials = self._run(jobs, few)
        out = [[mpz(1)] * cols for _ in range(n_out)]
        per_col = len(blocks)
        for c in range(cols):
            parts = partials[c * per_col : (c + 1) * per_col]
            for o, value in enumerate(_combine(parts, n_out, nsquare)):
                out[o][c] = value
        return out

    def _min_terms(self, nsquare: mpz) -> int:
        """Nonzero terms one block gets at least: a handed-in executor's
        `block_items(PRODUCT_TERM, ...)`, an owned pool's parallel_min_terms / workers."""
        if self._own_min_terms is not None:
            return self._own_min_terms
        return self.executor.block_items(PRODUCT_TERM, (int(nsquare.bit_length()) + 1) // 2)

    def _blocks(self, csc: sp.csc_matrix, min_terms: int) -> list[tuple[int, int]]:
        """Contiguous column blocks of about equal nnz, at most one per executor slot and
        at least `min_terms` terms each."""
        m = csc.shape[1]
        count = min(self.executor.slots, csc.nnz // min_terms, m)
        if count <= 1 or csc.nnz < self.parallel_min_terms:
            return [(0, m)]
        cuts = np.searchsorted(csc.indptr, np.linspace(0, csc.nnz, count + 1)[1:-1])
        edges = sorted({0, m, *np.clip(cuts, 1, m - 1).tolist()})
        return list(zip(edges[:-1], edges[1:], strict=True))

    def _run(self, jobs: list[_Job], few: bool) -> list[tuple[Partial, Partial]]:
        """The jobs' partial products: in-process when `few` terms (under two tasks'
        worth or `parallel_min_terms`), else one task each on the executor."""
        args = [_job_args(*job) for job in jobs]
        if len(jobs) == 1 or self.executor.slots == 1 or few:
            return [multiexp_columns(*a) for a in args]
        nsquare, width = jobs[0][0], width_of(jobs[0][0])
        blocks: list[MultiexpBlock] = [
            (blob(bases, width), indptr, rows, data, n_out)
            for _, bases, indptr, rows, data, n_out in args
        ]
        results = self.executor.map(multiexp_block, self.executor.share(nsquare), blocks)
        return [partials(r, nsquare, n_out) for r, (*_, n_out) in zip(results, args, strict=True)]

    def warm_up(self) -> None:
        """Start a local executor's worker processes now rather than at the first large
        product."""
        if isinstance(self.executor, LocalExecutor):
            self.executor.warm_up()

    def close(self) -> None:
        """Shut the executor down if this object made it."""
        if self._owned:
            self.executor.close()


def _job_args(
    nsquare: mpz, bases: list[mpz], csc: sp.csc_matrix, lo: int, hi: int, n_out: int
) -> _Args:
    start, stop = int(csc.indptr[lo]), int(csc.indptr[hi])
    indptr = csc.indptr[lo : hi + 1] - start
    return (nsquare, bases, indptr, csc.indices[start:stop], csc.data[start:stop], n_out)


def _combine(parts: list[tuple[Partial, Partial]], n_out: int, nsquare: mpz) -> list[mpz]:
    """Multiply the workers' partial products; divide by the negative-term products."""
    out = []
    for o in range(n_out):
        pos = neg = None
        for p, q in parts:
            if p[o] is not None:
                pos = p[o] if pos is None else pos * p[o] % nsquare
            if q[o] is not None:
                neg = q[o] if neg is None else neg * q[o] % nsquare
        value = mpz(1) if pos is None else pos
        if neg is not None:
            value = value * gmpy2.invert(neg, nsquare) % nsquare
        out.append(value)
    return out
