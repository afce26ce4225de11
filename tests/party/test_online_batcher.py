"""The micro-batcher of online scoring: concurrent requests share batches, each gets its
own results, a failed batch fails only its own requests; requests are admitted as far as
the measured cost of the batches says they can be scored in their time, the rest refused
at once with a hint; and the cost model (`BatchCost`) itself."""

from __future__ import annotations

import threading
import time

import pytest
from vfl.party.errors import Overloaded
from vfl.party.inference.batcher import NO_CAPACITY, QUEUE_FULL, MicroBatcher
from vfl.party.inference.capacity import PRIOR_S, BatchCost


class Scorer:
    """Scores ids as their length; `gate` holds the first batch until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.fail = False

    def __call__(self, ids: list[str]) -> dict[str, int]:
        self.gate.wait(10)
        self.batches.append(ids)
        if self.fail:
            raise ValueError("peer gone")
        return {i: len(i) for i in ids}


def run_all(batcher: MicroBatcher, requests: list[list[str]]) -> list[object]:
    out: list[object] = [None] * len(requests)

    def one(k: int) -> None:
        try:
            out[k] = batcher.submit(requests[k], timeout=10)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[k] = exc

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(requests))]
    for t in threads:
        t.start()
    return [threads, out]


def test_a_lone_request_waits_at_most_the_delay() -> None:
    scorer = Scorer()
    scorer.gate.set()
    batcher = MicroBatcher(scorer, "t", delay_s=0.002)
    begun = time.monotonic()
    assert batcher.submit(["ab", "c"], timeout=5) == {"ab": 2, "c": 1}
    assert time.monotonic() - begun < 0.5 and batcher.batches == 1


def test_requests_queued_behind_a_batch_share_the_next_one() -> None:
    # Prepare: the first batch holds the worker while eight more requests queue
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", max_ids=64, delay_s=0.002)
    threads, out = run_all(batcher, [["first"]])
    time.sleep(0.05)
    more, results = run_all(batcher, [[f"id{k}", "dup"] for k in range(8)])
    time.sleep(0.05)
    # Execute
    scorer.gate.set()
    for t in threads + more:
        t.join(10)
    # Assert
    assert out == [{"first": 5}]
    assert results == [{f"id{k}": len(f"id{k}"), "dup": 3} for k in range(8)]
    assert len(scorer.batches) == 2 and batcher.batches == 2 and batcher.requests == 9
    assert sorted(scorer.batches[1]) == sorted(["dup", *(f"id{k}" for k in range(8))])


def test_a_batch_holds_at_most_max_ids_unless_one_request_is_larger() -> None:
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", max_ids=4, delay_s=0.002)
    threads, _ = run_all(batcher, [["a"]])
    time.sleep(0.05)
    more, results = run_all(batcher, [["b", "c", "d"], ["e", "f"], list("ghijklm")])
    time.sleep(0.05)
    scorer.gate.set()
    for t in threads + more:
        t.join(10)
    assert all(isinstance(r, dict) for r in results)
    assert sorted(len(b) for b in scorer.batches[1:]) == [2, 3, 7]


def test_a_failed_batch_fails_its_requests_and_the_next_one_runs() -> None:
    scorer = Scorer()
    scorer.gate.set()
    scorer.fail = True
    batcher = MicroBatcher(scorer, "t")
    with pytest.raises(ValueError, match="peer gone"):
        batcher.submit(["a"], timeout=5)
    scorer.fail = False
    assert batcher.submit(["a"], timeout=5) == {"a": 1}


def test_closing_fails_queued_and_later_requests() -> None:
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t")
    threads, out = run_all(batcher, [["a"]])
    time.sleep(0.05)
    more, queued = run_all(batcher, [["b"]])
    time.sleep(0.05)
    batcher.close(LookupError("model unloaded"))
    scorer.gate.set()
    for t in threads + more:
        t.join(10)
    assert out == [{"a": 1}]  # the running batch finishes
    assert isinstance(queued[0], LookupError)
    with pytest.raises(LookupError, match="model unloaded"):
        batcher.submit(["c"], timeout=5)


def test_a_request_beyond_the_queue_is_refused_at_once_with_a_retry_hint() -> None:
    # Prepare: the first batch holds the worker while two requests fill the queue
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", delay_s=0.002, max_queued=2, busy="model m is busy")
    threads, out = run_all(batcher, [["first"]])
    time.sleep(0.05)
    more, queued = run_all(batcher, [["b"], ["c"]])
    time.sleep(0.05)
    # Execute
    begun = time.monotonic()
    with pytest.raises(Overloaded) as refused:
        batcher.submit(["d"], timeout=10)
    waited = time.monotonic() - begun
    scorer.gate.set()
    for t in threads + more:
        t.join(10)
    # Assert: refused without waiting; the queued ones and the next request are served
    assert waited < 0.5 and batcher.refused == 1
    assert refused.value.retry_after_s > 0 and refused.value.at == QUEUE_FULL
    assert str(refused.value).startswith("model m is busy; retry in ")
    assert out == [{"first": 5}] and queued == [{"b": 1}, {"c": 1}]
    assert batcher.submit(["d"], timeout=5) == {"d": 1}


def settled(batcher: MicroBatcher, requests: int, timeout: float = 10.0) -> None:
    """Wait until each of `requests` submitted requests is queued or refused."""
    deadline = time.monotonic() + timeout
    while batcher.queued + batcher.refused < requests and time.monotonic() < deadline:
        time.sleep(0.01)


def submit_each(
    batcher: MicroBatcher, ids: list[str], within: float, deadline: float | None = None
) -> list[object]:
    """Submit each id as a request of its own, in threads: each one's results or error
    (filled in as they come)."""
    out: list[object] = [None] * len(ids)

    def one(k: int) -> None:
        try:
            out[k] = batcher.submit([ids[k]], timeout=10, within=within, deadline=deadline)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[k] = exc

    for k in range(len(ids)):
        threading.Thread(target=one, args=(k,), daemon=True).start()
    return out


def test_requests_are_admitted_as_far_as_the_measured_batches_score_them_in_time() -> None:
    # Prepare: exchanges of 4 ids measured at 0.1 s; the first request holds the worker
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", max_ids=4, delay_s=0.002, late="late within {within}")
    for _ in range(3):
        batcher.cost.add(4, 0.1)
    threads, first = run_all(batcher, [["first"]])
    time.sleep(0.05)
    # Execute: 30 one-id requests that must be scored within 0.5 s
    out = submit_each(batcher, [f"id{k}" for k in range(30)], within=0.5)
    settled(batcher, 30)
    admitted = batcher.queued
    batcher.close(LookupError("the test ends"))  # what was admitted, not how it ends
    scorer.gate.set()
    for t in threads:
        t.join(10)
    # Assert: what 4 or 5 exchanges of 0.1 s carry (the running one's rest is 0 to 0.1 s)
    refusals = [o for o in out if isinstance(o, Overloaded)]
    assert 16 <= admitted <= 20 and len(refusals) == 30 - admitted, (admitted, out)
    for exc in refusals:
        assert exc.at == NO_CAPACITY and exc.retry_after_s > 0
        assert str(exc).startswith("late within 0.5; retry in "), exc
    assert first == [{"first": 5}]


def test_queued_requests_a_slower_batch_would_answer_after_their_deadline_are_refused_then() -> (
    None
):
    # Prepare: lone calls measured at 0.01 s an exchange; a full batch holds the worker;
    # 20 requests whose callers wait 0.5 s, 10 whose callers wait 30 s
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", max_ids=4, delay_s=0.002)
    batcher.cost.add(1, 0.01)
    threads, first = run_all(batcher, [["a", "b", "c", "d"]])
    time.sleep(0.05)
    out = submit_each(batcher, [f"id{k}" for k in range(20)], within=0.5, deadline=0.5)
    settled(batcher, 20)
    patient = submit_each(batcher, [f"p{k}" for k in range(10)], within=0.5, deadline=30)
    settled(batcher, 30)
    admitted = batcher.queued
    # Execute: the full batch turns out to take 0.7 s
    time.sleep(0.7)
    scorer.gate.set()
    for t in threads:
        t.join(10)
    deadline = time.monotonic() + 20
    while None in out + patient and time.monotonic() < deadline:
        time.sleep(0.01)
    # Assert: all were admitted on the lone calls' cost; once the full batch was measured,
    # every request whose caller had stopped waiting was refused but the first in the
    # queue; those still awaited were scored, late
    assert admitted == 30 and first == [{"a": 1, "b": 1, "c": 1, "d": 1}]
    scored = [o for o in out if isinstance(o, dict)]
    refusals = [o for o in out if isinstance(o, Overloaded)]
    assert len(scored) == 1 and len(refusals) == 19, out
    assert all(exc.at == NO_CAPACITY and exc.retry_after_s > 0 for exc in refusals)
    assert patient == [{f"p{k}": 2} for k in range(10)]
    assert batcher.refused == 19


def test_a_request_that_finds_no_queue_is_admitted_whatever_a_batch_costs() -> None:
    # Prepare: an exchange measured at 5 s, far beyond the requests' 0.1 s
    scorer = Scorer()
    batcher = MicroBatcher(scorer, "t", max_ids=4, delay_s=0.002)
    batcher.cost.add(4, 5.0)
    threads, out = run_all(batcher, [["a"]])
    time.sleep(0.05)
    # Execute: one more while the first runs (the queue is empty), then a third
    more, second = run_all(batcher, [["b"]])
    settled(batcher, 1)
    with pytest.raises(Overloaded) as refused:
        batcher.submit(["c"], timeout=10, within=0.1)
    scorer.gate.set()
    for t in threads + more:
        t.join(10)
    # Assert: the first two scored (one batch ahead at most), the third refused
    assert out == [{"a": 1}] and second == [{"b": 1}]
    assert refused.value.at == NO_CAPACITY and refused.value.retry_after_s > 5


def test_a_batch_s_one_off_work_is_left_out_of_its_cost() -> None:
    # Prepare: a run that takes 0.3 s, all of it one-off (a session opened)
    def run(ids: list[str]) -> dict[str, int]:
        time.sleep(0.3)
        batcher.discount(0.3)
        return {i: 1 for i in ids}

    batcher = MicroBatcher(run, "t", max_ids=4)
    # Execute
    batcher.submit(["a", "b", "c", "d"], timeout=10)
    # Assert: the batch's cost is what was left, not 0.3 s
    assert batcher.cost.exchange_s < 0.3


def test_the_cost_of_an_exchange_is_the_median_of_recent_full_batches() -> None:
    cost = BatchCost(chunk=64)
    assert cost.exchange_s == PRIOR_S and cost.seconds(0) == 0.0
    cost.add(1, 0.01)  # a quiet model's lone calls
    assert cost.exchange_s == 0.01
    cost.add(64, 0.08)  # the first full batch replaces what small ones said
    assert cost.exchange_s == 0.08
    cost.add(1, 0.001)
    assert cost.exchange_s == 0.08  # small batches no longer count
    for seconds in (0.06, 0.07, 0.9):  # one stretched by a pause
        cost.add(64, seconds)
    assert cost.exchange_s == pytest.approx(0.075)
    cost.add(256, 0.4)  # four exchanges: 0.1 s each
    assert cost.exchange_s == pytest.approx(0.08)
    assert cost.seconds(65) == pytest.approx(2 * 0.08) and cost.seconds(64) == pytest.approx(0.08)
