"""`vfl.Client`: a federation's coordinator from Python, with typed answers and errors.

    with Client("coord.example:7700", tls="~/federation") as client:
        result = client.run("job.yaml", on_progress=print)
        scores = client.score(result.job_id, ["id-1", "id-2"])

It holds one channel to the coordinator (and dials a model's active party to score), all
closed by `close()` or the end of the `with` block. Every call raises the platform's typed
errors (`vfl.errors`), never `grpc.RpcError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from os import PathLike
from pathlib import Path
from typing import Any

from vfl.contract.errors import SpecError
from vfl.coordinator.client import CoordinatorClient, Job, JobView
from vfl.coordinator.doctor import Finding, Limits, diagnose
from vfl.coordinator.errors import CoordinatorError, UnknownJob, UnknownModel
from vfl.errors import translated
from vfl.models import Model
from vfl.proto import coordinator_pb2 as pb
from vfl.results import JobResult, Progress
from vfl.rpc import COORDINATOR_ID
from vfl.scoring import Scores, score_at
from vfl.secure.pki.certs import PartyFiles
from vfl.secure.pki.federation import ADMIN_ID, load_identity
from vfl.specs import PredictionBase, SpecLike, as_spec, prediction_yaml, spec_to_yaml
from vfl.watching import follow

TlsFiles = str | PathLike[str] | PartyFiles


class Client:
    """A connection to a coordinator at `address` ("host:port").

    Args:
        tls: mutual TLS: a folder with the federation's `ca.crt` and this identity's
            `.crt` and `.key` (what `vfl certs` makes, the CLI's `--tls DIR`), or their
            `PartyFiles`; None talks without TLS.
        identity: whose certificate in the folder to use (the CLI's `--identity`).
        timeout: seconds each call may take (watching a job has no limit).

    Every call raises `CoordinatorUnavailable` when the coordinator cannot be reached (the
    message names the cause and the fix), `AccessDenied` when this identity may not do it.

    Raises:
        CertError: a TLS file is missing, expired, from another CA or not this identity's.
        ValueError: a timeout that is not a positive number of seconds.
    """

    def __init__(
        self,
        address: str,
        tls: TlsFiles | None = None,
        *,
        identity: str = ADMIN_ID,
        timeout: float = 30.0,
    ) -> None:
        check_timeout(timeout)
        files = (
            load_identity(Path(tls).expanduser(), identity)
            if isinstance(tls, (str, PathLike))
            else tls
        )
        self.address = address
        self.tls: PartyFiles | None = files
        self._coordinator = CoordinatorClient(address, files, timeout=timeout)

    def __repr__(self) -> str:
        return f"Client({self.address!r}, tls={'on' if self.tls else 'off'})"

    def close(self) -> None:
        """Close the channels; the client cannot be used afterwards."""
        self._coordinator.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _errors(self, **kinds: Any) -> AbstractContextManager[None]:
        """`translated` for calls to the coordinator."""
        return translated(self.address, self.tls is not None, COORDINATOR_ID, **kinds)

    # --- jobs ------------------------------------------------------------------------

    def submit(self, spec: SpecLike) -> str:
        """Submit a job; returns its id at once (follow it with `watch` or `wait`).

        `spec`: a `JobSpec`, a mapping (a dict) or a YAML file's path. Validated here
        first, so a mistake names its field before anything is sent.

        Raises:
            SpecError: the spec is invalid (names the field), or the coordinator refused
                it (e.g. a dataset no party's config exposes).
            PartyUnavailable: a party of the spec is not registered.
        """
        text = spec_to_yaml(as_spec(spec))
        with self._errors(invalid=SpecError):
            return self._coordinator.submit(text)

    def run(
        self, spec: SpecLike, on_progress: Callable[[Progress], object] | None = None
    ) -> JobResult:
        """Submit a job and wait for it to end (`submit`, then `wait`).

        Raises:
            SpecError, PartyUnavailable: as `submit`.
            CoordinatorLost: as `wait`.
        """
        return self.wait(self.submit(spec), on_progress)

    def submit_analysis(self, spec: SpecLike) -> str:
        """Submit `spec` as an analysis job (`vfl analyze`: PSI, then every party's
        columns binned and measured, WOE and IV; nothing trained); returns its id.

        Raises:
            SpecError, PartyUnavailable: as `submit` (a task other than binary is refused).
        """
        return self.submit(as_spec(spec).model_copy(update={"analyze": True}))

    def analyze(
        self, spec: SpecLike, on_progress: Callable[[Progress], object] | None = None
    ) -> JobResult:
        """Submit an analysis job and wait for it (`submit_analysis`, then `wait`); its
        columns are `result.analysis` (a `vfl.analysis.Analysis`) once it succeeded.

        Raises:
            SpecError, PartyUnavailable: as `submit`.
            CoordinatorLost: as `wait`.
        """
        return self.wait(self.submit_analysis(spec), on_progress)

    def watch(self, job_id: str) -> Iterator[Progress]:
        """The job's progress as it changes, until it ends (the last event has `ended`).

        Breaking out of the loop stops watching, not the job.

        Raises:
            UnknownJob: no job `job_id`.
            CoordinatorLost: the coordinator went away before the job ended (the job may
                still run: watch it again once the coordinator is back).
        """
        shown: Progress | None = None
        for view in self.views(job_id):
            event = Progress.from_view(view)
            if event != shown:
                yield event
            shown = event

    def wait(
        self, job_id: str, on_progress: Callable[[Progress], object] | None = None
    ) -> JobResult:
        """Wait for the job to end, calling `on_progress(event)` each time its progress
        changes; returns its result (check `result.succeeded`; `result.reason` says why
        not). Interrupting the wait (Ctrl-C) leaves the job running (`cancel` stops it).

        Raises:
            UnknownJob, CoordinatorLost: as `watch`.
        """
        shown: Progress | None = None

        def changed(view: JobView) -> None:
            nonlocal shown
            event = Progress.from_view(view)
            if on_progress is not None and event != shown:
                on_progress(event)
            shown = event

        return JobResult.from_view(follow(self, job_id, changed))

    def views(self, job_id: str) -> Iterator[JobView]:
        """The job as the coordinator sends it, each time it changes, until it ends (the
        last view is ended): every field of its result, what `vfl watch` draws and `vfl
        status --json` prints (`JobView.to_plain`). Breaking out stops watching only.

        Raises:
            UnknownJob, CoordinatorLost: as `watch`.
        """
        with self._errors(missing=UnknownJob):
            yield from self._coordinator.views(job_id)

    def view(self, job_id: str) -> JobView:
        """The job as it is now, with every field of its result (`vfl status`; `job` gives
        the typed `JobResult`).

        Raises:
            UnknownJob: no job `job_id`.
        """
        with self._errors(missing=UnknownJob):
            return self._coordinator.get(job_id)

    def job(self, job_id: str) -> JobResult:
        """The job's result so far (`vfl status`).

        Raises:
            UnknownJob: no job `job_id`.
        """
        return JobResult.from_view(self.view(job_id))

    def jobs(self) -> list[Job]:
        """Every job this identity may see, oldest first (`vfl jobs`).

        Raises:
            CoordinatorUnavailable: the coordinator cannot be reached (as every call).
        """
        with self._errors():
            return [Job.from_proto(j) for j in self._coordinator.jobs()]

    def cancel(self, job_id: str) -> str:
        """Cancel a job; returns its state afterwards ("CANCELLED", or how it ended).

        Raises:
            UnknownJob: no job `job_id`.
        """
        with self._errors(missing=UnknownJob):
            return self._coordinator.cancel(job_id)

    def resume(self, job_id: str) -> tuple[str, int]:
        """Continue a paused job from the newest round every party checkpointed (`vfl
        resume`); returns its state afterwards and that round (0: from the start, no
        common checkpoint). Follow it with `watch` or `wait`.

        Raises:
            UnknownJob: no job `job_id`.
            CoordinatorError: the job is not paused, or a party of it did not answer (the
                message names it: start its daemon, then resume again).
        """
        with self._errors(missing=UnknownJob, refused=CoordinatorError):
            return self._coordinator.resume(job_id)

    def job_report(self, job_id: str) -> pb.GetJobReportResponse:
        """The job with its spec and the reports its parties sent, round by round: what
        `vfl report` draws (its curves: `vfl.reports.curves`). Works while the job runs.

        Raises:
            UnknownJob: no job `job_id`.
        """
        with self._errors(missing=UnknownJob):
            return self._coordinator.job_report(job_id)

    # --- the federation --------------------------------------------------------------

    def diagnose(self, *, max_clock_skew: float = 5.0, cert_days: int = 14) -> list[Finding]:
        """Check the federation end to end before a job (`vfl doctor`): the coordinator's
        and every registered party's health, certificates (with TLS), versions and clock,
        and the data plane between the parties. A problem is a `Finding` that is not `ok`
        (it names the party, the check and the fix); nothing is raised for it.

        Args:
            max_clock_skew: clocks further apart than this many seconds fail.
            cert_days: certificates expiring within this many days fail.
        """
        return diagnose(self.address, self.tls, Limits(max_clock_skew, cert_days))

    # --- models ----------------------------------------------------------------------

    def models(self) -> list[Model]:
        """The models the federation holds (`vfl models`); deleted ones are left out.

        Raises:
            CoordinatorUnavailable: the coordinator cannot be reached (as every call).
        """
        with self._errors():
            return [Model.from_proto(m) for m in self._coordinator.models()]

    def model(self, model_id: str) -> Model:
        """One model, with what each party said of its part (`vfl models show`).

        Raises:
            UnknownModel: no model `model_id` (never trained, or deleted).
        """
        return self._model(self._coordinator.model, model_id)

    def delete_model(self, model_id: str) -> Model:
        """Make every party drop its part of the model (`vfl models delete`). Returns it
        "deleted", or "deleting" with the parties that did not answer in `holders`: they
        drop their part when asked again (on registering, or by a later call).

        Raises:
            UnknownModel: no model `model_id`.
        """
        return self._model(self._coordinator.delete_model, model_id)

    def _model(self, call: Callable[[str], pb.ModelSummary], model_id: str) -> Model:
        with self._errors(missing=UnknownModel):
            return Model.from_proto(call(model_id))

    # --- scoring ---------------------------------------------------------------------

    def submit_prediction(
        self,
        model_id: str | None,
        data: Mapping[str, str] | None = None,
        *,
        out: str | None = None,
        batch_size: int | None = None,
        spec: PredictionBase | None = None,
    ) -> str:
        """Submit a batch prediction: the model scores each party's dataset (`data`, by
        party id), rows aligned by PSI; the scores land as a CSV named `out` (default: the
        job's id) in the active party's output folder. Returns the job's id.

        `spec`: a prediction spec (a mapping, or a YAML file's path: model, data, out,
        batch_size) whose fields those given here override (`vfl predict --spec`).

        Raises:
            SpecError: the prediction is invalid (names the field).
            UnknownModel: no model `model_id` (never trained, or deleted).
            CoordinatorError: the coordinator refused it: the job left no model, or
                `data` does not name exactly the model's parties.
        """
        text = prediction_yaml(model_id, data, out=out, batch_size=batch_size, base=spec)
        with self._errors(missing=UnknownModel):
            return self._coordinator.predict(text)

    def predict(
        self,
        model_id: str | None,
        data: Mapping[str, str] | None = None,
        *,
        out: str | None = None,
        batch_size: int | None = None,
        spec: PredictionBase | None = None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> JobResult:
        """`submit_prediction`, then `wait`: the result's `prediction` says how many rows
        were scored and where they are (`vfl predict`).

        Raises:
            SpecError, UnknownModel, CoordinatorError: as `submit_prediction`.
            CoordinatorLost: as `wait`.
        """
        job_id = self.submit_prediction(model_id, data, out=out, batch_size=batch_size, spec=spec)
        return self.wait(job_id, on_progress)

    def score(
        self,
        model_id: str,
        ids: Iterable[str],
        *,
        party: str | None = None,
        expect: str | None = None,
        timeout: float = 60.0,
    ) -> Scores:
        """Score rows by id, online, at the model's active party (`vfl score`): found
        through the coordinator, or the daemon at `party` ("host:port"; with TLS its
        certificate must name `expect`).

        Raises:
            UnknownModel: no model `model_id`, or the party holds no part of it.
            PartyUnavailable: the active party (or a passive one) does not answer.
            ScoringBusy: the active party refused at its capacity (at once); retry after
                the error's `retry_after_s`.
            CoordinatorError: the party refused (e.g. it is not the model's active party).
            ValueError: a timeout that is not a positive number of seconds.
        """
        check_timeout(timeout)
        if party is None:
            with self._errors(missing=UnknownModel):
                expect, party = self._coordinator.locate_model(model_id)
        return score_at(party, self.tls, model_id, list(ids), expect=expect, timeout=timeout)


def check_timeout(timeout: float) -> None:
    """Raises: ValueError: `timeout` is not a positive, finite number of seconds."""
    if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise ValueError(
            f"timeout must be a positive number of seconds, not {timeout!r}; e.g. timeout=30"
        )
