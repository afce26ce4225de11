"""vfl: vertical federated learning whose parties never see each other's rows, weights
or labels.

The public Python API (docs/usage.md, "Python API"):

    import vfl

    with vfl.Client("coord.example:7700", tls="~/federation") as client:
        result = client.run("job.yaml", on_progress=print)     # a vfl.JobResult
        print(result.state, result.metrics)
        scores = client.score(result.job_id, ["id-1", "id-2"])  # vfl.Scores

    Client             the coordinator: submit, watch, wait, run, jobs, cancel, resume,
                       view(s), job_report; models, model, delete_model; predict (batch)
                       and score (online, by id); diagnose (`vfl doctor`)
    local_federation   a coordinator and parties as local processes, for trying it
    JobSpec, load_spec, parse_spec    the job spec; SpecError names an invalid field
    JobResult, Progress, Job, JobView, Model, Scores, ...   typed answers (frozen dataclasses)
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
private by convention. The names here load on first use (`__init__.pyi` lists them):
importing any part of the platform, e.g. a daemon, does not load the API, grpc or torch.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
