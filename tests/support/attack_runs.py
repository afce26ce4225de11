"""`vfl attack`'s protocol tier: jobs whose every party records its view, as threads over
the in-process channel with the wire audit; a small synthetic imbalanced table; and the
test-only build of blindfl that also sends G in the clear (the leak control)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vfl.attack import PartyView, load_view
from vfl.contract.spec import JobSpec, TableSource, parse_spec
from vfl.party.kinds import network
from vfl.party.state import StateDir
from vfl.party.training.blindfl import BlindActiveTrainer, BlindPassiveTrainer
from vfl.party.transport.audit import AuditLog
from vfl.secure.wire.payload import tensor_to_payload

from tests.support.harness import run_inprocess

TEST_KEYS = {"key_bits": 512, "allow_insecure_test_keys": True}  # test keys, never 2048
WORDS = 24  # more than preprocessing one-hot encodes (party.tables.preprocess.fit.ONE_HOT_MAX)


def synthetic_tables(
    folder: Path,
    rows: int,
    positives: float,
    seed: int = 0,
    informative: bool = True,
    words: bool = False,
) -> dict:
    """bank (id, y, a0..a3) and shop (id, b0..b5, and with `words` a column w of WORDS
    words by b0's quantile: embedded, so blindfl's Embed-MatMul layer) CSVs in `folder`; y
    depends on both parties' columns (with `informative`; else on neither), with about
    `positives` of the rows positive. Returns each party's datasets {"d": table} and the
    labels by row (id = row number)."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.normal(size=(rows, 4)), rng.normal(size=(rows, 6))
    logit = xa @ rng.normal(size=4) + xb @ rng.normal(size=6) + rng.normal(size=rows)
    if not informative:
        logit = rng.normal(size=rows)
    y = (logit > np.quantile(logit, 1 - positives)).astype(int)
    ids = np.arange(rows)
    bank, shop = folder / "bank.csv", folder / "shop.csv"
    header = ",".join(["id", "y", *(f"a{i}" for i in range(4))])
    np.savetxt(
        bank,
        np.column_stack([ids, y, xa]),
        delimiter=",",
        header=header,
        comments="",
        fmt=["%d", "%d"] + ["%.5f"] * 4,
    )
    header = ",".join(["id", *(f"b{i}" for i in range(6))])
    np.savetxt(
        shop,
        np.column_stack([ids, xb]),
        delimiter=",",
        header=header,
        comments="",
        fmt=["%d"] + ["%.5f"] * 6,
    )
    if words:
        cuts = np.quantile(xb[:, 0], np.arange(1, WORDS) / WORDS)
        lines = shop.read_text().splitlines()
        column = ["w", *(f"word{q}" for q in np.searchsorted(cuts, xb[:, 0]))]
        shop.write_text("".join(f"{line},{w}\n" for line, w in zip(lines, column, strict=True)))
    return {
        "bank": {"d": TableSource(path=str(bank), label="y")},
        "shop": {"d": TableSource(path=str(shop))},
        "labels": y,
    }


def attack_spec(protocol: str, epochs: int = 2, **extra) -> JobSpec:
    return parse_spec(
        {
            "job": "attacked",
            "protocol": protocol,
            "crypto": TEST_KEYS,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"source": {"out_dim": 4}, "top": {"hidden": [8]}},
            "train": {"epochs": epochs, "batch_size": 128, "lr": 0.05, "seed": 1},
            "validation": {"fraction": 0.1, "every": 1000},
            **extra,
        }
    )


def recorded_run(spec: JobSpec, datasets: dict, folder: Path) -> dict[str, PartyView]:
    """Run `spec` in process with every party recording its view and the wire audit on;
    each party's view as `vfl attack` loads it."""
    states = {p.id: StateDir.create(folder / f"{p.id}-state") for p in spec.parties}
    audit = folder / "audit"
    logs = {p.id: AuditLog(audit, p.id, "job") for p in spec.parties}

    def hook(direction: str, sender: str, receiver: str, tag: str, data: bytes) -> None:
        logs[sender if direction == "sent" else receiver](direction, sender, receiver, tag, data)

    tables = {p.id: datasets[p.id] for p in spec.parties}
    run_inprocess(spec, tables, hook, states, record_views=True)
    return {
        p.id: load_view(p.id, p.role, folder / f"{p.id}-state" / "views" / "job", audit)
        for p in spec.parties
    }


class LeakyBlindActiveTrainer(BlindActiveTrainer):
    """TEST ONLY: blindfl's active party that also sends dL/dZ in the clear each round."""

    def _top_step(self, z, rows, cached_g=None):
        loss, grad = super()._top_step(z, rows, cached_g)
        if cached_g is None:
            self.sent_g = grad
        return loss, grad

    def step(self, rnd: int, rows: np.ndarray) -> float:
        loss = super().step(rnd, rows)
        for p in self.ctx.spec.passives:
            self.ctx.channel.send(p.id, f"train/r{rnd}/g", tensor_to_payload(self.sent_g.numpy()))
        return loss


class LeakyBlindPassiveTrainer(BlindPassiveTrainer):
    """TEST ONLY: blindfl's passive party that takes the G sent in the clear."""

    def step(self, rnd: int, rows: np.ndarray) -> None:
        super().step(rnd, rows)
        self.ctx.channel.recv(self.ctx.spec.active.id, f"train/r{rnd}/g", self.ctx.timeout)


def leaky_blindfl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the in-process parties of this test run the leaky build of blindfl."""
    monkeypatch.setitem(
        network.ROLES, "blindfl", (LeakyBlindActiveTrainer, LeakyBlindPassiveTrainer)
    )
