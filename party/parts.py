"""The model parts a party daemon keeps (`party.state.model_store`), as its servicer and
online scoring see them: listed, checked (each part again only once its files changed),
their drift counted, and deleted."""

from __future__ import annotations

import logging
import threading

from vfl.party.metrics import PartyMetrics
from vfl.party.state import StateDir
from vfl.party.state.model_store import Manifest, ModelStore

log = logging.getLogger(__name__)


class ModelParts:
    """One daemon's model parts; thread-safe. A party without a state directory keeps
    none: it lists none, and deletes and counts nothing."""

    def __init__(self, party_id: str, state: StateDir | None, metrics: PartyMetrics) -> None:
        self.party_id, self.state, self.metrics = party_id, state, metrics
        # model id -> (its files' stamp, the problem found then)
        self._checked: dict[str, tuple[tuple[int, ...], str]] = {}
        self._lock = threading.Lock()

    def models(self) -> list[Manifest]:
        """The parts kept here, oldest first."""
        return [] if self.state is None else ModelStore(self.state).list()

    def problem(self, model_id: str) -> str:
        """Empty if this party's part of `model_id` can score, else why not (it is corrupt:
        `ModelStore.problem`)."""
        if self.state is None:
            return ""
        store = ModelStore(self.state)
        stamp = store.stamp(model_id)
        with self._lock:
            known = self._checked.get(model_id)
        if known is not None and known[0] == stamp:
            return known[1]
        problem = store.problem(model_id, self.party_id)
        if problem:
            log.warning("party %s: %s", self.party_id, problem)
        with self._lock:
            self._checked[model_id] = (stamp, problem)
        return problem

    def unreadable(self) -> dict[str, str]:
        """The models whose manifest here is unreadable, each with the problem."""
        return {} if self.state is None else ModelStore(self.state).unreadable(self.party_id)

    def drift(self, model_id: str) -> dict[str, int]:
        """The drift counts of the rows this party scored with `model_id`."""
        return {} if self.state is None else ModelStore(self.state).drift(model_id)

    def count_drift(self, model_id: str, counts: dict[str, int]) -> None:
        """Online scoring's drift: the party's metrics and its model store count it."""
        self.metrics.count_drift(model_id, counts)
        if self.state is not None:
            ModelStore(self.state).add_drift(model_id, counts)

    def delete(self, model_id: str) -> bool:
        """Drop this party's part of `model_id`; returns whether it held one.

        Raises:
            ModelError: `model_id` cannot be a model's id.
        """
        if self.state is None:
            return False
        held = ModelStore(self.state).delete(model_id)
        if held:
            log.info("party %s: dropped its part of model %s", self.party_id, model_id)
        return held
