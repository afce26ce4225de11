"""The checks of a wire audit (docs/security.md, "The wire audit"), shared by every test
that records a blindfl job's envelopes (`vfl run --audit`, `vfl party serve --audit`).

Allowed in blindfl mode: public keys, ciphertexts, the source layers' setup messages
(sizes, scales, slot layouts), row positions, PSI's control messages and blinded curve
points; in an online scoring session only ids (to passive parties), row positions and
ciphertexts. Never a plaintext tensor, a feature value, a label, a weight, or (at a
passive party) a score.
"""

from __future__ import annotations

import csv
import struct
from pathlib import Path

import numpy as np

from tests.support.data import FATE

ALLOWED = {"public_key", "ciphertexts", "layer_setup", "control", "indices", "ec_points"}
ONLINE_ALLOWED = {"ids", "indices", "ciphertexts"}  # a blindfl online scoring session
BREAST_FILES = ("breast_hetero_host.csv", "breast_hetero_guest.csv")


def columns(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open() as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def forbidden_patterns() -> dict[str, list[bytes]]:
    """Byte encodings of the breast data whose presence in any payload would be a leak:
    float64 feature values (|v| > 1e-3), float32 pairs of adjacent feature values, and
    runs of eight labels as float32 or float64."""
    patterns: dict[str, list[bytes]] = {"feature": [], "label": []}
    for name in BREAST_FILES:
        header, rows = columns(FATE / name)
        first = 2 if "y" in header else 1
        for row in rows:
            values = [float(v) for v in row[first:]]
            patterns["feature"] += [struct.pack("<d", v) for v in values if abs(v) > 1e-3]
            pairs = zip(values, values[1:], strict=False)
            patterns["feature"] += [struct.pack("<ff", a, b) for a, b in pairs]
    header, rows = columns(FATE / "breast_hetero_guest.csv")
    labels = np.array([float(r[1]) for r in rows])
    for start in range(0, len(labels) - 8, 8):
        run = labels[start : start + 8]
        patterns["label"] += [run.astype("<f4").tobytes(), run.astype("<f8").tobytes()]
    return patterns


def assert_only_allowed_payloads(
    records: list[dict],
    parties: set[str],
    required: frozenset[str] = frozenset({"public_key", "ciphertexts"}),
) -> None:
    """Every recorded envelope of a blindfl job on the breast data: an allowed kind, sent
    by one of `parties`, holding no encoding of a feature value or of a run of labels; the
    kinds `required` are among them (a training job exchanges keys, a prediction with a
    stored model does not)."""
    kinds = {r["kind"] for r in records}
    assert required <= kinds, kinds
    assert kinds <= ALLOWED, f"disallowed payload kinds crossed the wire: {kinds - ALLOWED}"
    assert {r["sender"] for r in records} == parties
    blobs = {r["sha256"]: r["data"] for r in records}
    for what, patterns in forbidden_patterns().items():
        leaks = [p for p in patterns if any(p in blob for blob in blobs.values())]
        assert not leaks, f"{len(leaks)} {what} encodings found inside payloads"


def assert_online_payloads(records: list[dict], active: str, passives: set[str], scores) -> None:
    """Every recorded envelope of blindfl online scoring sessions on the breast data: ids
    only from the active party, positions and ciphertexts, no encoding of a feature value
    or a run of labels, and at a passive party none of `scores` (their byte encodings)."""
    kinds = {r["kind"] for r in records}
    assert kinds == ONLINE_ALLOWED, f"kinds other than {ONLINE_ALLOWED} crossed: {kinds}"
    assert {r["sender"] for r in records} == {active, *passives}
    assert {r["sender"] for r in records if r["kind"] == "ids"} == {active}
    at_passives = [r for r in records if r["receiver"] in passives]
    assert at_passives and all(r["direction"] in ("sent", "received") for r in at_passives)
    blobs = {r["sha256"]: r["data"] for r in records}
    for what, patterns in forbidden_patterns().items():
        leaks = [p for p in patterns if any(p in blob for blob in blobs.values())]
        assert not leaks, f"{len(leaks)} {what} encodings found inside payloads"
    seen = [r["data"] for r in at_passives]
    leaked = [s for s in scores if any(s in blob for blob in seen)]
    assert not leaked, f"{len(leaked)} scores reached a passive party"
