"""How long a checkpoint takes and how large it is, per party, for blindfl jobs at 2048 bits.

    python -m bench.checkpoint [--key-bits 2048] [--jobs a9a,credit]

Each job runs in this process (parties as threads over the in-process channel, the code
path of a party daemon minus gRPC) until every party has written its checkpoint of round
2, then stops. Reported per party: the checkpoint file's size, the time to take and write
it (state dict, encoding, fsync'd atomic write), and the time to read and verify it back.

- a9a: logistic regression (source out_dim 1, no hidden top layer), batch 256, the
  a9a.guest (bank, 14 columns + label) / a9a.host (shop, 109 columns) split.
- credit: the credit shape of the secure benchmarks (`bench/credit_data.py`): 30,000
  synthetic rows, 13 + 10 dense standardised features with a nonlinear label, source
  out_dim 16, top [32], batch 256.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from vfl.contract.spec import TableSource, parse_spec
from vfl.party.job import PartyJob
from vfl.party.state import Checkpoint, StateDir, decode_checkpoint
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import ChannelClosed

from bench.credit_data import credit_tables
from bench.jobs import binary_model, job_spec

A9A = Path(os.environ.get("VFL_SHARED_DATA", "/work/shared/data")) / "a9a"
STOP_AFTER = 2


class TimedStateDir(StateDir):
    """A state directory that remembers how long each save took."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.saves: list[tuple[int, float, int]] = []  # round, seconds, bytes

    def save(self, ck: Checkpoint) -> Path:
        begun = time.perf_counter()
        path = super().save(ck)
        self.saves.append((ck.round, time.perf_counter() - begun, path.stat().st_size))
        return path


class StopAfter:
    """A reporter that closes the hub once every party checkpointed round `STOP_AFTER`."""

    def __init__(self, hub: InProcessHub, parties: int) -> None:
        self.hub, self.parties, self.done = hub, parties, 0
        self.lock = threading.Lock()

    def checkpoint(self, rnd: int) -> None:
        with self.lock:
            self.done += rnd >= STOP_AFTER
            if self.done == self.parties:
                self.hub.close("benchmark: checkpoints written")

    def __getattr__(self, name: str):  # stage, aligned, round, validation: ignored
        return lambda *args, **kwargs: None


def a9a_tables() -> dict[str, TableSource]:
    return {
        "bank": TableSource(path=str(A9A / "a9a.guest"), format="libsvm", label="y"),
        "shop": TableSource(path=str(A9A / "a9a.host"), format="libsvm"),
    }


def spec_for(name: str, key_bits: int):
    model = binary_model(1, [], lr=1.0) if name == "a9a" else binary_model(16, [32])
    return parse_spec(
        job_spec(
            name,
            "blindfl",
            {"dataset": "d"},
            {"dataset": "d"},
            key_bits=key_bits,
            model=model,
            train={"epochs": 1, "batch_size": 256, "checkpoint_every": STOP_AFTER},
            validation={"every": 1000},
        )
    )


def measure(name: str, key_bits: int, folder: Path) -> dict[str, dict[str, float]]:
    tables = a9a_tables() if name == "a9a" else credit_tables(folder)
    spec = spec_for(name, key_bits)
    hub = InProcessHub()
    reporter = StopAfter(hub, len(spec.parties))
    states = {p: TimedStateDir(folder / p) for p in tables}
    errors: list[BaseException] = []

    def party(pid: str) -> None:
        try:
            job = PartyJob("bench", spec, pid, {"d": tables[pid]}, states[pid])
            job.run(hub.channel(pid), reporter)  # type: ignore[arg-type]
        except ChannelClosed:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)
            hub.close(f"{pid} failed")

    threads = [threading.Thread(target=party, args=(p,)) for p in tables]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out = {}
    for pid, state in states.items():
        rnd, seconds, size = state.saves[-1]
        path = state.job_dir("bench") / f"round-{rnd:09d}.ckpt"
        begun = time.perf_counter()
        decode_checkpoint(path.read_bytes(), str(path))
        out[pid] = {"kB": size / 1e3, "save_s": seconds, "load_s": time.perf_counter() - begun}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.checkpoint", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--jobs", default="a9a,credit")
    args = ap.parse_args()
    print(
        f"| job ({args.key_bits}-bit blindfl) | party | checkpoint size "
        "| save (state, encode, fsync) | read and verify |"
    )
    print("|---|---|---|---|---|")
    for name in args.jobs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            for pid, m in measure(name, args.key_bits, Path(tmp)).items():
                size, save, load = m["kB"], m["save_s"] * 1e3, m["load_s"] * 1e3
                print(f"| {name} | {pid} | {size:.0f} kB | {save:.0f} ms | {load:.0f} ms |")


if __name__ == "__main__":
    main()
