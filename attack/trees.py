"""The attacks on a tree job's recorded views (`protocol: split` or `secureboost`).

A passive party's view (`party.training.trees.passive`): per round the instance space,
the deepest node of each tree it knows each row is in (`groups`), from the row
partitions the active party sends it (`grow`) and its own splits'; under `split` also
the (g, h) of every row (the `gh` envelope), under `secureboost` their ciphertexts.
The active party's view (`party.training.trees.active`): per passive party, the row
partition of every split of its it picked (`cut_*`) and those splits' decisions on the
validation rows (`val_*`, from the party's `eval`, as scoring sends them).

    gradient_sign   label inference from the sign of g (split: g = p - y, so g < 0 is
                    y = 1 for the logistic loss); on secureboost's ciphertexts, the same
                    read of their lowest 64 bits
    instance_space  label inference from the instance space with KNOWN_LABELS known
                    labels (half of each class): ID2Graph's graph (Takahashi, Liu and
                    Liu, "Eliminating Label Leakage in Tree-based Vertical Federated
                    Learning", 2023, arXiv 2307.10318) joins rows that share a node, one
                    edge weight a tree; the known labels are propagated one step along
                    it (a row's score: its edge weights to known positives minus those
                    to known negatives), scored against chance. A second row adds the
                    party's own columns (the ranks of both scores averaged) and is
                    scored against its baseline, the same known labels through a
                    logistic regression on those columns alone: what the federation
                    added to what the party could infer anyway.
    first_tree      the same on the first tree the party saw: the leaves of a tree on
                    the labels' first gradients (SecureBoost's own warning, Cheng et
                    al. 2021, which its reduced-leakage mode answers: the first tree on
                    the active party's columns alone)
    feature_order   the active party orders the rows by a passive party's columns
                    (`attack.order`)
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata
from vfl.attack.harness import AT_CHANCE, LEAKS, AttackRow, auc_row, job_parties
from vfl.attack.order import order_rows
from vfl.attack.stats import auc, chance_band, logistic_scores
from vfl.attack.views import PartyView

KNOWN_LABELS = 40  # training rows whose label the passive party knows
DRAWS = 10  # draws of them; their AUCs are averaged


def attacks(
    views: dict[str, PartyView],
    protocol: str,
    permuted: dict[str, PartyView] | None = None,
    seed: int = 0,
) -> list[AttackRow]:
    """Every attack on the views of one tree job (`permuted` is not used: no attack here
    compares two runs)."""
    active, y, passives = job_parties(views)
    rows: list[AttackRow] = []
    for passive in passives:
        rows += gradient_rows(passive, y, protocol)
        rows += instance_rows(passive, y, seed)
        rows += order_rows(active, passive)
    return rows


def gradient_rows(passive: PartyView, y: np.ndarray, protocol: str) -> list[AttackRow]:
    """The sign of g in the first round it received (g, h): -g scored against the labels
    (under secureboost: minus the lowest 64 bits of each ciphertext)."""
    for rnd in sorted(passive.rounds):
        gh = passive.received.get(rnd, {}).get("gh")
        rows = np.asarray(passive.rounds[rnd]["rows"])
        if gh is None or len(gh) != len(rows):
            continue
        what = "(g, h)" if protocol == "split" else "(g, h) ciphertexts, lowest 64 bits"
        scores = -np.asarray(gh, dtype=np.float64).reshape(len(rows), -1)[:, 0]
        who = f"{passive.party} (passive)"
        return [auc_row("gradient_sign", who, f"received {what}, round {rnd}", scores, y[rows])]
    return []


def instance_groups(passive: PartyView, first_only: bool = False) -> np.ndarray:
    """Aligned rows x trees: the node of each tree the party knows each row is in (ids
    unique across trees; -1: not known, a row outside the round's subsample)."""
    n = len(passive.own["ids"])
    columns, offset = [], 0
    for rnd in sorted(passive.rounds):
        record = passive.rounds[rnd]
        if "groups" not in record:
            continue
        groups = np.asarray(record["groups"], dtype=np.int64)
        placed = np.full((n, groups.shape[1]), -1, dtype=np.int64)
        placed[np.asarray(record["rows"])] = np.where(groups >= 0, groups + offset, -1)
        offset += int(groups.max(initial=-1)) + 1
        columns.append(placed)
        if first_only:
            break
    return np.hstack(columns) if columns else np.zeros((n, 0), dtype=np.int64)


def propagate(groups: np.ndarray, known: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Every row's score: over the trees, +1 for each known positive and -1 for each known
    negative it shares a node with (one step of propagation on ID2Graph's graph), divided
    by the known rows it shares nodes with; a known row's without its own label."""
    sign = np.where(labels == 1, 1.0, -1.0)
    votes, shared = np.zeros(len(groups)), np.zeros(len(groups))
    for t in range(groups.shape[1]):
        same = (groups[:, t, None] == groups[known, t][None, :]) & (groups[:, t, None] >= 0)
        votes += same @ sign
        shared += same.sum(axis=1)
    seen = (groups[known] >= 0).sum(axis=1)
    votes[known] -= sign * seen
    shared[known] -= seen
    return votes / np.maximum(shared, 1)


def instance_rows(passive: PartyView, y: np.ndarray, seed: int) -> list[AttackRow]:
    """Instance-space label inference, on every tree the party saw and on the first: its
    score alone (against chance), and beside its own columns (against them alone: the
    mean of the two scores' ranks, the propagation's and a logistic regression's on its
    columns fitted to the known labels)."""
    train = np.asarray(passive.own["train_rows"])
    x = passive.inputs()
    who = f"{passive.party} (passive)"
    out = []
    for first, name in ((False, "instance_space"), (True, "first_tree")):
        groups = instance_groups(passive, first)
        if not groups.shape[1]:
            continue
        rng = np.random.default_rng([seed, 11])
        alone, both, raw, n1, n0 = [], [], [], 0, 0
        for _ in range(DRAWS):
            pos = rng.choice(train[y[train] == 1], KNOWN_LABELS // 2, replace=False)
            neg = rng.choice(train[y[train] == 0], KNOWN_LABELS - len(pos), replace=False)
            known = np.concatenate([pos, neg])
            scored = np.setdiff1d(train, known)
            votes = propagate(groups, known, y[known])[scored]
            own = logistic_scores(x[known], y[known], x[scored])
            alone.append(auc(votes, y[scored]))
            both.append(auc(rankdata(votes) + rankdata(own), y[scored]))
            raw.append(auc(own, y[scored]))
            n1, n0 = int(y[scored].sum()), int(len(scored) - y[scored].sum())
        base = float(np.mean(raw))
        trees = "the first tree it saw" if first else f"{groups.shape[1]} trees"
        known_s = f"{KNOWN_LABELS} known labels ({DRAWS} draws)"
        for score, centre, used in (
            (float(np.mean(alone)), 0.5, f"instance space of {trees} + {known_s}"),
            (float(np.mean(both)), base, f"... with its own columns, vs them alone: {known_s}"),
        ):
            low, high = chance_band(n1, n0, centre=centre)
            verdict = LEAKS if score > high else AT_CHANCE
            out.append(AttackRow(name, who, used, score, base, low, high, verdict, n1 + n0))
    return out
