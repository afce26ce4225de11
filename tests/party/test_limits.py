"""A party's limits: the config's `limits:`, a job's estimate, admission, and the guard's
choices while jobs run (`party.limits`, `party.guard`)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from vfl.contract.spec import JobSpec, TableSource
from vfl.party.config import parse_party_config
from vfl.party.errors import ConfigError, LimitExceeded, MemoryLimitExceeded, PartyBusy
from vfl.party.guard import Guard, JobBudget
from vfl.party.job import PartyJob
from vfl.party.limits import (
    GB,
    JobEstimate,
    Limits,
    admit,
    estimate_job,
    machine_memory_bytes,
    model_parameters,
    table_size,
)
from vfl.party.tables.load import read_raw
from vfl.party.training.nets import Bottom, seeded_mlp

from tests.support.data import FATE

GUEST = TableSource(path=str(FATE / "breast_hetero_guest.csv"), label="y")


def spec(top_hidden: list[int], source_hidden: list[int] | None = None) -> JobSpec:
    return JobSpec.model_validate(
        {
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "b"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "s"}},
            ],
            "model": {"top": {"hidden": top_hidden}, "source": {"hidden": source_hidden or []}},
        }
    )


def test_limits_default_from_the_machine_and_name_a_bad_field() -> None:
    given = parse_party_config({"party": "bank", "limits": {"memory_gb": 2}}, Path("."))
    assert given.limits.memory_gb == 2
    assert given.limits.max_parameters == 2 * GB // 16  # what fits at 16 bytes a parameter
    assert given.limits.max_rows == 2 * GB // 256
    default = parse_party_config({"party": "bank"}, Path(".")).limits
    assert 0 < default.memory_bytes < machine_memory_bytes()
    with pytest.raises(ConfigError, match=r"limits\.max_concurrent_jobs"):
        parse_party_config({"party": "bank", "limits": {"max_concurrent_jobs": 0}}, Path("."))
    with pytest.raises(ConfigError, match=r"limits\.cpus"):
        parse_party_config({"party": "bank", "limits": {"cpus": 3}}, Path("."))


def test_the_estimated_parameters_are_the_models_own() -> None:
    # Prepare: the active party's top over 2 parties' cut layers, and its own bottom
    job = spec([48, 24], [20])
    # Execute
    estimate = estimate_job(job, "bank", [GUEST])
    # Assert: the same layers built by torch hold exactly as many parameters
    out = job.model.source.out_dim
    bottom = seeded_mlp(0, "b", 10, [20], out)
    top = seeded_mlp(0, "t", out * 2, [48, 24], 1)
    expected = sum(p.numel() for m in (bottom, top) for p in m.parameters())
    assert estimate.rows == 569 and estimate.columns == 10
    assert estimate.parameters == expected
    # once the data is loaded, a passive party's embeddings count too
    emb = job.model.source.embedding_dim
    passive = Bottom(5, [7, 3], emb, [20], out)
    loaded = model_parameters(job, "shop", 5, [7, 3])
    assert loaded == sum(p.numel() for p in passive.parameters())


def test_a_wide_hidden_layer_is_over_max_parameters_with_the_fix() -> None:
    estimate = estimate_job(spec([65536, 65536]), "bank", [GUEST])
    assert estimate.parameters > 65536**2
    with pytest.raises(LimitExceeded, match="max_parameters") as info:
        admit(estimate, Limits(memory_gb=16), 0, 0, 0)
    assert f"{estimate.parameters:,}" in str(info.value)
    assert "model.top.hidden" in str(info.value)


def test_admission_refuses_alone_over_and_defers_beside_others() -> None:
    limits = Limits(memory_gb=1, max_concurrent_jobs=2)
    small = JobEstimate(rows=10, columns=2, parameters=10, bytes=100 << 20)
    big = JobEstimate(rows=10, columns=2, parameters=10, bytes=900 << 20)
    admit(small, limits, 1, 200 << 20, 300 << 20)  # fits
    with pytest.raises(LimitExceeded, match="memory_gb = 1"):
        admit(big, limits, 0, 200 << 20, 200 << 20)  # over on its own: fails
    with pytest.raises(PartyBusy, match="max_concurrent_jobs"):
        admit(small, limits, 2, 200 << 20, 300 << 20)  # a slot frees later
    with pytest.raises(PartyBusy, match="waits"):
        admit(small, limits, 1, 200 << 20, 950 << 20)  # the others' memory frees later
    admit(small, limits, 0, 200 << 20, 950 << 20)  # no other job: the idle daemon's decides
    rows = JobEstimate(rows=Limits(memory_gb=1).max_rows + 1, columns=1, parameters=1, bytes=0)
    with pytest.raises(LimitExceeded, match="max_rows"):
        admit(rows, limits, 0, 0, 0)


def test_table_sizes_from_cheap_facts(tmp_path: Path) -> None:
    rows = 60_000  # over the sampled MiB of a CSV
    ids = [f"id{i}" for i in range(rows)]
    pq.write_table(pa.table({"id": ids, "a": range(rows), "b": range(rows)}), tmp_path / "t.pq")
    assert table_size(TableSource(path=str(tmp_path / "t.pq"), format="parquet")) == (rows, 2)
    csv = tmp_path / "t.csv"
    csv.write_text("id,y,a,b\n" + "".join(f"{i},{i % 2},{i * 3},{i * 7}\n" for i in range(rows)))
    got_rows, columns = table_size(TableSource(path=str(csv), label="y"))  # type: ignore[misc]
    assert columns == 2 and abs(got_rows - rows) < rows * 0.1
    assert table_size(TableSource(path=str(tmp_path / "missing.csv"))) is None


def test_secureboost_estimates_its_row_ciphertexts_and_encrypted_buckets(tmp_path: Path) -> None:
    # Prepare: a million rows at the shop, 20 columns
    rows = 1_000_000
    pq.write_table(
        pa.table({"id": np.arange(rows), **{f"c{j}": np.zeros(rows) for j in range(20)}}),
        tmp_path / "shop.pq",
    )
    shop = TableSource(path=str(tmp_path / "shop.pq"), format="parquet")

    def trees(protocol: str) -> JobSpec:
        return JobSpec.model_validate(
            {
                "parties": [
                    {"id": "bank", "role": "active", "data": {"dataset": "b"}},
                    {"id": "shop", "role": "passive", "data": {"dataset": "s"}},
                ],
                "model": {"trees": {}},
                "protocol": protocol,
            }
        )

    # Execute
    split = estimate_job(trees("split"), "shop", [shop])
    secure = estimate_job(trees("secureboost"), "shop", [shop])
    # Assert: three copies of a 256-byte ciphertext a row, beyond what split holds
    assert secure.bytes - split.bytes >= 3 * rows * 256
    with pytest.raises(LimitExceeded, match="memory"):
        admit(secure, Limits(memory_gb=0.5), 0, 0, 0)
    admit(split, Limits(memory_gb=0.5), 0, 0, 0)


class Memory:
    """The process tree's bytes as a test sets them (the guard's `sample`); a sample may
    take `delay` seconds, as reading a large process tree does on a busy machine."""

    def __init__(self, value: int) -> None:
        self.value, self.delay = value, 0.0

    def __call__(self) -> int:
        time.sleep(self.delay)
        return self.value


def small_and_large(
    guard: Guard,
) -> tuple[dict[str, JobBudget], dict[str, LimitExceeded], threading.Event]:
    """Two started jobs at `guard`, "small" (1 MiB estimated) and "large" (50 MiB): their
    budgets, the errors of those the guard failed (in order), and an event set at each."""
    budgets: dict[str, JobBudget] = {}
    failed: dict[str, LimitExceeded] = {}
    done = threading.Event()
    for job, size in (("small", 1 << 20), ("large", 50 << 20)):
        budgets[job] = guard.admit(job, JobEstimate(10, 1, 1, size))
        budgets[job].on_fail = lambda error, job=job: (failed.__setitem__(job, error), done.set())
        budgets[job].started = time.monotonic()
    return budgets, failed, done


def until(condition, within_s: float = 5.0) -> None:
    """Wait until `condition()` holds, at most `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_guard_fails_the_largest_job_and_another_only_if_memory_grows_on() -> None:
    # Prepare: two jobs held, the machine's memory as the test says
    memory = Memory(100 << 20)
    held = {"small", "large"}
    guard = Guard("bank", Limits(memory_gb=1), lambda: set(held), memory, 0.02, pending_s=0.5)
    try:
        budgets, failed, done = small_and_large(guard)
        # Execute: the tree passes the limit
        memory.value = 1100 << 20
        assert done.wait(5)
        memory.value = 1300 << 20  # the failed job allocates on until its next check
        time.sleep(0.2)
        # Assert: the largest job failed, naming the limit; the other goes on
        assert list(failed) == ["large"]
        assert isinstance(failed["large"], MemoryLimitExceeded)
        assert "memory_gb = 1" in str(failed["large"])
        with pytest.raises(MemoryLimitExceeded):
            budgets["large"].check()
        budgets["small"].check()
        # the failed job stopped; its memory stays with the allocator: no job grows
        guard.close(budgets["large"])
        time.sleep(0.6)
        assert list(failed) == ["large"]
        # the other job grows past the peak by more than the slack: it fails too
        memory.value = 1400 << 20
        until(lambda: "small" in failed)
        assert list(failed) == ["large", "small"]
    finally:
        guard.stop()


def test_a_slow_sample_is_judged_at_the_time_it_was_read_not_when_the_tick_began() -> None:
    # Prepare: the largest job failed; the next sample starts inside the failed job's
    # quiet window but reads the memory after it, when the other job has grown
    memory = Memory(100 << 20)
    guard = Guard(
        "bank", Limits(memory_gb=1), lambda: {"small", "large"}, memory, 0.02, pending_s=0.5
    )
    try:
        _, failed, done = small_and_large(guard)
        memory.value = 1100 << 20
        assert done.wait(5)
        memory.delay = 1.2
        # Execute: the other job grows once the quiet window is over, during that sample
        time.sleep(0.7)
        memory.value = 1400 << 20
        until(lambda: "small" in failed)
        # Assert: the growth was not taken for what the failed job left behind
        assert list(failed) == ["large", "small"]
    finally:
        memory.delay = 0.0
        guard.stop()


def test_no_later_job_is_judged_by_what_a_failed_job_left_with_the_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Prepare: an idle daemon of 100 MiB; a job the guard fails at 1.1 GiB
    monkeypatch.setattr("vfl.party.guard.RELEASE_S", 0.1)
    memory = Memory(100 << 20)
    held = {"big"}
    guard = Guard("bank", Limits(memory_gb=1), lambda: set(held), memory, 0.02, pending_s=0.1)
    try:
        big = guard.admit("big", JobEstimate(10, 1, 1, 1 << 20))
        big.started = time.monotonic()
        memory.value = 1100 << 20
        deadline = time.monotonic() + 5
        while big.failure is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(big.failure, MemoryLimitExceeded)
        # Execute: it ends, but the allocator keeps 700 MiB of what it held
        memory.value = 800 << 20
        held.clear()
        guard.close(big)
        time.sleep(0.5)  # the release window passes; the daemon holds no job
        # Assert: a 500 MiB job is admitted on the idle memory before the failure
        assert guard.idle_bytes == 100 << 20
        guard.admit("next", JobEstimate(10, 1, 1, 500 << 20))
    finally:
        guard.stop()


def test_the_guard_fails_a_job_that_runs_past_max_job_seconds() -> None:
    guard = Guard("bank", Limits(memory_gb=1, max_job_seconds=0.1), lambda: {"j"}, Memory(0), 0.02)
    try:
        budget = guard.admit("j", JobEstimate(1, 1, 1, 1))
        budget.started = time.monotonic()
        deadline = time.monotonic() + 5
        while budget.failure is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert budget.failure is not None and "max_job_seconds" in str(budget.failure)
    finally:
        guard.stop()


def test_the_guard_fails_the_job_whose_table_outgrew_its_estimate() -> None:
    # Prepare: a job estimated large, and one over a database whose size was unknown at
    # PREPARE (no table bytes in its estimate) that has since read much more
    memory = Memory(100 << 20)
    held = {"estimated", "database"}
    guard = Guard("bank", Limits(memory_gb=1), lambda: set(held), memory, 0.02, pending_s=0.5)
    failed: list[str] = []
    try:
        sizes = {"estimated": JobEstimate(10**6, 4, 1, 300 << 20, 250 << 20)}
        sizes["database"] = JobEstimate(None, None, 1, 20 << 20)
        budgets = {job: guard.admit(job, estimate) for job, estimate in sizes.items()}
        for job, budget in budgets.items():
            budget.on_fail = lambda error, job=job: failed.append(job)
            budget.started = time.monotonic()
        for read in range(0, 700 << 20, 64 << 20):  # its reader's checks, block by block
            budgets["database"].check(read)
        # Execute: the tree passes the limit
        memory.value = 1100 << 20
        deadline = time.monotonic() + 5
        while not failed and time.monotonic() < deadline:
            time.sleep(0.02)
        # Assert: the job that grew is failed, not the one with the larger estimate
        assert failed == ["database"]
        assert budgets["database"].held_bytes > budgets["estimated"].held_bytes
        budgets["estimated"].check()
    finally:
        guard.stop()


def _wide_first_row(path: Path, rows: int, cell: int) -> TableSource:
    """A CSV of `rows` rows whose first row holds a `cell`-byte text cell: its first MiB
    holds a line or two, so the estimate says few rows."""
    with path.open("w") as fh:
        fh.write("id,y,x,note\n")
        fh.write(f"c0,1,0.5,{'n' * cell}\n")
        fh.writelines(f"c{i},{i % 2},{i * 0.25},\n" for i in range(1, rows))
    return TableSource(path=str(path), label="y")


def test_max_rows_holds_against_the_rows_a_job_reads(tmp_path: Path) -> None:
    # Prepare: 20,000 rows behind a 1.5 MB first cell; the estimate admits the job
    source = _wide_first_row(tmp_path / "d.csv", 20_000, 1_500_000)
    limits = Limits(memory_gb=1, max_rows=1000)
    estimate = estimate_job(spec([4]), "bank", [source])
    assert estimate.rows is not None and estimate.rows < 1000
    guard = Guard("bank", limits, lambda: {"j"}, Memory(0), 0.02)
    try:
        budget = guard.admit("j", estimate)
        job = PartyJob("j", spec([4]), "bank", {"b": source})
        job.check = budget.check
        # Execute, Assert: the job's PREPARE fails as the estimate's refusal words it
        with pytest.raises(LimitExceeded) as caught:
            job.prepare()
    finally:
        guard.stop()
    message = str(caught.value)
    read = re.search(r"the job's tables hold at least ([\d,]+) rows here", message)
    assert read is not None and 1000 < int(read.group(1).replace(",", "")) <= 20_000
    assert "over this party's limit max_rows = 1,000" in message
    assert "use a smaller dataset, or ask the party's operator to raise limits.max_rows" in message
    assert job.raw is None


def test_the_reader_stops_at_the_block_that_passes_max_rows(tmp_path: Path) -> None:
    # Prepare: 40 rows of 1 MiB each, read 16 MiB a block
    path = tmp_path / "d.csv"
    with path.open("w") as fh:
        fh.write("id,note\n")
        fh.writelines(f"c{i},{'n' * (1 << 20)}\n" for i in range(40))
    guard = Guard("bank", Limits(memory_gb=1, max_rows=20), lambda: {"j"}, Memory(0), 0.02)
    seen: list[tuple[int, int]] = []
    try:
        budget = guard.admit("j", JobEstimate(1, 1, 1, 1))

        def check(read_bytes: int, read_rows: int) -> None:
            seen.append((read_bytes, read_rows))
            budget.check(read_bytes, read_rows)

        # Execute
        with pytest.raises(LimitExceeded, match="max_rows = 20"):
            read_raw(TableSource(path=str(path)), "d", check=check)
    finally:
        guard.stop()
    # Assert: told the rows block by block, failed before the last block was read
    rows = [r for _, r in seen]
    assert rows == sorted(rows) and 0 < rows[-2] <= 20 < rows[-1] < 40
    assert budget.read_bytes == seen[-1][0] > 0


def test_max_rows_holds_against_the_lines_of_a_libsvm_file(tmp_path: Path) -> None:
    path = tmp_path / "d.svm"
    path.write_text("".join(f"{i % 2} {i % 7 + 1}:1\n" for i in range(150_000)))
    budget = JobBudget("j", JobEstimate(1, 1, 1, 1), max_rows=70_000)
    seen: list[int] = []

    def check(read_bytes: int, read_rows: int) -> None:
        seen.append(read_rows)
        budget.check(read_bytes, read_rows)

    source = TableSource(path=str(path), format="libsvm", id="line", label="y")
    with pytest.raises(LimitExceeded, match=r"at least 131,072 rows .* max_rows = 70,000"):
        read_raw(source, "d", check=check)
    assert seen == [0, 65_536, 131_072]


def test_a_bfv_job_estimates_its_ciphertexts() -> None:
    # Prepare: the same job with each scheme, and with more columns
    body = spec([8]).model_dump()
    body["protocol"] = "blindfl"
    paillier = JobSpec.model_validate(body)
    body["crypto"] = {"scheme": "bfv"}
    bfv = JobSpec.model_validate(body)
    # Execute
    base = estimate_job(paillier, "shop", [GUEST]).bytes
    narrow = estimate_job(bfv, "shop", [GUEST]).bytes
    wide = estimate_job(bfv, "shop", [TableSource(path=str(FATE / "breast_hetero_host.csv"))])
    # Assert: a 393 KiB ciphertext (N = 8192, three 60-bit primes) per weight block and per
    # message of a step, a few MiB in all on breast's 10 and 20 columns
    ciphertext = 2 * 3 * 8192 * 8
    assert 8 * ciphertext < narrow - base + 10 * 16 * 2048 // 4 < 64 * ciphertext
    assert wide.bytes - narrow > ciphertext  # more columns, more weight blocks
