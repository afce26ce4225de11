"""`vfl submit | jobs | status | watch | cancel | health`: a user's commands against a running
coordinator (and `health` against any daemon)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from vfl.cli import certs, progress
from vfl.cli.commands import seconds
from vfl.client import Client
from vfl.errors import CoordinatorError, CoordinatorLost
from vfl.results import JobView

DEFAULT_COORDINATOR = os.environ.get("VFL_COORDINATOR", "127.0.0.1:7700")


def client(args: argparse.Namespace) -> Client:
    """The `vfl.Client` of a command's `add_client_flags` flags."""
    return Client(args.coordinator, certs.client_tls(args))


def add_client_flags(sp: argparse.ArgumentParser) -> None:
    """`--coordinator` and the client's TLS flags, for every command that calls it."""
    sp.add_argument(
        "--coordinator",
        default=DEFAULT_COORDINATOR,
        help="coordinator host:port (env VFL_COORDINATOR)",
    )
    certs.add_tls_flags(sp, client=True)


def client_command(
    sub: argparse._SubParsersAction,
    name: str,
    fn: Callable[[argparse.Namespace], int],
    help: str,
    description: str | None = None,
    *,
    add: Callable[[argparse.ArgumentParser], object] = lambda sp: None,
    json: str | None = "print the result as JSON",
) -> argparse.ArgumentParser:
    """Command `name` under `sub` that calls the coordinator: its own arguments (`add`),
    then `--json` (its help `json`; None: no such flag) and `add_client_flags`; runs `fn`.

    Args:
        sub: the parent's subcommands.
        help: its line in the parent's help; `description` heads its own help.
    """
    sp = sub.add_parser(name, help=help, description=description)
    add(sp)
    if json is not None:
        sp.add_argument("--json", action="store_true", help=json)
    add_client_flags(sp)
    sp.set_defaults(fn=fn)
    return sp


def finish(view: JobView, as_json: bool) -> int:
    print(json.dumps(view.to_plain()) if as_json else progress.format_result(view))
    if view.state == "FAILED" and view.result.refused:
        return 2  # a party refused the job's input (its data, a model it does not fit)
    return 0 if view.state == "SUCCEEDED" else 1


def follow(client: Client, job_id: str, as_json: bool) -> int:
    """Follow a job until it ends and print its result. Ctrl-C stops the watching, not
    the job (exit code 130).

    Raises:
        CoordinatorLost: the coordinator went away meanwhile (names how to follow again).
    """
    try:
        view = progress.follow(client, job_id, show=not as_json)
    except KeyboardInterrupt:
        print(
            f"stopped watching; job {job_id} keeps running (cancel it with `vfl cancel {job_id}`)",
            file=sys.stderr,
        )
        return 130
    except CoordinatorLost as exc:
        raise CoordinatorLost(
            f"{exc}; the job may still be running: follow it again with `vfl watch {job_id}` "
            "once the coordinator answers"
        ) from None
    return finish(view, as_json)


def cmd_submit(args: argparse.Namespace) -> int:
    if not Path(args.spec).is_file():
        raise CoordinatorError(f"job spec '{args.spec}' does not exist")
    with client(args) as c:
        job_id = c.submit(args.spec)
        if not args.wait:
            print(job_id)
            return 0
        print(f"submitted {job_id}", file=sys.stderr)
        return follow(c, job_id, args.json)


def cmd_health(args: argparse.Namespace) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from vfl.rpc import dial

    request = health_pb2.HealthCheckRequest(service=args.service)
    with dial(args.address, certs.client_tls(args), expect=args.expect) as channel:
        resp = health_pb2_grpc.HealthStub(channel).Check(request, timeout=args.timeout)
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    print(f"{args.address}: {status}")
    return 0 if resp.status == health_pb2.HealthCheckResponse.SERVING else 1


def cmd_jobs(args: argparse.Namespace) -> int:
    with client(args) as c:
        jobs = c.jobs()
    print(f"{'JOB':<32} {'STATE':<11} {'CREATED':<20} REASON")
    for j in jobs:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.created_at))
        print(f"{j.job_id:<32} {j.state:<11} {created:<20} {j.reason[:60]}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with client(args) as c:
        view = c.view(args.job)
    if args.json:
        print(json.dumps(view.to_plain()))
    else:
        print(progress.format_result(view))
        if view.result.total_rounds:
            print(f"  round: {view.result.round}/{view.result.total_rounds}")
        if view.result.checkpoints:
            print(f"  checkpointed: round {view.result.checkpoint_round} at every party")
        if view.state == "PAUSED":
            print(f"  resume with: vfl resume {view.job_id}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    with client(args) as c:
        return follow(c, args.job, args.json)


def cmd_resume(args: argparse.Namespace) -> int:
    with client(args) as c:
        state, rnd = c.resume(args.job)
        after = f"after round {rnd}" if rnd else "from the start (no common checkpoint)"
        print(f"{args.job}: {state}, continuing {after}", file=sys.stderr)
        if not args.wait:
            return 0
        return finish(progress.follow(c, args.job, show=not args.json), args.json)


def cmd_cancel(args: argparse.Namespace) -> int:
    with client(args) as c:
        print(f"{args.job}: {c.cancel(args.job)}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    def job(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("job", help="job id (see `vfl jobs`)")

    def waits(positional: Callable[[argparse.ArgumentParser], None]):
        def add(sp: argparse.ArgumentParser) -> None:
            positional(sp)
            sp.add_argument("--wait", action="store_true", help="follow the job until it ends")

        return add

    def spec(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("spec", help="job.yaml")

    client_command(sub, "submit", cmd_submit, "submit a job spec", add=waits(spec))
    client_command(sub, "jobs", cmd_jobs, "list jobs", json=None)
    client_command(sub, "status", cmd_status, "show a job", add=job)
    client_command(sub, "watch", cmd_watch, "follow a job until it ends", add=job)
    client_command(sub, "cancel", cmd_cancel, "cancel a job", add=job, json=None)
    client_command(
        sub,
        "resume",
        cmd_resume,
        "continue a paused job from its newest checkpoint",
        add=waits(job),
    )

    hc = sub.add_parser("health", help="check a daemon with the gRPC health service")
    hc.add_argument("address", help="host:port of a coordinator or party daemon")
    hc.add_argument("--service", default="", help="service name ('' = the whole server)")
    hc.add_argument("--expect", help="party id the server's certificate must name")
    hc.add_argument("--timeout", type=seconds, default=5.0, help="seconds")
    certs.add_tls_flags(hc, client=True)
    hc.set_defaults(fn=cmd_health)
