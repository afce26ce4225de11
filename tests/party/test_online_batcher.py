"""The micro-batcher of online scoring: concurrent requests share batches, each gets its
own results, a failed batch fails only its own requests."""

from __future__ import annotations

import threading
import time

import pytest
from vfl.party.errors import Overloaded
from vfl.party.inference.batcher import MicroBatcher


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
    assert refused.value.retry_after_s > 0
    assert str(refused.value).startswith("model m is busy; retry in ")
    assert out == [{"first": 5}] and queued == [{"b": 1}, {"c": 1}]
    assert batcher.submit(["d"], timeout=5) == {"d": 1}
