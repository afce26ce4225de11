"""vfl: vertical federated learning whose parties never see each other's rows, weights
or labels.

The public Python API (docs/usage.md, "Python API"):

    import vfl

    with vfl.Client("coord.example:7700", tls="~/federation") as client:
        result = client.run("job.yaml", on_progress=print)     # a vfl.JobResult
        print(result.state, result.metrics)
        scores = client.score(result.job_id, ["id-1", "id-2"])  # vfl.Scores

    Client             the coordinator: submit, watch, wait, run, jobs, cancel; models,
                       model, delete_model; predict (batch) and score (online, by id)
    local_federation   a coordinator and parties as local processes, for trying it
    JobSpec, load_spec, parse_spec    the job spec; SpecError names an invalid field
    JobResult, Progress, Job, Model, Scores, ...   typed answers (frozen dataclasses)
    CoordinatorError and its subclasses, CertError  the errors calls raise

Installed, every part of the platform lives under this one namespace:

    vfl.proto        the wire contract (protobuf) and the gRPC plumbing both daemons use
    vfl.contract     what both daemons share: the job spec, job states, job logs, errors
    vfl.party        the party daemon (data, training roles, stored models, scoring)
    vfl.coordinator  the coordinator daemon (job store, life cycle, dashboard)
    vfl.secure       BlindFL source layers, Paillier, PSI, PKI (never imports grpc)
    vfl.celu         CELU-VFL local updates (never imports grpc)
    vfl.cli          the `vfl` command

Each sub-package's `__init__` re-exports what is public (`__all__`); other names are
private by convention. The names here load on first use (PEP 562): importing any part
of the platform, e.g. a daemon, does not load the API, grpc or torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vfl.client import Client
    from vfl.contract.spec import JobSpec, load_spec, parse_spec
    from vfl.errors import (
        AccessDenied,
        CertError,
        CoordinatorError,
        CoordinatorLost,
        CoordinatorUnavailable,
        PartyUnavailable,
        SpecError,
        UnknownJob,
        UnknownModel,
    )
    from vfl.local import LocalFederation, local_federation
    from vfl.models import Model, ModelPart
    from vfl.results import Job, JobResult, Prediction, Progress, Validation
    from vfl.scoring import Score, Scores

# where each public name lives (loaded on first use)
_EXPORTS = {
    "vfl.client": ("Client",),
    "vfl.contract.spec": ("JobSpec", "load_spec", "parse_spec"),
    "vfl.errors": (
        "AccessDenied",
        "CertError",
        "CoordinatorError",
        "CoordinatorLost",
        "CoordinatorUnavailable",
        "PartyUnavailable",
        "SpecError",
        "UnknownJob",
        "UnknownModel",
    ),
    "vfl.local": ("LocalFederation", "local_federation"),
    "vfl.models": ("Model", "ModelPart"),
    "vfl.results": ("Job", "JobResult", "Prediction", "Progress", "Validation"),
    "vfl.scoring": ("Score", "Scores"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "AccessDenied",
    "CertError",
    "Client",
    "CoordinatorError",
    "CoordinatorLost",
    "CoordinatorUnavailable",
    "Job",
    "JobResult",
    "JobSpec",
    "LocalFederation",
    "Model",
    "ModelPart",
    "PartyUnavailable",
    "Prediction",
    "Progress",
    "Score",
    "Scores",
    "SpecError",
    "UnknownJob",
    "UnknownModel",
    "Validation",
    "load_spec",
    "local_federation",
    "parse_spec",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use."""
    if name not in _MODULE:
        raise AttributeError(f"module 'vfl' has no attribute '{name}'")
    return getattr(importlib.import_module(_MODULE[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
