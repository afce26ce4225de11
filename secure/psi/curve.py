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
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from vfl.secure.errors import PayloadError, PsiError
from vfl.secure.executor_base import PSI_POINT, BlockExecutor

POINT_BYTES = 32
POINT_DTYPE = f"S{POINT_BYTES}"
_HASH_DOMAIN = b"vfl/psi/x25519/v1\x00"

# One party's id column: a sequence of str/int, or a 1-D numpy array of them.
IdColumn = Sequence[object] | np.ndarray


def canonical_ids(ids: IdColumn) -> list[bytes]:
    """UTF-8 bytes of each id's text form (see the module docstring).

    Raises:
        PsiError: an id is neither a str nor an integer (the row position is named).
    """
    if isinstance(ids, np.ndarray) and ids.ndim == 1 and ids.dtype.kind in "iu":
        return [text.encode() for text in ids.astype(str).tolist()]
    out: list[bytes] = []
    for row, value in enumerate(ids):
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


def check_unique(canon: Sequence[bytes]) -> None:
    """Reject repeated ids, naming counts only (never an id).

    Raises:
        PsiError: some id occurs in more than one row.
    """
    if len(set(canon)) == len(canon):
        return
    repeats = [count for count in Counter(canon).values() if count > 1]
    raise PsiError(
        f"{sum(repeats) - len(repeats)} of {len(canon)} rows repeat an id of an earlier row "
        f"({len(repeats)} distinct ids occur more than once); PSI needs one row per id: "
        "deduplicate the id column (e.g. keep the first row of each id) or choose a "
        "unique key column"
    )


def hash_to_curve(canon: Sequence[bytes]) -> np.ndarray:
    """One 32-byte u-coordinate per id, as a numpy `S32` array in input order."""
    blob = b"".join([hashlib.sha256(_HASH_DOMAIN + item).digest() for item in canon])
    return np.frombuffer(blob, dtype=POINT_DTYPE)


@dataclass(frozen=True)
class OwnSet:
    """A party's own ids, ready to blind: hashed and shuffled with OS randomness."""

    canon: list[bytes]  # canonical id bytes, in the caller's row order
    perm: np.ndarray  # shuffled position -> own row
    points: bytes  # H(id) of the rows, in shuffled order

    @property
    def size(self) -> int:
        return len(self.canon)


def prepare_own(ids: IdColumn, max_ids: int) -> OwnSet:
    """Canonicalise, check, hash and shuffle one party's ids.

    The shuffle never uses a job seed: peers know it and could undo the shuffle.

    Raises:
        PsiError: no ids, more than `max_ids`, an id of the wrong type, or duplicates.
    """
    canon = canonical_ids(ids)
    if not canon:
        raise PsiError("this party has no ids; PSI needs at least one row")
    if len(canon) > max_ids:
        raise PsiError(f"{len(canon)} ids exceed PsiConfig.max_ids={max_ids}")
    check_unique(canon)
    perm = np.random.default_rng(secrets.randbits(128)).permutation(len(canon))
    return OwnSet(canon, perm, hash_to_curve(canon)[perm].tobytes())


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
        self._executor = executor
        self._shared = None if executor is None else executor.share(self._secret)

    def __enter__(self) -> Blinder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

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
            if self._pool is None:
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(self._workers, mp_context=context)
            return self._pool.submit(blind_blob, self._secret, blob)
        done: Future[bytes] = Future()
        try:
            done.set_result(blind_blob(self._secret, blob))
        except ValueError as exc:
            done.set_exception(exc)
        return done

    def stream(self, blobs: Iterable[bytes]) -> Iterator[bytes]:
        """Blind chunks in order, submitting each as soon as the iterable yields it.

        Raises:
            PayloadError: a chunk holds a small-order point (invalid or malicious input).
        """
        pending: deque[Future[bytes]] = deque()
        for blob in blobs:
            pending.append(self.submit(blob))
            while pending and pending[0].done():
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
