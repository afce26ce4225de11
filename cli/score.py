"""`vfl score`: score rows by id with a stored model, online, at the model's active party.

The active party is found with `--party HOST:PORT`, else by asking the coordinator
(`LocateModel`: the model's active party and the address it registered). One line per
id: its score columns, or the error that kept it from being scored. Exit code 0 when
every id was scored, 1 when some id was not (the others are still printed).
"""

from __future__ import annotations

import argparse
import json

import grpc
from vfl.cli import certs
from vfl.cli.jobs import add_client_flags, client
from vfl.proto import party_pb2 as pb
from vfl.proto import party_pb2_grpc
from vfl.proto.rpc import dial, explain

_ERRORS = {pb.ID_ERROR_UNKNOWN_ID: "unknown_id", pb.ID_ERROR_NOT_AT_PEER: "not_at_peer"}


def _active_party(args: argparse.Namespace) -> tuple[str, str | None]:
    """Where to ask: (address, the party id its certificate must name, if known)."""
    if args.party:
        return args.party, args.expect
    with client(args) as c:
        party, address = c.locate_model(args.model)
    return address, party


def predict(args: argparse.Namespace) -> pb.PredictResponse:
    """Raises:
    RuntimeError: the active party is unreachable (names the cause and fix).
    grpc.RpcError: it answered with an error (unknown model, not allowed, ...)."""
    address, expect = _active_party(args)
    tls = certs.client_tls(args)
    request = pb.PredictRequest(model_id=args.model, ids=args.id)
    with dial(address, tls, expect=expect) as channel:
        try:
            return party_pb2_grpc.PartyServiceStub(channel).Predict(request, timeout=args.timeout)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise RuntimeError(explain(exc, address, tls is not None, expect)) from None
            raise


def as_plain(resp: pb.PredictResponse) -> dict:
    """The response as `vfl score --json` prints it."""
    results = []
    for r in resp.results:
        if r.error:
            results.append({"id": r.id, "error": _ERRORS[r.error], "message": r.message})
            continue
        item: dict = {"id": r.id, **dict(zip(resp.columns, r.values, strict=True))}
        if r.predicted_class:
            item["class"] = r.predicted_class
        results.append(item)
    return {"model": resp.model_id, "columns": list(resp.columns), "results": results}


def cmd_score(args: argparse.Namespace) -> int:
    plain = as_plain(predict(args))
    if args.json:
        print(json.dumps(plain))
    else:
        for item in plain["results"]:
            if "error" in item:
                print(f"{item['id']}\terror {item['error']}: {item['message']}")
            else:
                cells = [f"{k}={v:.6g}" for k, v in item.items() if k not in ("id", "class")]
                cells += [f"class={item['class']}"] if "class" in item else []
                print("\t".join([item["id"], *cells]))
    return 1 if any("error" in item for item in plain["results"]) else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "score",
        help="score rows by id with a stored model, online (at its active party)",
        description="Score rows by id with a model the federation holds: the model's "
        "active party looks its rows up by id and runs the secure forward with every "
        "passive party. Exit code 1 if some id was not scored.",
    )
    sp.add_argument("model", help="the model's id (its training job's id)")
    sp.add_argument(
        "--id", action="append", required=True, help="a row id to score (repeat for more)"
    )
    sp.add_argument("--party", metavar="HOST:PORT", help="the active party's daemon")
    sp.add_argument("--expect", help="with --party and TLS: the party id its certificate names")
    sp.add_argument("--json", action="store_true", help="print the scores as JSON")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    add_client_flags(sp)
    sp.set_defaults(fn=cmd_score)
