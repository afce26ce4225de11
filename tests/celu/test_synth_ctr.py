"""Tests of the synthetic Criteo-like CTR generator."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from vfl.celu.errors import SyntheticDataError
from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, NUMERIC_FIELDS, generate, write_csv


def test_columns_and_ranges() -> None:
    active, passive = generate(5000, seed=1, vocab=50)
    assert list(active) == ["id", "y", *NUMERIC_FIELDS]
    assert list(passive) == ["id", *CATEGORICAL_FIELDS]
    assert len(NUMERIC_FIELDS) == 13 and len(CATEGORICAL_FIELDS) == 26
    assert np.array_equal(active["id"], passive["id"])
    assert all(len(col) == 5000 for col in [*active.values(), *passive.values()])
    assert set(np.unique(active["y"])) == {0, 1}
    numeric = np.column_stack([active[f] for f in NUMERIC_FIELDS])
    assert np.isfinite(numeric).all() and (numeric >= 0).all()
    categorical = np.column_stack([passive[f] for f in CATEGORICAL_FIELDS])
    assert categorical.dtype == np.int64
    assert categorical.min() >= 0 and categorical.max() < 50


def test_deterministic_by_seed() -> None:
    first, second, other = generate(800, 7), generate(800, 7), generate(800, 8)
    for a, b in zip(first, second, strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(first[1]["C1"], other[1]["C1"])
    # Pinned output: a change to the generator (or its RNG streams) must be deliberate.
    assert int(first[0]["y"].sum()) == 195
    assert first[1]["C1"][:6].tolist() == [807, 962, 262, 870, 937, 767]
    assert float(first[0]["I1"][:50].sum()) == pytest.approx(61.487, abs=1e-3)


@pytest.mark.parametrize("rate", [0.2, 0.3])
def test_positive_rate(rate: float) -> None:
    active, _ = generate(20_000, seed=2, positive_rate=rate)
    assert abs(active["y"].mean() - rate) < 0.015


def test_per_field_vocab() -> None:
    sizes = [2 + i for i in range(26)]
    _, passive = generate(3000, seed=0, vocab=sizes)
    assert all(passive[f].max() < v for f, v in zip(CATEGORICAL_FIELDS, sizes, strict=True))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rows": 0, "seed": 1},
        {"rows": 10, "seed": -1},
        {"rows": 10, "seed": 1, "vocab": 1},
        {"rows": 10, "seed": 1, "vocab": [10] * 25},
        {"rows": 10, "seed": 1, "positive_rate": 1.0},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(SyntheticDataError):
        generate(**kwargs)  # type: ignore[arg-type]


def test_write_csv(tmp_path: Path) -> None:
    meta = write_csv(tmp_path / "out", rows=300, seed=4, vocab=20)
    with open(tmp_path / "out" / "active.csv", newline="") as fh:
        active_rows = list(csv.reader(fh))
    with open(tmp_path / "out" / "passive.csv", newline="") as fh:
        passive_rows = list(csv.reader(fh))
    assert active_rows[0] == ["id", "y", *NUMERIC_FIELDS]
    assert passive_rows[0] == ["id", *CATEGORICAL_FIELDS]
    assert len(active_rows) == len(passive_rows) == 301
    assert [r[0] for r in active_rows[1:]] == [r[0] for r in passive_rows[1:]]
    assert {r[1] for r in active_rows[1:]} <= {"0", "1"}
    on_disk = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert on_disk == meta
    assert (on_disk["rows"], on_disk["seed"]) == (300, 4)
    assert on_disk["fields"]["passive"] == ["id", *CATEGORICAL_FIELDS]
    expected_rate = sum(int(r[1]) for r in active_rows[1:]) / 300
    assert on_disk["positive_rate"] == pytest.approx(expected_rate, abs=1e-6)


# --- the data rewards a deep model and both parties ------------------------------------------


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum formula."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="mergesort")] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class CtrModel(torch.nn.Module):
    """Embeddings of C1..C26 and/or the numeric fields into a linear layer or a small MLP."""

    def __init__(self, vocab: int, dim: int, hidden: int, use_num: bool, use_cat: bool) -> None:
        super().__init__()
        self.use_num, self.use_cat = use_num, use_cat
        self.offsets = torch.arange(26) * vocab
        self.emb = torch.nn.Embedding(26 * vocab, dim)
        torch.nn.init.normal_(self.emb.weight, std=0.05)
        width = 26 * dim * use_cat + 13 * use_num
        self.net: torch.nn.Module = torch.nn.Linear(width, 1)
        if hidden:
            self.net = torch.nn.Sequential(
                torch.nn.Linear(width, hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, 1),
            )

    def forward(self, num: torch.Tensor, cat: torch.Tensor) -> torch.Tensor:
        parts = [self.emb(cat + self.offsets).flatten(1)] if self.use_cat else []
        parts += [num] if self.use_num else []
        return self.net(torch.cat(parts, dim=1)).squeeze(1)


def fit_auc(data: tuple, vocab: int, dim: int, hidden: int, use_num=True, use_cat=True) -> float:  # type: ignore[no-untyped-def]
    num, cat, y, n_train = data
    torch.manual_seed(0)
    model = CtrModel(vocab, dim, hidden, use_num, use_cat)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    gen = torch.Generator().manual_seed(0)
    for _ in range(400):
        idx = torch.randint(n_train, (512,), generator=gen)
        loss = F.binary_cross_entropy_with_logits(model(num[idx], cat[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        scores = model(num[n_train:], cat[n_train:]).numpy()
    return auc(y[n_train:].numpy(), scores)


@pytest.mark.usefixtures("one_torch_thread")
def test_deep_beats_linear_and_both_parties_matter() -> None:
    # Prepare: 16k training rows, 4k held out, small vocabularies so 400 steps suffice.
    vocab = 10
    active, passive = generate(20_000, seed=3, vocab=vocab)
    num = torch.tensor(np.column_stack([active[f] for f in NUMERIC_FIELDS]), dtype=torch.float32)
    num = (num - num.mean(0)) / num.std(0)
    cat = torch.tensor(np.column_stack([passive[f] for f in CATEGORICAL_FIELDS]))
    data = (num, cat, torch.tensor(active["y"], dtype=torch.float32), 16_000)
    # Execute
    linear = fit_auc(data, vocab, dim=1, hidden=0)
    deep = fit_auc(data, vocab, dim=8, hidden=64)
    active_only = fit_auc(data, vocab, dim=8, hidden=64, use_cat=False)
    passive_only = fit_auc(data, vocab, dim=8, hidden=64, use_num=False)
    # Assert
    assert deep > linear + 0.015, (deep, linear)
    assert deep > active_only + 0.03, (deep, active_only)
    assert deep > passive_only + 0.03, (deep, passive_only)
    assert min(active_only, passive_only) > 0.55
