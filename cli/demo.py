"""`vfl demo`: the bundled two-party job on local processes, trained securely.

A bank (the labels and 10 features) and a shop (20 more features of the same people,
FATE's breast data) train one model with `protocol: blindfl` (2048-bit Paillier keys) on
a fresh local topology (`vfl.local.run.started`), with live progress through PSI,
keying and training. On the same processes the demo then trains the same model with
plaintext `split` learning (the insecure baseline, seconds), prints both validation
metrics, summarises the wire audit the party daemons wrote of the secure job (bytes and
payload kinds per direction, and a scan of every payload for the tables' feature values
and labels: `party.transport.audit_check`), and scores a few rows online with the trained
model (`vfl score`'s `Predict` at the bank). `--protocol split` runs only the fast path.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from vfl.cli import progress
from vfl.cli.run import add_local_run_flags, local_workdir
from vfl.contract.spec import JobSpec, load_spec
from vfl.local.run import LocalRun, follow_or_cancel, started
from vfl.party.transport.audit import read_audit
from vfl.party.transport.audit_check import (
    ALLOWED_KINDS,
    leaks,
    plaintext_patterns,
    summarize,
)
from vfl.results import JobView
from vfl.scoring import score_at
from vfl.secure.pki.federation import ADMIN_ID, load_identity

DATA = Path(__file__).parent / "data"
DEMO_SPEC = DATA / "demo.yaml"
TABLES = {"bank": DATA / "breast_hetero_guest.csv", "shop": DATA / "breast_hetero_host.csv"}
SCORED_ROWS = 3  # rows the demo scores online with the trained model
TEST_KEY_BITS = 512  # --test-keys: fast and insecure, for tests of the demo itself


def demo_spec(protocol: str, test_keys: bool = False) -> JobSpec:
    """The bundled job with `protocol`; with `test_keys`, insecure small Paillier keys."""
    raw = load_spec(DEMO_SPEC).model_dump(mode="json")
    raw["protocol"] = protocol
    if protocol == "split":
        raw["job"] = f"{raw['job']}-split"
    if test_keys:
        raw["crypto"] = {**raw["crypto"], "key_bits": TEST_KEY_BITS}
        raw["crypto"]["allow_insecure_test_keys"] = True
    return JobSpec.model_validate(raw)


def cmd_demo(args: argparse.Namespace) -> int:
    if args.insecure:
        print("warning: --insecure: the processes of this run talk without TLS", file=sys.stderr)
    if args.test_keys:
        print(
            f"warning: --test-keys: {TEST_KEY_BITS}-bit Paillier keys, not secure", file=sys.stderr
        )
    began = time.monotonic()
    secure = args.protocol == "blindfl"
    spec = demo_spec(args.protocol, args.test_keys)
    # the daemons run in the run's folder: a relative audit folder lands there
    audit = str(Path(args.audit).resolve()) if args.audit else "audit"
    views: list[JobView] = []
    ok = lambda: bool(views) and all(v.state == "SUCCEEDED" for v in views)  # noqa: E731
    party_args = ("--audit", audit) if secure else ()
    try:
        with started(
            spec, local_workdir(args), party_args, tls=not args.insecure, went_well=ok
        ) as run:
            out = _demo(run, spec, secure, run.base / audit, views, args.json)
    except KeyboardInterrupt:
        print("interrupted: job cancelled, processes stopped", file=sys.stderr)
        return 130
    out["wall_seconds"] = round(time.monotonic() - began, 1)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"wall time: {out['wall_seconds']} s")
    wire = out.get("wire", {})
    clean = not wire.get("disallowed_kinds") and not any(wire.get("leaks", {}).values())
    return 0 if ok() and clean else 1


def _demo(
    run: LocalRun, spec: JobSpec, secure: bool, audit: Path, views: list[JobView], as_json: bool
) -> dict[str, Any]:
    """Train (securely, then the baseline), check the wire, score: the result to print."""
    views.append(follow_or_cancel(run.client, run.submit(spec), _watcher(as_json)))
    main = views[0]
    if not secure or main.state != "SUCCEEDED":
        if not as_json:
            print(progress.format_result(main))
        return main.to_plain()
    views.append(follow_or_cancel(run.client, run.submit(demo_spec("split")), _watcher(as_json)))
    out: dict[str, Any] = main.to_plain()
    out["baseline"] = _brief(views[1])
    out["wire"] = _wire(audit, main.job_id)
    out["scores"] = _score(run, main.job_id)
    if not as_json:
        _print(main, views[1], out, spec)
    return out


def _watcher(as_json: bool):
    return lambda client, job_id: progress.follow(client, job_id, show=not as_json)


def _brief(view: JobView) -> dict[str, Any]:
    plain = view.to_plain()
    return {k: plain[k] for k in ("job", "state", "metrics", "seconds") if k in plain}


def _wire(audit: Path, job_id: str) -> dict[str, Any]:
    """What the parties' wire audit recorded of job `job_id`: per direction, and the
    scan of every payload for the bundled tables' values and labels."""
    records = [r for r in read_audit(audit) if r["job"] == job_id]
    patterns: dict[str, list[bytes]] = {"feature": [], "label": []}
    for path in TABLES.values():
        for what, group in plaintext_patterns(*_table(path)).items():
            patterns[what] += group
    directions = {
        f"{s}->{r}": {"envelopes": d.envelopes, "bytes": d.bytes, "kinds": dict(d.kinds)}
        for (s, r), d in summarize(records).items()
    }
    kinds = {r["kind"] for r in records}
    return {
        "directions": directions,
        "disallowed_kinds": sorted(kinds - ALLOWED_KINDS),
        "patterns": {k: len(v) for k, v in patterns.items()},
        "leaks": leaks(records, patterns),
    }


def _table(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """A bundled table's feature values and labels (the id column first, then `y`)."""
    with path.open() as fh:
        header, *rows = list(csv.reader(fh))
    first = 2 if header[1] == "y" else 1
    features = np.array([[float(v) for v in row[first:]] for row in rows])
    return features, (np.array([float(r[1]) for r in rows]) if first == 2 else None)


def _score(run: LocalRun, model_id: str) -> list[dict[str, Any]]:
    """Score a few rows of the bank's table online with the trained model: the first of
    each label, then the next ones."""
    with TABLES["bank"].open() as fh:
        table = list(csv.reader(fh))[1:]
    firsts = [next(r for r in table if r[1] == y) for y in ("0", "1")]
    rows = (firsts + [r for r in table if r not in firsts])[:SCORED_ROWS]
    party, address = run.client.locate_model(model_id)
    tls = load_identity(run.tls_dir, ADMIN_ID) if run.tls_dir else None
    scores = score_at(address, tls, model_id, [r[0] for r in rows], expect=party)
    results = scores.to_plain()["results"]
    for item, row in zip(results, rows, strict=True):
        item["label"] = row[1]
    return results


def _print(main: JobView, split: JobView, out: dict[str, Any], spec: JobSpec) -> None:
    print(progress.format_result(main))
    metric = next((k for k in ("auc", "accuracy", "r2") if k in out.get("metrics", {})), None)
    if metric:
        base = out["baseline"].get("metrics", {}).get(metric, float("nan"))
        print(
            f"validation {metric}: blindfl {out['metrics'][metric]:.4f} (secure, "
            f"{out.get('seconds', 0):.1f} s) | split {base:.4f} (plaintext baseline, "
            f"{out['baseline'].get('seconds', 0):.1f} s, job {split.job_id})"
        )
    wire = out["wire"]
    print(f"what crossed the wire in job {main.job_id} (the parties' wire audit):")
    for direction, d in wire["directions"].items():
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(d["kinds"].items(), key=lambda x: -x[1]))
        print(f"  {direction}: {d['envelopes']} envelopes, {d['bytes'] / 1e6:.2f} MB ({kinds})")
    found = wire["leaks"]
    if wire["disallowed_kinds"] or any(found.values()):
        print(f"  LEAK: kinds {wire['disallowed_kinds']}, encodings found {found}")
    else:
        n = wire["patterns"]
        print(
            "  no feature value, label or plaintext tensor (activation, derivative) crossed: "
            "only keys, ciphertexts, layer setup, row positions, PSI points and control; "
            f"0 of {n['feature']} feature and 0 of {n['label']} label encodings in any payload"
        )
    key_bits = spec.crypto.key_bits
    print(f"scoring {len(out['scores'])} rows online with the trained model ({key_bits}-bit keys):")
    for item in out["scores"]:
        if "error" in item:
            print(f"  id {item['id']}: error {item['error']}: {item['message']}")
        else:
            print(
                f"  id {item['id']}: score={item['score']:.4f} class={item.get('class', '')} "
                f"(label {item['label']})"
            )


def add_parser(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser(
        "demo",
        help="the bundled two-party demo: secure training, baseline, wire audit, scoring",
        description=__doc__.split("\n\n")[0],
    )
    sp.add_argument(
        "--protocol",
        choices=("blindfl", "split"),
        default="blindfl",
        help="blindfl (default: secure, 2048-bit keys, then the split baseline, the wire "
        "audit and online scores) or split (only the fast plaintext job)",
    )
    sp.add_argument(
        "--test-keys",
        action="store_true",
        help=f"{TEST_KEY_BITS}-bit Paillier keys: fast and NOT secure (tests)",
    )
    add_local_run_flags(sp, "the job store, the wire audit and the run's CA")
    sp.set_defaults(fn=cmd_demo)
