"""Submitting jobs: a training job's spec checked and stored, a prediction with a trained
model, and where a model scores online. Each stored job is launched in the background
(`coordinator.launcher`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from vfl.contract.errors import SpecError
from vfl.contract.spec import JobSpec
from vfl.contract.spec.predict import PredictSpec
from vfl.contract.states import SUCCEEDED, state_name
from vfl.coordinator.errors import CoordinatorError, PartyUnavailable, UnknownModel, of_model
from vfl.coordinator.models import deleted_on
from vfl.coordinator.specs import SpecCache
from vfl.coordinator.store import JobStore

log = logging.getLogger(__name__)


class Submissions:
    """Args:
    store: the job database.
    specs: the jobs' parsed specs (a submitted job's is kept).
    launch: launches a stored job in the background (`Launcher.spawn`).
    """

    def __init__(self, store: JobStore, specs: SpecCache, launch: Callable[[str], None]) -> None:
        self._store = store
        self._specs = specs
        self._launch = launch

    def submit(self, spec: JobSpec, spec_yaml: str) -> str:
        """Store the job `spec` (parsed from `spec_yaml`, which is kept as submitted), then
        launch it in the background.

        Raises:
            SpecError: the spec names data by path, or a dataset that its party, when
                registered, does not expose (a party not registered yet is asked at launch).
        """
        paths = [p.id for p in spec.parties if p.data.path is not None]
        if paths:
            raise SpecError(
                f"parties {paths} name their data by 'path'; a job submitted to running "
                "daemons names a dataset each party's config exposes: data: {dataset: NAME} "
                "(`vfl run` accepts paths because it starts the parties itself)"
            )
        self._check_exposed(spec)
        job_id = self._store.create(spec.job, spec_yaml, spec.to_json())
        self._specs.keep(job_id, spec)
        log.info("job %s submitted (%s, %d parties)", job_id, spec.protocol, len(spec.parties))
        self._launch(job_id)
        return job_id

    def _check_exposed(self, spec: JobSpec) -> None:
        """Raises: SpecError: a registered party does not expose a dataset `spec` names."""
        exposed = {r.party_id: r.datasets for r in self._store.party_records()}
        for party in spec.parties:
            if party.id not in exposed:
                continue
            for name in (party.data.dataset, party.data.test_dataset):
                if name is not None and name not in exposed[party.id]:
                    offered = ", ".join(exposed[party.id]) or "none"
                    raise SpecError(
                        f"party '{party.id}' exposes no dataset '{name}' (it exposes: "
                        f"{offered}); name one of them, or add '{name}' under datasets: "
                        "in that party's config and restart its daemon"
                    )

    def submit_prediction(self, request: PredictSpec, spec_yaml: str) -> str:
        """Store and launch a job that scores `request.data` with model `request.model`.

        Raises:
            UnknownModel: no job trained such a model.
            CoordinatorError: the job did not succeed, or is itself a prediction.
            UnknownModel: the model was deleted.
            SpecError: the datasets do not name exactly the model's parties.
        """
        spec = self._trained(request.model).for_prediction(request)
        job_id = self._store.create(spec.job, spec_yaml, spec.to_json())
        self._specs.keep(job_id, spec)
        log.info("job %s submitted (prediction with model %s)", job_id, request.model)
        self._launch(job_id)
        return job_id

    def locate_model(self, model_id: str) -> tuple[str, str]:
        """The active party of model `model_id` and the address it registered (where
        `vfl score` asks for scores).

        Raises:
            UnknownModel: no job trained such a model.
            CoordinatorError: the job did not succeed, or is itself a prediction.
            PartyUnavailable: the active party never registered here.
        """
        active = self._trained(model_id).active.id
        address = self._store.parties().get(active)
        if address is None:
            raise PartyUnavailable(
                f"party '{active}', the active party of model {model_id}, has not registered "
                "with this coordinator; start its daemon, or pass its address with --party"
            )
        return active, address

    def locate_parties(self, model_id: str) -> dict[str, str]:
        """Where each registered party of model `model_id` listens now (its newest
        registration), for online scoring's sessions.

        Raises:
            UnknownModel: no job trained such a model.
            CoordinatorError: the job did not succeed, or is itself a prediction.
        """
        registered = self._store.parties()
        spec = self._trained(model_id)
        return {p.id: registered[p.id] for p in spec.parties if p.id in registered}

    def _trained(self, model_id: str) -> JobSpec:
        """The spec of the training job that left model `model_id`.

        Raises:
            UnknownModel: no such job, or the model was deleted.
            CoordinatorError: the job left no model.
        """
        with of_model(model_id):
            record = self._store.get(model_id)
        trained = self._specs.spec(model_id)
        if trained.predict is not None or record.state != SUCCEEDED:
            what = "a prediction" if trained.predict is not None else state_name(record.state)
            raise CoordinatorError(
                f"job {model_id} is {what}, so it left no model; score with a training "
                "job that SUCCEEDED (see `vfl models`)"
            )
        deletion = self._store.model_deletion(model_id)
        if deletion is not None:
            raise UnknownModel(
                f"model {model_id} was deleted on {deleted_on(deletion)}; train it again "
                "(`vfl submit` its training spec) and score with the new model"
            )
        return trained
