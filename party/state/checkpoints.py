"""When one job checkpoints at one party, and what goes into its checkpoints.

Every party derives the same rounds from the spec and its plan: every
`train.checkpoint_every` rounds (default: once per epoch), always after the last round,
never with `checkpoint_every: 0`. A checkpoint holds the trainer's state, a hash of the
aligned row order and one of the aligned inputs' content (features, categorical codes,
labels), so a resume on changed data (other rows, or the same ids with other values) is
refused instead of training on it, and the hashes of the snapshots of the job's sql
datasets, which a resume reads again (`party.state.snapshots`).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from vfl.contract.spec import JobSpec
from vfl.party.errors import DataChanged, StateUnwritable
from vfl.party.state.checkpoint_file import Checkpoint
from vfl.party.state.store import StateDir

log = logging.getLogger(__name__)

HASH_ROWS = 1 << 16  # ids hashed at a time


def aligned_hash(ids: Sequence[str] | np.ndarray) -> str:
    """SHA-256 of the aligned row order (ids in order, each ended by a newline), to
    recognise the same alignment; hashed `HASH_ROWS` ids at a time."""
    digest = hashlib.sha256()
    for lo in range(0, len(ids), HASH_ROWS):
        chunk = ids[lo : lo + HASH_ROWS]
        texts = chunk.tolist() if isinstance(chunk, np.ndarray) else list(chunk)
        digest.update(("\n".join(texts) + "\n").encode())
    return digest.hexdigest()


def content_hash(arrays: Sequence[np.ndarray | sp.spmatrix | None]) -> str:
    """SHA-256 of the aligned inputs' values: each array's dtype, shape and bytes (a
    sparse one's data, indices and row pointers), None as a marker of its own."""
    digest = hashlib.sha256()
    for array in arrays:
        if array is None:
            digest.update(b"none;")
            continue
        csr = sp.csr_matrix(array) if sp.issparse(array) else None
        parts = [np.asarray(array)] if csr is None else [csr.data, csr.indices, csr.indptr]
        for part in parts:
            flat = np.ascontiguousarray(part).reshape(-1)
            digest.update(f"{flat.dtype.str}{np.shape(part)};".encode())
            digest.update(flat.view(np.uint8).data)
    return digest.hexdigest()


def checkpoint_every(spec: JobSpec, batches_per_epoch: int) -> int:
    """Rounds between checkpoints; 0: none."""
    every = spec.train.checkpoint_every
    return batches_per_epoch if every is None else every


class JobCheckpoints:
    """The `Checkpoints` of one job at one party.

    Args:
        state: the party's state directory.
        job_id, spec, party_id: whose checkpoints.
        every, total_rounds: the schedule (`checkpoint_every`, the plan's last round).
        aligned: `aligned_hash` of this party's aligned rows.
        content: `content_hash` of their inputs (features, codes and labels).
        on_saved: told each round saved (the progress report to the coordinator).
        preprocess: the party's fitted preprocessing (JSON), kept for a resume to apply.
        snapshots: the SHA-256 of each sql dataset's snapshot, by dataset name.
    """

    def __init__(
        self,
        state: StateDir,
        job_id: str,
        spec: JobSpec,
        party_id: str,
        every: int,
        total_rounds: int,
        aligned: str,
        content: str,
        on_saved: Callable[[int], None],
        preprocess: str | None = None,
        snapshots: dict[str, str] | None = None,
        selection: dict[str, Any] | None = None,
    ) -> None:
        self._state, self._job_id, self._party_id = state, job_id, party_id
        self._spec_hash = spec.spec_hash()
        self._every, self._total = every, total_rounds
        self._aligned, self._content, self._on_saved = aligned, content, on_saved
        self._preprocess = preprocess
        self._snapshots = dict(snapshots or {})
        self._selection = selection

    def due(self, rnd: int) -> bool:
        return self._every > 0 and (rnd % self._every == 0 or rnd == self._total)

    def save(self, rnd: int, state: dict[str, Any]) -> None:
        """Write the checkpoint of round `rnd`.

        Raises:
            StateUnwritable: the state directory cannot take it (a full disk): the job
                pauses; the previous checkpoints stay whole.
        """
        begun = time.monotonic()
        ck = Checkpoint(
            self._job_id,
            self._spec_hash,
            self._party_id,
            rnd,
            {
                "trainer": state,
                "aligned": self._aligned,
                "content": self._content,
                "preprocess": self._preprocess,
                "snapshots": self._snapshots,
                "selection": self._selection,
            },
        )
        try:
            path = self._state.save(ck)
        except OSError as exc:
            raise unwritable(self._party_id, f"its checkpoint of round {rnd}", exc) from exc
        log.info(
            "checkpoint of round %d: %.0f kB in %.3f s",
            rnd,
            path.stat().st_size / 1e3,
            time.monotonic() - begun,
        )
        self._on_saved(rnd)

    def trainer_state(self, ck: Checkpoint) -> dict[str, Any]:
        """The trainer's state in `ck`, once its rows are known to be aligned as now.

        Raises:
            DataChanged: the aligned rows, or their values, differ from the checkpoint's
                (the data changed since): the job pauses.
        """
        if ck.state.get("aligned") != self._aligned:
            raise DataChanged(
                f"party '{self._party_id}': its aligned rows differ from those of its "
                f"checkpoint of round {ck.round} (its data changed since); put back the "
                "data the job began with and resume, or restart the job"
            )
        content = ck.state.get("content")  # absent from checkpoints of earlier versions
        if content is not None and content != self._content:
            raise DataChanged(
                f"party '{self._party_id}': its rows hold other values than at its "
                f"checkpoint of round {ck.round} (the same ids, changed data); put back the "
                "data the job began with and resume, or restart the job"
            )
        state: dict[str, Any] = ck.state["trainer"]
        return state


def unwritable(party_id: str, what: str, exc: OSError) -> StateUnwritable:
    """The error of a write to the state directory that failed with `exc`: the full
    message names the file, the public one the disk's problem only."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        problem, fix = "the disk of its state directory is full", "free space there"
    else:
        reason = exc.strerror or type(exc).__name__
        problem, fix = f"its state directory cannot be written ({reason})", "mend it"
    public = (
        f"party '{party_id}': {what} could not be written: {problem}; {fix}, then "
        "resume the job from its last whole checkpoint"
    )
    return StateUnwritable(f"{public} [{exc}]", public=public)
