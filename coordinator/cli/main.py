"""`vfl`: the command line. The only place that parses arguments, configures logging and
installs signal handlers.

Exit codes: 0 success; 1 the job failed or was cancelled (or `vfl health`: not serving);
2 bad input (spec, config, certificate, unknown job); 3 a daemon is unreachable or the
TLS handshake failed; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import grpc

from coordinator.cli import certs, progress
from coordinator.cli.daemons import cmd_coordinator_serve, cmd_party_serve
from coordinator.client import CoordinatorClient, JobView
from coordinator.errors import CoordinatorError
from party.errors import PartyError
from proto.rpc import COORDINATOR_ID, explain
from secure.errors import SecureError

DEFAULT_COORDINATOR = os.environ.get("VFL_COORDINATOR", "127.0.0.1:7700")
DEMO_SPEC = Path(__file__).parent / "data" / "demo.yaml"


def _client(args: argparse.Namespace) -> CoordinatorClient:
    return CoordinatorClient(args.coordinator, certs.client_tls(args))


def _finish(view: JobView, as_json: bool) -> int:
    print(json.dumps(view.result) if as_json else progress.format_result(view))
    return 0 if view.state == "SUCCEEDED" else 1


def cmd_submit(args: argparse.Namespace) -> int:
    text = Path(args.spec).read_text() if Path(args.spec).is_file() else None
    if text is None:
        raise CoordinatorError(f"job spec '{args.spec}' does not exist")
    with _client(args) as c:
        job_id = c.submit(text)
        if not args.wait:
            print(job_id)
            return 0
        print(f"submitted {job_id}", file=sys.stderr)
        return _finish(progress.follow(c, job_id, show=not args.json), args.json)


def cmd_health(args: argparse.Namespace) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from proto.rpc import dial

    request = health_pb2.HealthCheckRequest(service=args.service)
    with dial(args.address, certs.client_tls(args), expect=args.expect) as channel:
        resp = health_pb2_grpc.HealthStub(channel).Check(request, timeout=args.timeout)
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    print(f"{args.address}: {status}")
    return 0 if resp.status == health_pb2.HealthCheckResponse.SERVING else 1


def cmd_jobs(args: argparse.Namespace) -> int:
    with _client(args) as c:
        jobs = c.jobs()
    print(f"{'JOB':<32} {'STATE':<11} {'CREATED':<20} REASON")
    for j in jobs:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.created_at))
        print(f"{j.job_id:<32} {j.state:<11} {created:<20} {j.reason[:60]}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with _client(args) as c:
        view = c.get(args.job)
    if args.json:
        print(json.dumps(view.result))
    else:
        print(progress.format_result(view))
        if view.result.get("total_rounds"):
            print(f"  round: {view.result.get('round')}/{view.result['total_rounds']}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    with _client(args) as c:
        return _finish(progress.follow(c, args.job, show=not args.json), args.json)


def cmd_cancel(args: argparse.Namespace) -> int:
    with _client(args) as c:
        print(f"{args.job}: {c.cancel(args.job)}")
    return 0


def cmd_run(args: argparse.Namespace, spec_path: Path | None = None) -> int:
    from coordinator.local import run_local
    from coordinator.spec import load_spec

    spec = load_spec(spec_path or args.spec)
    party_args = ("--audit", str(Path(args.audit).resolve())) if args.audit else ()
    if args.insecure:
        print("warning: --insecure: the processes of this run talk without TLS", file=sys.stderr)
    view = run_local(
        spec,
        lambda c, j: progress.follow(c, j, show=not args.json),
        workdir=args.workdir,
        party_args=party_args,
        tls=not args.insecure,
    )
    return _finish(view, args.json)


def cmd_demo(args: argparse.Namespace) -> int:
    return cmd_run(args, DEMO_SPEC)


def cmd_synth_ctr(args: argparse.Namespace) -> int:
    from celu.synth_ctr import CATEGORICAL_FIELDS, write_csv

    out = Path(args.out)
    meta = write_csv(out, args.rows, args.seed, vocab=args.vocab)
    job = {
        "job": "synth-ctr",
        "parties": [
            {
                "id": "advertiser",
                "role": "active",
                "data": {"path": "active.csv", "id": "id", "label": "y"},
            },
            {
                "id": "publisher",
                "role": "passive",
                "data": {
                    "path": "passive.csv",
                    "id": "id",
                    "categorical": list(CATEGORICAL_FIELDS),
                },
            },
        ],
        "model": {
            "source": {"out_dim": 32, "hidden": [64], "embedding_dim": 8},
            "top": {"hidden": [32], "task": "binary"},
        },
        "local_updates": {"mode": "celu", "workset": 5, "reuse": 5, "xi": 0.5},
        "train": {"epochs": 1, "batch_size": 256, "lr": 0.05, "optimizer": "adagrad"},
        "validation": {"fraction": 0.1, "every": 20},
    }
    import yaml

    (out / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))
    print(
        f"wrote {meta['rows']} rows (positive rate {meta['positive_rate']:.3f}) to {out}; "
        f"train with: vfl run {out / 'job.yaml'}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vfl", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def daemon_flags(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--port-file", help="write the bound port here once serving")
        sp.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)

    co = sub.add_parser("coordinator", help="the coordinator daemon")
    co_sub = co.add_subparsers(dest="action", required=True)
    cs = co_sub.add_parser("serve", help="serve the coordinator")
    cs.add_argument("--db", default="jobs.sqlite", help="SQLite job store (created if absent)")
    cs.add_argument("--listen", default="127.0.0.1:7700", help="host:port (port 0: any)")
    certs.add_tls_flags(cs, client=False)
    daemon_flags(cs)
    cs.set_defaults(fn=cmd_coordinator_serve)

    pa = sub.add_parser("party", help="the party daemon")
    pa_sub = pa.add_subparsers(dest="action", required=True)
    ps = pa_sub.add_parser("serve", help="serve a party next to its data")
    ps.add_argument("--config", required=True, help="party.yaml")
    ps.add_argument("--listen", help="override the config's listen address")
    ps.add_argument("--coordinator", help="override the config's coordinator address")
    ps.add_argument("--advertise", help="override the config's advertised host:port")
    certs.add_tls_flags(ps, client=False)
    ps.add_argument("--audit", metavar="DIR", help="log every data-plane envelope to DIR")
    ps.add_argument("--bandwidth-mbps", type=float, help="emulate a WAN link: bandwidth")
    ps.add_argument("--rtt-ms", type=float, help="emulate a WAN link: round-trip time")
    daemon_flags(ps)
    ps.set_defaults(fn=cmd_party_serve)

    for name, fn, helptext in (
        ("submit", cmd_submit, "submit a job spec"),
        ("jobs", cmd_jobs, "list jobs"),
        ("status", cmd_status, "show a job"),
        ("watch", cmd_watch, "follow a job until it ends"),
        ("cancel", cmd_cancel, "cancel a job"),
    ):
        sp = sub.add_parser(name, help=helptext)
        if name == "submit":
            sp.add_argument("spec", help="job.yaml")
            sp.add_argument("--wait", action="store_true", help="follow the job until it ends")
        elif name != "jobs":
            sp.add_argument("job", help="job id (see `vfl jobs`)")
        if name in ("status", "watch", "submit"):
            sp.add_argument("--json", action="store_true", help="print the result as JSON")
        sp.add_argument(
            "--coordinator",
            default=DEFAULT_COORDINATOR,
            help="coordinator host:port (env VFL_COORDINATOR)",
        )
        certs.add_tls_flags(sp, client=True)
        sp.set_defaults(fn=fn)

    hc = sub.add_parser("health", help="check a daemon with the gRPC health service")
    hc.add_argument("address", help="host:port of a coordinator or party daemon")
    hc.add_argument("--service", default="", help="service name ('' = the whole server)")
    hc.add_argument("--expect", help="party id the server's certificate must name")
    hc.add_argument("--timeout", type=float, default=5.0, help="seconds")
    certs.add_tls_flags(hc, client=True)
    hc.set_defaults(fn=cmd_health)
    certs.add_parser(sub)

    for name, fn, helptext in (
        ("run", cmd_run, "run a job on local processes"),
        ("demo", cmd_demo, "run the bundled two-party demo"),
    ):
        sp = sub.add_parser(name, help=helptext)
        if name == "run":
            sp.add_argument("spec", help="job.yaml (data may be given by path)")
        sp.add_argument("--json", action="store_true", help="print the result as one JSON")
        sp.add_argument("--workdir", help="keep configs, logs and the job store here")
        sp.add_argument("--audit", metavar="DIR", help="log every data-plane envelope to DIR")
        sp.add_argument("--insecure", action="store_true", help="no TLS between the processes")
        sp.set_defaults(fn=fn)
    data = sub.add_parser("data", help="data tools")
    data_sub = data.add_subparsers(dest="action", required=True)
    sc = data_sub.add_parser("synth-ctr", help="write a synthetic Criteo-like vertical split")
    sc.add_argument("--rows", type=int, default=100_000)
    sc.add_argument("--out", required=True, help="output folder")
    sc.add_argument("--seed", type=int, default=0)
    sc.add_argument("--vocab", type=int, default=1000, help="values per categorical field")
    sc.set_defaults(fn=cmd_synth_ctr)
    return p


def _explain(args: argparse.Namespace, exc: grpc.RpcError) -> str:
    if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return exc.details() or exc.code().name
    address = str(getattr(args, "coordinator", None) or getattr(args, "address", ""))
    expect = COORDINATOR_ID if getattr(args, "coordinator", None) else getattr(args, "expect", None)
    return explain(exc, address, bool(getattr(args, "tls", None)), expect)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KeyboardInterrupt:
        print("interrupted: job cancelled, processes stopped", file=sys.stderr)
        return 130
    except (CoordinatorError, PartyError, SecureError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        print(f"error: {_explain(args, exc)}", file=sys.stderr)
        code = exc.code()
        return 3 if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) else 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
