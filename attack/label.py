"""Label inference by a passive party from what it receives during training (Li et al.,
"Label Leakage and Protection in Two-party Split Learning", ICLR 2022), reimplemented from
the paper's description.

A *signal* is a per-row vector the passive party can read in each training round: in
`split`, the derivative dL/d(act) it receives; in `blindfl`, the m3 ciphertexts it
receives (their lowest 64 bits) and the plaintexts it decrypts (its m1 shares S, and
with categorical columns the Embed-MatMul layer's c and dE - S); in any
build that sends something more in the clear, that too. For every signal, two scores per
row and round:

- norm score: ||g_i||. With imbalanced classes the minority's derivatives are larger
  (|p - y| is), so the norm ranks positives above negatives.
- direction score: cos(g_i, g_+), g_+ the vector of one row of the same batch whose label
  the attacker knows to be positive (the paper's setting: one known positive per batch).
  Same-class derivatives point the same way; the reference row itself is not scored.

Scores are pooled over every batch of epoch 1 and of the last epoch and returned with the
rows they score; the harness computes one AUC for each against the true labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from vfl.attack.views import PartyView

# what a blindfl passive party decrypts in a training round: record tail -> signal name
DECRYPTED_PER_ROUND = (
    ("m1", "decrypted m1 (S)"),  # MatMul layer, rows not precomputed at setup
    ("emb_c", "decrypted c (embedding forward)"),  # Embed-MatMul: E'_B W - M
    ("emb_de", "decrypted dE - S"),  # Embed-MatMul: its masked embedding step
)


@dataclass(frozen=True)
class Signal:
    """A per-row vector the passive party reads in each training round: round -> (row
    positions, values rows x k)."""

    name: str
    rounds: dict[int, tuple[np.ndarray, np.ndarray]]


def passive_signals(view: PartyView) -> list[Signal]:
    """Every per-row signal in the passive party's view, in a fixed order: what it
    received per round (tensors, ciphertexts), then what it decrypted."""
    found: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for rnd, received in sorted(view.received.items()):
        rows = _rows(view, rnd)
        if rows is None:
            continue
        for tail, values in received.items():
            per_row = _per_row(values, len(rows))
            if per_row is not None:
                found.setdefault(f"received {tail}", {})[rnd] = (rows, per_row)
    for rnd in view.rounds:
        batch = _rows(view, rnd)
        if batch is None:
            continue
        for tail, name in DECRYPTED_PER_ROUND:
            plain = view.decrypted.get(f"train_r{rnd}_{tail}")
            per_row = None if plain is None else _per_row(plain, len(batch))
            if per_row is not None:
                found.setdefault(name, {})[rnd] = (batch, per_row)
    shares = view.decrypted.get("src_rows_train")
    if shares is not None:  # S_i of every training row, decrypted once at setup
        train = np.asarray(view.own["train_rows"])
        found["decrypted m1 (S, per row at setup)"] = {
            rnd: (rows, shares[np.searchsorted(train, rows)])
            for rnd in view.rounds
            if (rows := _rows(view, rnd)) is not None
        }
    return [Signal(name, rounds) for name, rounds in found.items()]


def _rows(view: PartyView, rnd: int) -> np.ndarray | None:
    own = view.rounds.get(rnd)
    return None if own is None else np.asarray(own["rows"])


def _per_row(values: np.ndarray, n: int) -> np.ndarray | None:
    """`values` as one vector per row of a batch of `n`: a matrix of n rows as it is; a
    matrix of fewer rows (k rows packed per ciphertext) each row's group's; else None."""
    v = np.asarray(values, dtype=np.float64)
    v = v.reshape(len(v), -1) if v.ndim else v.reshape(1, 1)
    if len(v) == n:
        return v
    if 0 < len(v) < n:
        per = -(-n // len(v))
        return v[np.arange(n) // per]
    return None


@dataclass(frozen=True)
class Scores:
    """Scores of pooled rows: the row positions scored, the norm and direction scores."""

    rows: np.ndarray
    norm: np.ndarray
    direction: np.ndarray


def label_scores(signal: Signal, rounds: list[int], known_positive: dict[int, int]) -> Scores:
    """The norm and direction scores of every row of `rounds`; `known_positive[rnd]`: the
    index, within that round's batch, of the row the attacker knows to be positive (a
    round without one gives no direction score: NaN, and that row is left out)."""
    rows, norm, direction = [], [], []
    for rnd in rounds:
        if rnd not in signal.rounds:
            continue
        batch, g = signal.rounds[rnd]
        norms = np.linalg.norm(g, axis=1)
        ref = known_positive.get(rnd)
        keep = np.ones(len(batch), dtype=bool)
        if ref is None:
            cos = np.full(len(batch), np.nan)
        else:
            keep[ref] = False
            denom = norms * norms[ref]
            with np.errstate(divide="ignore", invalid="ignore"):
                cos = np.where(denom > 0, g @ g[ref] / denom, 0.0)
        rows.append(batch[keep])
        norm.append(norms[keep])
        direction.append(cos[keep])
    if not rows:
        empty = np.zeros(0)
        return Scores(empty.astype(np.int64), empty, empty)
    return Scores(np.concatenate(rows), np.concatenate(norm), np.concatenate(direction))
