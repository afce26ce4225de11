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
from pathlib import Path

import numpy as np
from vfl.party.transport.audit_check import ALLOWED_KINDS, ONLINE_KINDS, leaks, plaintext_patterns

from tests.support.data import FATE

ALLOWED = ALLOWED_KINDS
ONLINE_ALLOWED = ONLINE_KINDS
BREAST_FILES = ("breast_hetero_host.csv", "breast_hetero_guest.csv")


def columns(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open() as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def forbidden_patterns() -> dict[str, list[bytes]]:
    """Byte encodings of the breast data whose presence in any payload would be a leak
    (`party.transport.audit_check.plaintext_patterns` of both tables)."""
    patterns: dict[str, list[bytes]] = {"feature": [], "label": []}
    for name in BREAST_FILES:
        header, rows = columns(FATE / name)
        first = 2 if "y" in header else 1
        features = np.array([[float(v) for v in row[first:]] for row in rows])
        labels = np.array([float(r[1]) for r in rows]) if first == 2 else None
        for what, group in plaintext_patterns(features, labels).items():
            patterns[what] += group
    return patterns


def _assert_no_plaintext(records: list[dict]) -> None:
    for what, count in leaks(records, forbidden_patterns()).items():
        assert not count, f"{count} {what} encodings found inside payloads"


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
    _assert_no_plaintext(records)


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
    _assert_no_plaintext(records)
    seen = [r["data"] for r in at_passives]
    leaked = [s for s in scores if any(s in blob for blob in seen)]
    assert not leaked, f"{len(leaked)} scores reached a passive party"
