"""When one job checkpoints at one party, and what goes into its checkpoints.

Every party derives the same rounds from the spec and its plan: every
`train.checkpoint_every` rounds (default: once per epoch), always after the last round,
never with `checkpoint_every: 0`. A checkpoint holds the trainer's state, a hash of the
aligned row order, so a resume on changed data is refused instead of training on
misaligned rows, and the hashes of the snapshots of the job's sql datasets, which a
resume reads again (`party.state.snapshots`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.party.errors import CheckpointError
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
        on_saved: Callable[[int], None],
        preprocess: str | None = None,
        snapshots: dict[str, str] | None = None,
    ) -> None:
        self._state, self._job_id, self._party_id = state, job_id, party_id
        self._spec_hash = spec.spec_hash()
        self._every, self._total = every, total_rounds
        self._aligned, self._on_saved = aligned, on_saved
        self._preprocess = preprocess
        self._snapshots = dict(snapshots or {})

    def due(self, rnd: int) -> bool:
        return self._every > 0 and (rnd % self._every == 0 or rnd == self._total)

    def save(self, rnd: int, state: dict[str, Any]) -> None:
        begun = time.monotonic()
        ck = Checkpoint(
            self._job_id,
            self._spec_hash,
            self._party_id,
            rnd,
            {
                "trainer": state,
                "aligned": self._aligned,
                "preprocess": self._preprocess,
                "snapshots": self._snapshots,
            },
        )
        path = self._state.save(ck)
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
            CheckpointError: the aligned rows differ from the checkpoint's (data changed).
        """
        if ck.state.get("aligned") != self._aligned:
            raise CheckpointError(
                f"party '{self._party_id}': its aligned rows differ from those of its "
                f"checkpoint of round {ck.round} (its data changed since); restart the job"
            )
        state: dict[str, Any] = ck.state["trainer"]
        return state
