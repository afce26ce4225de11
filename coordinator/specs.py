"""The parsed specs of the jobs in use, kept so that reports and health ticks do not parse
a job's spec again (`Lifecycle.spec`)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from vfl.contract.spec import JobSpec
from vfl.coordinator.store import JobStore

SPECS_KEPT = 256  # parsed specs of the most recently used jobs


class SpecCache:
    """A job's spec, parsed once: at submit (`keep`), or at first use after a restart; the
    most recently used `kept` stay. Thread-safe.

    Args:
        store: the job database (where a spec not kept is read from).
        kept: how many parsed specs stay.
    """

    def __init__(self, store: JobStore, kept: int = SPECS_KEPT) -> None:
        self._store = store
        self._kept = kept
        self._lock = threading.Lock()
        self._specs: OrderedDict[str, JobSpec] = OrderedDict()

    def spec(self, job_id: str) -> JobSpec:
        """Job `job_id`'s spec.

        Raises:
            UnknownJob: no such job.
        """
        with self._lock:
            spec = self._specs.get(job_id)
        return self.keep(job_id, spec or JobSpec.from_json(self._store.get(job_id).spec_json))

    def keep(self, job_id: str, spec: JobSpec) -> JobSpec:
        """Keep `spec` as job `job_id`'s (the most recently used); returns it."""
        with self._lock:
            self._specs[job_id] = spec
            self._specs.move_to_end(job_id)
            while len(self._specs) > self._kept:
                self._specs.popitem(last=False)
        return spec
