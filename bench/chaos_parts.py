"""The parts of bench/chaos.py that are not its faults: the Push streams a hostile client
sends (silent, oversized), how a call ended, the processes a federation leaves, and the
table's rows."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
from vfl.local.run import LocalProcesses
from vfl.proto import party_pb2

from bench.procs import alive, members, session_members

LEFTOVER_WAIT_S = 3.0  # after a kill or the stop: processes alive this much later are left
MB = 1 << 20


@dataclass
class Row:
    fault: str
    injected: str = ""
    job: str = ""
    lost: int = 0
    left: int = 0
    wrong: int = 0
    notes: list[str] = field(default_factory=list)
    broken: str = ""  # the promise of the issue this fault broke, if it did

    def expect(self, held: bool, promise: str) -> None:
        if not held:
            self.broken = promise


def stalled(job_id: str, sender: str, receiver: str, stop: threading.Event) -> Iterator:
    """A Push stream that sends nothing, not even its header, until `stop` (the stream a
    certificate would open to hold a party's threads)."""
    stop.wait()
    yield from ()


def big(job_id: str, sender: str, receiver: str, tag: str, size: int, sent: list[int]):
    """A Push stream of `size` bytes in 1 MB chunks; `sent[0]` counts what was taken."""
    block = os.urandom(MB)
    head = party_pb2.PushChunk(
        job_id=job_id, tag=tag, sender=sender, receiver=receiver, total_size=size, data=block
    )
    sent[0] = MB
    yield head
    while sent[0] < size:
        yield party_pb2.PushChunk(data=block)
        sent[0] += MB


def code_of(future: grpc.Future) -> str:
    try:
        future.result()
        return "taken"
    except grpc.RpcError as exc:
        return exc.code().name


def summarise(codes: list[str]) -> str:
    counts: dict[str, int] = {}
    for c in codes:
        counts[c] = counts.get(c, 0) + 1
    return ", ".join(f"{n} {c}" for c, n in sorted(counts.items()))


def short(reason: str, width: int = 90) -> str:
    reason = reason.replace("|", "/")
    return reason if len(reason) <= width else reason[: width - 3] + "..."


def left_after_stop(fed: LocalProcesses) -> int:
    """Processes of the federation's daemons (and their sessions) alive after its stop."""
    pids = {d.pid for d in fed.topology.daemons.values()}
    tree = {p for d in fed.topology.daemons.values() for p in members(d)} | pids
    fed.topology.stop()
    time.sleep(LEFTOVER_WAIT_S)
    return len({p for p in tree if alive(p)} | {p for s in pids for p in session_members(s)})


HEADER = (
    "| fault | injected | the job | lost | processes left | wrong | notes | promise broken |\n"
    "|---|---|---|---|---|---|---|---|"
)


def line(r: Row) -> str:
    notes = "; ".join(r.notes)
    cells = (r.fault, r.injected, r.job, r.lost, r.left, r.wrong, notes, r.broken or "-")
    return "| " + " | ".join(str(c) for c in cells) + " |"
