"""Tests of the local-update loop, its config, and a toy split-learning run through it."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from vfl.celu.config import LocalUpdateConfig
from vfl.celu.errors import CeluError, LocalUpdateConfigError, LocalUpdateWorkerError
from vfl.celu.local_loop import LocalUpdater, UpdateClock
from vfl.celu.synth_ctr import CATEGORICAL_FIELDS, NUMERIC_FIELDS, generate
from vfl.celu.weighting import active_local_loss, passive_local_derivative
from vfl.celu.workset import CachedBatch

Log = list[tuple[int, int, int, int]]


def recorder(log: Log) -> Callable[[int, CachedBatch, int], None]:
    """An update_fn that records (batch_id, num_used, cached_at, t)."""

    def update(batch_id: int, entry: CachedBatch, t: int) -> None:
        log.append((batch_id, entry.num_used, entry.cached_at, t))

    return update


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


# --- config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "celuu"}, "mode"),
        ({"steps": 0}, "steps"),
        ({"workset": 0}, "workset"),
        ({"workset": 2.0}, "workset"),
        ({"reuse": -1}, "reuse"),
        ({"reuse": True}, "reuse"),
        ({"xi": float("nan")}, "xi"),
        ({"xi": "half"}, "xi"),
        ({"xi": True}, "xi"),
        ({"schedule": "later"}, "schedule"),
        ({"mode": "fedbcd", "schedule": "async"}, "schedule"),
    ],
)
def test_config_errors_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(LocalUpdateConfigError, match=f"local_updates.{field}") as info:
        LocalUpdateConfig.from_mapping(kwargs)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    with pytest.raises(ValidationError) as direct:  # built directly: pydantic's error
        LocalUpdateConfig(**kwargs)  # type: ignore[arg-type]
    assert direct.value.errors()[0]["loc"] == (field,)


def test_config_defaults_and_properties() -> None:
    cfg = LocalUpdateConfig(mode="celu")
    assert (cfg.workset, cfg.reuse, cfg.xi, cfg.max_staleness) == (5, 5, 0.5, 25)
    assert cfg.has_local_updates and cfg.weighting and cfg.effective_xi == 0.5
    assert not LocalUpdateConfig(mode="celu", reuse=1).has_local_updates
    assert not LocalUpdateConfig(mode="celu", xi=None).weighting
    assert LocalUpdateConfig(mode="fedbcd").effective_xi is None
    assert not LocalUpdateConfig().has_local_updates


def test_config_reads_numeric_strings_as_numbers() -> None:
    # YAML 1.1 reads `xi: 5e-1` (an exponent, no dot) as the string "5e-1"
    assert LocalUpdateConfig.from_mapping({"mode": "celu", "xi": "5e-1"}).xi == 0.5


def test_config_from_mapping() -> None:
    cfg = LocalUpdateConfig.from_mapping({"mode": "celu", "workset": 3, "xi": None})
    assert cfg == LocalUpdateConfig(mode="celu", workset=3, xi=None)
    with pytest.raises(LocalUpdateConfigError, match="local_updates.window: unknown"):
        LocalUpdateConfig.from_mapping({"window": 3})


# --- synchronous schedule --------------------------------------------------------------------


def run_sync(cfg: LocalUpdateConfig, seed: int, rounds: int = 30) -> tuple[Log, LocalUpdater]:
    log: Log = []
    updater = LocalUpdater(cfg, recorder(log), seed=seed)
    for batch_id in range(rounds):
        updater.record_round(batch_id % 7, f"act{batch_id}", f"dev{batch_id}")
    return log, updater


def test_sync_schedule_is_deterministic() -> None:
    cfg = LocalUpdateConfig(mode="celu", workset=4, reuse=4, steps=3, schedule="sync")
    assert run_sync(cfg, seed=3)[0] == run_sync(cfg, seed=3)[0]
    assert run_sync(cfg, seed=3)[0] != run_sync(cfg, seed=4)[0]


def test_sync_schedule_bounds() -> None:
    cfg = LocalUpdateConfig(mode="celu", workset=4, reuse=3, steps=5, schedule="sync")
    log, updater = run_sync(cfg, seed=0)
    assert updater.num_rounds == 30
    assert updater.num_local_updates == len(log) > 0
    assert updater.clock.now() == 30 + len(log)
    assert len(log) <= 30 * (cfg.reuse - 1)
    assert all(t - cached_at < cfg.max_staleness for _, _, cached_at, t in log)
    assert all(2 <= used <= cfg.reuse for _, used, _, _ in log)


def test_sync_cap_per_round() -> None:
    log: Log = []
    updater = LocalUpdater(
        LocalUpdateConfig(mode="celu", steps=2, schedule="sync"), recorder(log), seed=0
    )
    done = [updater.record_round(b, None, None) for b in range(10)]
    assert max(done) <= 2 and sum(done) == len(log)


@pytest.mark.parametrize(
    "cfg", [LocalUpdateConfig(), LocalUpdateConfig(mode="celu", reuse=1, schedule="sync")]
)
def test_vanilla_runs_no_local_updates(cfg: LocalUpdateConfig) -> None:
    log, updater = run_sync(cfg, seed=0)
    assert log == [] and updater.num_local_updates == 0 and updater.clock.now() == 30
    assert len(updater.table) == 0


def test_fedbcd_takes_q_steps_on_the_current_batch_only() -> None:
    log, updater = run_sync(LocalUpdateConfig(mode="fedbcd", steps=3), seed=0, rounds=4)
    assert [(b, used) for b, used, _, _ in log] == [(b, u) for b in range(4) for u in (2, 3, 4)]
    assert [t for *_, t in log] == [t for r in range(4) for t in range(4 * r + 1, 4 * r + 4)]
    assert updater.num_local_updates == 12 and len(updater.table) == 0


def test_sync_update_errors_propagate_directly() -> None:
    def boom(batch_id: int, entry: CachedBatch, t: int) -> None:
        raise ValueError("bad update")

    updater = LocalUpdater(LocalUpdateConfig(mode="celu", schedule="sync"), boom, seed=0)
    with pytest.raises(ValueError, match="bad update"):
        updater.record_round(0, None, None)


def test_clock_resume() -> None:
    clock = UpdateClock(100)
    updater = LocalUpdater(
        LocalUpdateConfig(mode="celu", schedule="sync"), recorder([]), seed=0, clock=clock
    )
    updater.record_round(0, None, None)
    entry = updater.table.get(0)
    assert entry is not None and entry.cached_at == 100
    assert clock.now() == 102  # the round, then one local update


# --- background worker -----------------------------------------------------------------------

ASYNC = LocalUpdateConfig(mode="celu", workset=3, reuse=3, schedule="async")


def test_async_worker_runs_under_the_lock_and_stops() -> None:
    lock = threading.Lock()
    held: list[bool] = []

    def update(batch_id: int, entry: CachedBatch, t: int) -> None:
        held.append(lock.locked())

    with LocalUpdater(ASYNC, update, seed=0, lock=lock) as updater:
        assert updater.is_running
        for batch_id in range(4):
            with lock:  # the main loop's own model update
                pass
            assert updater.record_round(batch_id, None, None) == 0
        wait_until(lambda: updater.num_local_updates >= 1)
    assert not updater.is_running
    assert held and all(held)
    assert len(held) == updater.num_local_updates <= 4 * (ASYNC.reuse - 1)
    assert updater.clock.now() == 4 + len(held)


def test_async_requires_start() -> None:
    updater = LocalUpdater(ASYNC, recorder([]), seed=0)
    with pytest.raises(LocalUpdateWorkerError, match="start"):
        updater.record_round(0, None, None)


def test_worker_exception_reaches_main_thread_once_reported() -> None:
    def boom(batch_id: int, entry: CachedBatch, t: int) -> None:
        raise RuntimeError("kaput")

    updater = LocalUpdater(ASYNC, boom, seed=0)
    updater.start()
    updater.record_round(0, None, None)
    wait_until(lambda: not updater.is_running)
    with pytest.raises(LocalUpdateWorkerError, match="kaput") as info:
        updater.record_round(1, None, None)
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(LocalUpdateWorkerError):
        updater.check()  # still failed
    updater.stop()  # already reported: stop() does not raise it again


def test_worker_exception_is_raised_by_stop_if_unreported() -> None:
    def boom(batch_id: int, entry: CachedBatch, t: int) -> None:
        raise KeyError("lost")

    updater = LocalUpdater(ASYNC, boom, seed=0)
    updater.start()
    updater.record_round(0, None, None)
    wait_until(lambda: not updater.is_running)
    with pytest.raises(CeluError, match="lost"):
        updater.stop()


def test_stop_times_out_on_a_blocked_update() -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocked(batch_id: int, entry: CachedBatch, t: int) -> None:
        entered.set()
        release.wait(10)

    updater = LocalUpdater(ASYNC, blocked, seed=0)
    updater.start()
    updater.record_round(0, None, None)
    assert entered.wait(10)
    with pytest.raises(LocalUpdateWorkerError, match="did not stop"):
        updater.stop(timeout=0.05)
    release.set()
    updater.stop()
    assert not updater.is_running


def test_worker_restarts_after_stop() -> None:
    log: Log = []
    updater = LocalUpdater(ASYNC, recorder(log), seed=0)
    updater.start()
    updater.stop()
    updater.start()
    updater.record_round(0, None, None)
    wait_until(lambda: len(log) >= 1)
    updater.stop()
    assert not updater.is_running


def test_async_worker_spends_at_most_steps_per_round() -> None:
    # W=5, R=8: once the table is full, 5 entries hold up to 35 uses; a worker without a
    # per-round budget would burn them all at once instead of 3 per round.
    cfg = LocalUpdateConfig(mode="celu", workset=5, reuse=8, steps=3, schedule="async")
    per_round = []
    with LocalUpdater(cfg, recorder([]), seed=0, idle_wait=0.01) as updater:
        for batch_id in range(12):
            before = updater.num_local_updates
            updater.record_round(batch_id, None, None)
            if batch_id >= 5:  # enough eligible entries: the budget is what stops it
                wait_until(lambda b=before: updater.num_local_updates >= b + cfg.steps)
            time.sleep(0.05)  # room for any update beyond the budget
            per_round.append(updater.num_local_updates - before)
    assert max(per_round) <= cfg.steps
    assert per_round[5:] == [cfg.steps] * 7


# --- toy split learning through the updater, both parties in one thread -----------------------
# The parties follow the lock protocol of celu.local_loop, so the same code runs with the
# sync schedule and with a background worker per party.


class ToyPassive:
    """Passive party: an embedding bottom model over categorical fields."""

    def __init__(self, cat: torch.Tensor, vocab: int, cfg: LocalUpdateConfig) -> None:
        torch.manual_seed(1)
        self.cat, self.offsets, self.cfg = cat, torch.arange(cat.shape[1]) * vocab, cfg
        self.emb = torch.nn.Embedding(cat.shape[1] * vocab, 4)
        self.net = torch.nn.Sequential(torch.nn.Linear(cat.shape[1] * 4, 8))
        params = [*self.emb.parameters(), *self.net.parameters()]
        self.opt = torch.optim.Adagrad(params, lr=0.05)
        self.lock = threading.Lock()
        self.updater = LocalUpdater(cfg, self.local_update, seed=11, lock=self.lock)

    def bottom(self, rows: slice) -> torch.Tensor:
        return self.net(self.emb(self.cat[rows] + self.offsets).flatten(1))

    def forward(self, batch_id: int) -> torch.Tensor:
        with self.lock, torch.no_grad():
            return self.bottom(batch_rows(batch_id))

    def backward(self, batch_id: int, sent: torch.Tensor, dev: torch.Tensor) -> None:
        with self.lock:  # recompute: local updates may have run while waiting for dev
            fresh = self.bottom(batch_rows(batch_id))
            self.opt.zero_grad()
            fresh.backward(dev)
            self.opt.step()
        self.updater.record_round(batch_id, sent, dev)

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        fresh = self.bottom(batch_rows(batch_id))
        grad, _ = passive_local_derivative(
            fresh, entry.activation, entry.derivative, self.cfg.effective_xi
        )
        self.opt.zero_grad()
        fresh.backward(grad)
        self.opt.step()


class ToyActive:
    """Active party: a numeric bottom model, the top model and the labels."""

    def __init__(self, num: torch.Tensor, y: torch.Tensor, cfg: LocalUpdateConfig) -> None:
        torch.manual_seed(2)
        self.num, self.y, self.cfg = num, y, cfg
        self.bottom = torch.nn.Sequential(torch.nn.Linear(num.shape[1], 8), torch.nn.ReLU())
        self.top = torch.nn.Sequential(
            torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
        )
        params = [*self.bottom.parameters(), *self.top.parameters()]
        self.opt = torch.optim.Adagrad(params, lr=0.05)
        self.lock = threading.Lock()
        self.updater = LocalUpdater(cfg, self.local_update, seed=12, lock=self.lock)

    def losses(self, rows: slice, act: torch.Tensor) -> torch.Tensor:
        logits = self.top(torch.cat([self.bottom(self.num[rows]), act], dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logits, self.y[rows], reduction="none")

    def round(self, batch_id: int, passive_act: torch.Tensor) -> torch.Tensor:
        act = passive_act.clone().requires_grad_(True)
        with self.lock:
            self.opt.zero_grad()
            self.losses(batch_rows(batch_id), act).mean().backward()
            self.opt.step()
        dev = act.grad.detach()  # type: ignore[union-attr]  # includes the 1/N of the mean
        self.updater.record_round(batch_id, passive_act, dev)
        return dev

    def local_update(self, batch_id: int, entry: CachedBatch, t: int) -> None:
        act = entry.activation.clone().requires_grad_(True)
        losses = self.losses(batch_rows(batch_id), act)
        loss, _ = active_local_loss(losses, act, entry.derivative, self.cfg.effective_xi)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


BATCH = 128


def batch_rows(batch_id: int) -> slice:
    return slice(batch_id * BATCH, (batch_id + 1) * BATCH)


def train_toy(cfg: LocalUpdateConfig, rounds: int = 120) -> tuple[float, int]:
    """Train `rounds` communication rounds; return the final train loss and local updates."""
    active_cols, passive_cols = generate(4096, seed=5, vocab=10)
    columns = np.column_stack([active_cols[f] for f in NUMERIC_FIELDS])
    num = torch.tensor(columns, dtype=torch.float32)
    num = (num - num.mean(0)) / num.std(0)
    cat = torch.tensor(np.column_stack([passive_cols[f] for f in CATEGORICAL_FIELDS]))
    y = torch.tensor(active_cols["y"], dtype=torch.float32)
    passive, active = ToyPassive(cat, 10, cfg), ToyActive(num, y, cfg)
    with passive.updater, active.updater:  # starts/stops the workers of the async schedule
        for r in range(rounds):
            batch_id = r % (len(y) // BATCH)
            sent = passive.forward(batch_id)  # passive -> active
            dev = active.round(batch_id, sent)  # active -> passive
            passive.backward(batch_id, sent, dev)
        if active.updater.uses_worker:
            wait_until(lambda: active.updater.num_local_updates > 0)
    with torch.no_grad():
        loss = float(active.losses(slice(None), passive.bottom(slice(None))).mean())
    return loss, active.updater.num_local_updates + passive.updater.num_local_updates


@pytest.mark.usefixtures("one_torch_thread")
def test_celu_beats_vanilla_at_equal_rounds() -> None:
    vanilla, vanilla_local = train_toy(LocalUpdateConfig(mode="none"))
    celu, celu_local = train_toy(
        LocalUpdateConfig(mode="celu", workset=5, reuse=5, xi=0.5, schedule="sync")
    )
    fedbcd, _ = train_toy(LocalUpdateConfig(mode="fedbcd", steps=4))
    assert vanilla_local == 0 and celu_local > 120
    assert celu < vanilla - 0.01, (celu, vanilla)
    assert fedbcd < vanilla, (fedbcd, vanilla)


@pytest.mark.usefixtures("one_torch_thread")
def test_async_schedule_trains_under_the_lock_protocol() -> None:
    loss, local = train_toy(LocalUpdateConfig(mode="celu", schedule="async"), rounds=60)
    assert local > 0
    assert math.isfinite(loss) and loss < 0.56
