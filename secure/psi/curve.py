"""X25519 primitives of the PSI protocol: canonical ids, hashing onto the curve, blinding.

Ids are canonicalised to their text form before hashing, so the integer 133, the numpy
integer 133 and the string "133" are the same id. Strings are taken verbatim (no
trimming, no case folding: " 133" and "0133" differ from "133"); floats, bools, None and
other types are rejected because their text form is ambiguous (133.0 vs 133).

Hashing onto the curve: SHA-256(domain || UTF-8 text) read as an X25519 u-coordinate.
RFC 7748 masks the top bit and reduces modulo p, so every 32-byte string is a valid
input; about half of the points lie on the quadratic twist. X25519 is twist-secure and
clamping makes every scalar a multiple of the cofactor (8 on the curve, 4 on the twist),
so blinding is safe on both. Scalar multiplication commutes despite clamping, because
clamping applies to the scalars, not to the points:
``X25519(a, X25519(b, u)) == X25519(b, X25519(a, u))``.

`cryptography`'s X25519 holds the GIL (~32 us per multiplication on our machines), so a
`Blinder` spreads large chunks over a process pool that it owns and shuts down, or, for
a party with an executor (`secure.executor`, its config's `compute:`), over that: the
run's scalar is shared once, and a chunk of at least two tasks' worth of points
(`block_items(PSI_POINT)`) is cut into one task per executor slot at most.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import secrets
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from vfl.secure.errors import PayloadError, PsiError
from vfl.secure.executor.base import PSI_POINT, BlockExecutor
from vfl.secure.executor.lifeline import watch_parent

POINT_BYTES = 32
POINT_DTYPE = f"S{POINT_BYTES}"
_HASH_DOMAIN = b"vfl/psi/x25519/v1\x00"

# One party's id column: a sequence of str/int, or a 1-D numpy array of them.
IdColumn = Sequence[object] | np.ndarray


def canonical_ids(ids: IdColumn, first_row: int = 0) -> list[bytes]:
    """UTF-8 bytes of each id's text form (see the module docstring); `first_row`: the
    row of `ids[0]`, to name a bad id's row.

    Raises:
        PsiError: an id is neither a str nor an integer (the row position is named).
    """
    if isinstance(ids, np.ndarray) and ids.ndim == 1 and ids.dtype.kind in "iuT":
        texts = ids.tolist() if ids.dtype.kind == "T" else ids.astype(str).tolist()
        return [text.encode() for text in texts]
    out: list[bytes] = []
    for row, value in enumerate(ids, start=first_row):
        if isinstance(value, str):
            out.append(value.encode("utf-8"))
        elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            out.append(str(int(value)).encode())
        else:
            raise PsiError(
                f"id at row {row} has type {type(value).__name__}; ids must be str or int "
                "(read the id column as text, e.g. dtype=str, so 133.0 does not appear)"
            )
    return out


HASH_CHUNK = 1 << 16  # ids canonicalised and hashed at a time


def id_texts(ids: IdColumn, rows: np.ndarray | None = None) -> list[bytes]:
    """Canonical bytes of `ids` (of the positions `rows`, if given)."""
    return canonical_ids(ids if rows is None else _take(ids, rows))


def hash_ids(ids: IdColumn, rows: np.ndarray | None = None) -> np.ndarray:
    """H(id) of every id (of the positions `rows`, if given), as an (n, 32) uint8 array,
    hashed `HASH_CHUNK` ids at a time (never a Python object per id for the whole
    column at once).

    Raises:
        PsiError: an id is neither a str nor an integer.
    """
    count = len(ids) if rows is None else len(rows)
    out = np.empty((count, POINT_BYTES), dtype=np.uint8)
    for lo in range(0, count, HASH_CHUNK):
        hi = min(lo + HASH_CHUNK, count)
        part = ids[lo:hi] if rows is None else _take(ids, rows[lo:hi])
        canon = canonical_ids(part, lo if rows is None else 0)
        out[lo:hi] = hash_to_curve(canon).view(np.uint8).reshape(-1, POINT_BYTES)
    return out


def _take(ids: IdColumn, rows: np.ndarray) -> IdColumn:
    return ids[rows] if isinstance(ids, np.ndarray) else [ids[r] for r in rows.tolist()]


def check_unique(ids: IdColumn, source: str = "") -> None:
    """Reject repeated ids, naming counts only (never an id) and `source`, what the ids
    are (e.g. "dataset 'loans'"), if given. Compares the first 8 bytes of each id's hash,
    and the whole hashes of the ids whose first 8 bytes repeat.

    Raises:
        PsiError: some id occurs in more than one row.
    """
    first = np.empty(len(ids), dtype=np.uint64)
    for lo in range(0, len(ids), HASH_CHUNK):
        first[lo : lo + HASH_CHUNK] = first_word(hash_ids(ids[lo : lo + HASH_CHUNK]))
    ranked = np.sort(first)
    tied = np.unique(ranked[1:][ranked[1:] == ranked[:-1]])
    if not len(tied):
        return
    suspects = np.flatnonzero(np.isin(first, tied))
    groups = equal_rows(hash_ids(ids, suspects))
    if not groups:
        return
    repeats = [len(g) for g in groups]
    raise PsiError(
        (f"{source}: " if source else "")
        + f"{sum(repeats) - len(repeats)} of {len(ids)} rows repeat an id of an earlier row "
        f"({len(repeats)} distinct ids occur more than once); PSI needs one row per id: "
        "deduplicate the id column (e.g. keep the first row of each id) or choose a "
        "unique key column"
    )


def words(points: np.ndarray) -> tuple[np.ndarray, ...]:
    """The (n, k) uint8 rows of `points` as k/8 big-endian uint64 columns: sorting by them
    (first column most significant) is sorting the bytes."""
    n, k = points.shape
    as_words = np.ascontiguousarray(points).view(">u8").reshape(n, k // 8)
    return tuple(as_words[:, j].astype(np.uint64) for j in range(k // 8))


def first_word(points: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each row of `points` (n, k uint8), as uint64."""
    return np.ascontiguousarray(points[:, :8]).view(np.uint64).ravel()


def distinct(values: np.ndarray) -> bool:
    """Whether no value of the 1-D array repeats."""
    ranked = np.sort(values)
    return not bool(np.any(ranked[1:] == ranked[:-1]))


def byte_order(points: np.ndarray) -> np.ndarray:
    """The permutation that sorts the rows of `points` (n, k uint8) by their bytes."""
    return np.lexsort(words(points)[::-1])


def equal_rows(points: np.ndarray) -> list[np.ndarray]:
    """Groups (row positions, two or more each) of equal rows of `points` (n, k uint8)."""
    if len(points) < 2:
        return []
    order = byte_order(points)
    ranked = points[order]
    same = np.all(ranked[1:] == ranked[:-1], axis=1)
    if not same.any():
        return []
    starts = np.flatnonzero(np.diff(np.concatenate(([False], same, [False])).astype(np.int8)))
    return [order[lo : hi + 1] for lo, hi in zip(starts[::2], starts[1::2], strict=True)]


def hash_to_curve(canon: Sequence[bytes]) -> np.ndarray:
    """One 32-byte u-coordinate per id, as a numpy `S32` array in input order."""
    blob = b"".join([hashlib.sha256(_HASH_DOMAIN + item).digest() for item in canon])
    return np.frombuffer(blob, dtype=POINT_DTYPE)


@dataclass(frozen=True)
class OwnSet:
    """A party's own ids, ready to blind: shuffled with OS randomness. Their hashes are
    computed again, chunk by chunk, as they are streamed (`chunks`), so no party holds
    every point at once."""

    ids: IdColumn  # in the caller's row order
    perm: np.ndarray  # shuffled position -> own row

    @property
    def size(self) -> int:
        return len(self.perm)

    def chunks(self, chunk: int) -> Iterator[bytes]:
        """H(id) in shuffled order, `chunk` points at a time."""
        for lo in range(0, self.size, chunk):
            yield hash_ids(self.ids, self.perm[lo : lo + chunk]).tobytes()


def prepare_own(ids: IdColumn, max_ids: int, source: str = "") -> OwnSet:
    """Check and shuffle one party's ids (`source`: what they are, for messages, e.g.
    "dataset 'loans'").

    The shuffle never uses a job seed: peers know it and could undo the shuffle.

    Raises:
        PsiError: no ids, more than `max_ids`, an id of the wrong type, or duplicates.
    """
    named = f"{source}: " if source else ""
    if not len(ids):
        raise PsiError(f"{named}this party has no ids; PSI needs at least one row")
    if len(ids) > max_ids:
        raise PsiError(f"{named}{len(ids)} ids exceed PsiConfig.max_ids={max_ids}")
    check_unique(ids, source)
    perm = np.random.default_rng(secrets.randbits(128)).permutation(len(ids))
    return OwnSet(ids, perm)


def blind_blob(secret: bytes, blob: bytes) -> bytes:
    """Multiply every 32-byte u-coordinate of `blob` by the clamped scalar `secret`.

    Module-level so a process pool can run it; inputs and outputs are plain bytes.

    Raises:
        ValueError: a point has small order (the product would be all zeros).
    """
    key = X25519PrivateKey.from_private_bytes(secret)
    load = X25519PublicKey.from_public_bytes
    step = POINT_BYTES
    return b"".join([key.exchange(load(blob[i : i + step])) for i in range(0, len(blob), step)])


class Blinder:
    """One party's fresh secret X25519 scalar for one PSI run, and the pool that applies it.

    Chunks of at least `parallel_min` points go to a process pool of `workers` processes
    (created on first use, shut down by `close`); smaller chunks run in the calling thread.
    With an `executor` (the party's), chunks of at least two of its tasks' worth go there
    instead, in blocks, and no pool is made. Use as a context manager.
    """

    def __init__(
        self, workers: int = 0, parallel_min: int = 2048, executor: BlockExecutor | None = None
    ) -> None:
        self._secret = X25519PrivateKey.generate().private_bytes_raw()
        self._workers = workers if workers > 0 else (os.cpu_count() or 1)
        self._parallel_min = parallel_min
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # several streams may share the pool
        self._executor = executor
        self._shared = None if executor is None else executor.share(self._secret)

    def __enter__(self) -> Blinder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, blob: bytes) -> Future[bytes]:
        """Start blinding one chunk; the future's result is the blinded chunk."""
        executor, shared = self._executor, self._shared
        if executor is not None and shared is not None:
            points, per_task = len(blob) // POINT_BYTES, executor.block_items(PSI_POINT)
            if points >= 2 * per_task:
                parts = [
                    executor.start(blind_blob, shared, blob[lo * POINT_BYTES : hi * POINT_BYTES])
                    for lo, hi in executor.split(points, per_task)
                ]
                return _joined(parts)
        elif self._workers > 1 and len(blob) >= self._parallel_min * POINT_BYTES:
            with self._lock:
                if self._pool is None:
                    context = multiprocessing.get_context("spawn")
                    self._pool = ProcessPoolExecutor(
                        self._workers,
                        mp_context=context,
                        initializer=watch_parent,  # ends with this process, even at SIGKILL
                        initargs=(os.getpid(),),
                    )
                pool = self._pool
            return pool.submit(blind_blob, self._secret, blob)
        done: Future[bytes] = Future()
        try:
            done.set_result(blind_blob(self._secret, blob))
        except ValueError as exc:
            done.set_exception(exc)
        return done

    def stream(self, blobs: Iterable[bytes]) -> Iterator[bytes]:
        """Blind chunks in order, submitting each as soon as the iterable yields it, with
        at most `2 workers + 2` chunks in flight (taken from `blobs` only as earlier ones
        finish): memory stays a few chunks whatever the set's size.

        Raises:
            PayloadError: a chunk holds a small-order point (invalid or malicious input).
        """
        pending: deque[Future[bytes]] = deque()
        most = 2 * self._workers + 2
        for blob in blobs:
            pending.append(self.submit(blob))
            while pending and (pending[0].done() or len(pending) >= most):
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())


def _joined(parts: list[Future[bytes]]) -> Future[bytes]:
    """One future for the concatenated results of `parts`, in order (the first error, if
    any part failed)."""
    whole: Future[bytes] = Future()
    left, lock = [len(parts)], threading.Lock()

    def finished(_: Future[bytes]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        errors = [part.exception() for part in parts]
        error = next((e for e in errors if e is not None), None)
        if error is not None:
            whole.set_exception(error)
        else:
            whole.set_result(b"".join(part.result() for part in parts))

    for part in parts:
        part.add_done_callback(finished)
    return whole


def _result(future: Future[bytes]) -> bytes:
    try:
        return future.result()
    except ValueError as exc:
        raise PayloadError(
            "a point to blind has small order; the peer sent invalid curve points"
        ) from exc
