"""`vfl models`, `vfl models show M`, `vfl models delete M`: the models the federation holds
(which parties hold a part, state, metrics), one model in full, and deleting one at every
party. A delete that some party did not answer exits 3: that party still holds its part
until it is asked again (when it registers again, or by a later `vfl models`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from vfl.cli.jobs import client, client_command
from vfl.cli.progress import drift_text
from vfl.errors import CoordinatorError
from vfl.models import Model
from vfl.proto import coordinator_pb2 as pb

MAIN_METRICS = ("auc", "accuracy", "r2")  # the one `vfl models` shows, first found


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _typed(model: Model | pb.ModelSummary) -> Model:
    return model if isinstance(model, Model) else Model.from_proto(model)


def metric(model: Model) -> str:
    """The model's main validation metric, e.g. "auc=0.9912"; "-" without metrics."""
    names = [k for k in MAIN_METRICS if k in model.metrics] or sorted(model.metrics)
    return f"{names[0]}={model.metrics[names[0]]:.4f}" if names else "-"


def parties(model: Model) -> str:
    """Who holds a part: "bank, shop", with "(missing)" or "(unreachable)" where not known
    to hold one, "(corrupt)" where the part cannot score; a deleting model shows the
    parties that still hold theirs."""
    marks = []
    corrupt = {h.party_id for h in model.parts if h.problem}
    for p in model.parties:
        if p in model.unreachable:
            marks.append(f"{p} (unreachable)")
        elif p in model.missing:
            marks.append(f"{p} (missing)")
        elif p in corrupt:
            marks.append(f"{p} (corrupt)")
        elif p in model.holders:
            marks.append(p)
    return ", ".join(marks) or "-"


def format_table(models: Sequence[Model | pb.ModelSummary]) -> str:
    lines = [f"{'MODEL':<32} {'NAME':<16} {'PROTOCOL':<9} {'STATE':<11} {'METRIC':<12} PARTIES"]
    for m in map(_typed, models):
        lines.append(
            f"{m.model_id:<32} {m.name:<16} {m.protocol:<9} {m.state:<11} {metric(m):<12} "
            f"{parties(m)}"
        )
    return "\n".join(lines)


def _party_line(model: Model, party: str) -> str:
    parts = {h.party_id: h for h in model.parts}
    if party in model.unreachable:
        held = "still holds its part" if model.deleted_at else "whether it holds one is unknown"
        return f"{party}: did not answer ({held})"
    if party in model.missing:
        return f"{party}: holds no part"
    if party not in model.holders:
        return f"{party}: dropped its part"
    if party not in parts:
        return f"{party}: holds its part"
    h = parts[party]
    if h.problem:
        return f"{party}: holds a part that cannot score: {h.problem}"
    key = f", key {h.key_fingerprint[:16]}" if h.key_fingerprint else ""
    kept = _when(h.created_at)
    line = f"{party}: holds its part ({h.role}, {h.columns} columns, kept {kept}{key})"
    problems = [f"\n    online scoring, table '{t}': {why}" for t, why in h.table_problems.items()]
    return line + drift_text(h.drift) + "".join(sorted(problems))


def format_model(model: Model | pb.ModelSummary) -> str:
    model = _typed(model)
    lines = [
        f"model {model.model_id}: {model.state}",
        f"  name: {model.name}, protocol: {model.protocol}",
        f"  created: {_when(model.created_at)}",
    ]
    if model.metrics:
        shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted(model.metrics.items()))
        lines.append(f"  metrics: {shown}")
    if model.deleted_at:
        lines.append(f"  deleted: {_when(model.deleted_at)}")
    lines += [f"  {_party_line(model, p)}" for p in model.parties]
    if model.state == "deleting":
        lines.append(f"  {_pending(model)}")
    return "\n".join(lines)


def _pending(model: Model) -> str:
    who = ", ".join(f"'{p}'" for p in model.holders)
    one = len(model.holders) == 1
    return (
        f"part{'y' if one else 'ies'} {who} still hold{'s' if one else ''} a part: "
        f"{'it is' if one else 'they are'} asked again on registering, by `vfl models`, "
        f"or by `vfl models delete {model.model_id}`"
    )


def cmd_models(args: argparse.Namespace) -> int:
    if args.action is None:
        with client(args) as c:
            models = c.models()
        print(json.dumps([m.to_plain() for m in models]) if args.json else format_table(models))
        return 0
    if not args.model:
        raise CoordinatorError(
            f"`vfl models {args.action}` needs a model id; list them with `vfl models`"
        )
    with client(args) as c:
        model = c.model(args.model) if args.action == "show" else c.delete_model(args.model)
    print(json.dumps(model.to_plain()) if args.json else format_model(model))
    if args.action == "delete" and model.state == "deleting":
        if args.json:  # the text form says it already
            print(
                f"model {model.model_id} is not deleted everywhere yet: {_pending(model)}",
                file=sys.stderr,
            )
        return 3
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    def add(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("action", nargs="?", choices=("show", "delete"), help="show or delete")
        sp.add_argument("model", nargs="?", help="the model's id (its training job's id)")

    client_command(
        sub,
        "models",
        cmd_models,
        "list the models the federation holds; show or delete one",
        "`vfl models` lists the models (training jobs that succeeded) with the parties "
        "holding a part; `vfl models show M` shows one; `vfl models delete M` makes every "
        "party drop its part (exit 3 if some party did not answer: it still holds its part "
        "and is asked again later).",
        add=add,
        json="print as JSON",
    )
