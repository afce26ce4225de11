"""Reading a wire audit (`party.transport.audit`): what crossed between which parties, and
whether any plaintext of the parties' tables did.

`summarize` counts envelopes, bytes and payload kinds per direction. `plaintext_patterns`
turns a table's values into the byte encodings whose presence inside a payload would be a
leak (float64 values, float32 pairs of adjacent values of a row, runs of eight labels as
float32 or float64), and `find_plaintext` looks for them in every recorded payload, with
numpy over all eight byte alignments (seconds for a 2048-bit job's megabytes, where a
`bytes.find` per pattern would take minutes). `vfl demo` and the wire-audit tests share
these; docs/security.md, "The wire audit", says what each kind may carry. A tree job's
envelopes are checked by tag, sender and kind (`TREE_MESSAGES`, `tree_problems`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

# What a blindfl job may send (docs/security.md): public keys, ciphertexts, the source
# layers' setup (sizes, scales, slot layouts), row positions, PSI's control messages and
# blinded curve points; `vfl doctor`'s data-plane probe sends `ping`.
ALLOWED_KINDS = frozenset(
    {"public_key", "ciphertexts", "layer_setup", "control", "indices", "ec_points", "ping"}
)
ONLINE_KINDS = frozenset({"ids", "indices", "ciphertexts"})  # a blindfl scoring session

# What a tree job (`model: {trees: ...}`, docs/protocols.md "Gradient-boosted trees") may
# send, by tag: who sends it (the active party, a passive one, or either: PSI) and its
# payload kinds under `split` and under `secureboost`. Under `split` the (g, h) and the
# candidates' sums are float64 tensors; under `secureboost` they are ciphertexts only,
# after the active party's public key and bucket layout. Beyond them only split picks
# (int64), split ids, candidate counts and row positions (indices), row partitions and
# split decisions (packed bits, uint8) and the rounds' control messages cross.
_CIPHERTEXTS = ("ciphertexts",)
TREE_MESSAGES: tuple[tuple[re.Pattern[str], str, frozenset[str], frozenset[str]], ...] = tuple(
    (re.compile(pattern), sender, frozenset(split), frozenset(secure or split))
    for pattern, sender, split, secure in (
        (r"psi(-test)?/.+", "any", ("ec_points", "control", "indices"), ()),
        (r"tree/key", "active", (), ("public_key",)),
        (r"tree/layout", "active", (), ("layer_setup",)),
        (r"tree/r\d+/go", "active", ("control",), ()),
        (r"tree/r\d+/rows", "active", ("indices",), ()),
        (r"tree/r\d+/gh", "active", ("tensor",), _CIPHERTEXTS),
        (r"tree/r\d+/d\d+/(pick|grow)", "active", ("tensor",), ()),
        (r"tree/gains", "active", ("tensor",), ()),
        (r"tree/r\d+/d\d+/(sizes|ids)", "passive", ("indices",), ()),
        (r"tree/r\d+/d\d+/hist", "passive", ("tensor",), _CIPHERTEXTS),
        (r"tree/r\d+/(d\d+/part|eval)", "passive", ("tensor",), ()),
        (r"(predict|score)/b\d+/bits", "passive", ("tensor",), ()),
        (r"score/b\d+/ids", "active", ("ids",), ()),
        (r"score/b\d+/lacks", "passive", ("indices", "control"), ()),
    )
)
# What an analysis job (`vfl analyze`, docs/protocols.md "WOE and IV") may send: PSI, the
# active party's key, layout and row ciphertexts, a passive party's bin counts per column
# (control) and packed sums (ciphertexts), and the active party's last word (control).
WOE_MESSAGES: tuple[tuple[re.Pattern[str], str, frozenset[str]], ...] = tuple(
    (re.compile(pattern), sender, frozenset(kinds))
    for pattern, sender, kinds in (
        (r"psi(-test)?/.+", "any", ("ec_points", "control", "indices")),
        (r"woe/pk", "active", ("public_key",)),
        (r"woe/layout", "active", ("layer_setup",)),
        (r"woe/rows/\d+", "active", ("ciphertexts",)),
        (r"woe/end", "active", ("control",)),
        (r"woe/bins", "passive", ("control",)),
        (r"woe/sums", "passive", ("ciphertexts",)),
    )
)
MIN_FEATURE = 1e-3  # smaller values (zeros, mostly) would match too much to mean a leak


@dataclass
class Direction:
    """The envelopes one party sent another."""

    envelopes: int = 0
    bytes: int = 0
    kinds: Counter[str] = field(default_factory=Counter)


def summarize(records: Iterable[dict]) -> dict[tuple[str, str], Direction]:
    """Per (sender, receiver): envelopes, bytes and payload kinds, counted once (each
    envelope is recorded by its sender and its receiver; the sender's record counts)."""
    out: dict[tuple[str, str], Direction] = defaultdict(Direction)
    for r in records:
        if r["direction"] != "sent":
            continue
        d = out[(r["sender"], r["receiver"])]
        d.envelopes += 1
        d.bytes += r["size"]
        d.kinds[r["kind"]] += 1
    return dict(sorted(out.items()))


def plaintext_patterns(
    features: np.ndarray, labels: np.ndarray | None = None
) -> dict[str, list[bytes]]:
    """The byte encodings of a table whose presence in a payload would be a leak:
    'feature': each value with |v| > MIN_FEATURE as float64, each pair of adjacent values
    of a row (not both that small) as float32; 'label': each run of eight labels (aligned
    at multiples of 8) as float32 and float64."""
    x = np.asarray(features, dtype=np.float64)
    values = x[np.abs(x) > MIN_FEATURE]
    feature = [v.tobytes() for v in values.astype("<f8")]
    pairs = np.stack([x[:, :-1], x[:, 1:]], axis=-1).reshape(-1, 2)
    pairs = pairs[(np.abs(pairs) > MIN_FEATURE).any(axis=1)].astype("<f4")
    feature += [p.tobytes() for p in pairs]
    label: list[bytes] = []
    if labels is not None:
        y = np.asarray(labels, dtype=np.float64)
        for start in range(0, len(y) - 8, 8):
            run = y[start : start + 8]
            label += [run.astype("<f4").tobytes(), run.astype("<f8").tobytes()]
    return {"feature": feature, "label": label}


def find_plaintext(blobs: Iterable[bytes], patterns: list[bytes]) -> set[bytes]:
    """The patterns (each at least 8 bytes long) found inside any of `blobs`."""
    heads: dict[bytes, list[bytes]] = defaultdict(list)
    for p in set(patterns):
        if len(p) < 8:
            raise ValueError(f"a pattern needs at least 8 bytes, got {len(p)}")
        heads[p[:8]].append(p)
    keys = np.array(sorted(int.from_bytes(h, "little") for h in heads), dtype=np.uint64)
    found: set[bytes] = set()
    if not heads:
        return found
    for blob in blobs:
        for offset in range(min(8, len(blob))):
            words = np.frombuffer(blob, dtype="<u8", count=(len(blob) - offset) // 8, offset=offset)
            at_key = np.minimum(np.searchsorted(keys, words), len(keys) - 1)
            for i in np.flatnonzero(keys[at_key] == words):
                at = offset + 8 * int(i)
                found.update(p for p in heads[blob[at : at + 8]] if blob[at : at + len(p)] == p)
    return found


def leaks(records: Iterable[dict], patterns: dict[str, list[bytes]]) -> dict[str, int]:
    """How many patterns of each group (`plaintext_patterns`) occur in the recorded
    payloads (each distinct payload scanned once)."""
    blobs = list({r["sha256"]: r["data"] for r in records}.values())
    return {what: len(find_plaintext(blobs, group)) for what, group in patterns.items()}


def tree_problems(records: Iterable[dict], active: str, protocol: str = "split") -> list[str]:
    """The envelopes of a tree job (or of its predictions and scoring sessions) that
    `TREE_MESSAGES` does not allow under `protocol`: an unknown tag, the wrong sender
    (`active` is the active party's id), or another payload kind; one line each."""
    secure = protocol == "secureboost"
    rules = tuple((p, s, sec if secure else split) for p, s, split, sec in TREE_MESSAGES)
    return message_problems(records, active, rules, "a tree message")


def message_problems(
    records: Iterable[dict],
    active: str,
    rules: tuple[tuple[re.Pattern[str], str, frozenset[str]], ...],
    what: str,
) -> list[str]:
    """The sent envelopes that `rules` (`TREE_MESSAGES` under one protocol,
    `WOE_MESSAGES`) do not allow, one line each (`what`: what a message of the rules is
    called)."""
    problems = []
    for r in records:
        if r["direction"] != "sent":
            continue
        tag, kind, by_active = r["tag"], r["kind"], r["sender"] == active
        rule = next((m for m in rules if m[0].fullmatch(tag)), None)
        if rule is None:
            problems.append(f"{r['sender']} -> {r['receiver']} {tag}: not {what}")
            continue
        _, sender, kinds = rule
        if sender != "any" and by_active != (sender == "active"):
            problems.append(f"{r['sender']} -> {r['receiver']} {tag}: sent by the wrong party")
        if kind not in kinds:
            problems.append(f"{r['sender']} -> {r['receiver']} {tag}: payload kind {kind}")
    return problems
