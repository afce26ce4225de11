"""PSI: X25519 commutativity, and the protocol with parties as threads over `InProcessHub`."""

from __future__ import annotations

import csv
import logging
import re
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hypothesis import given, settings, strategies as st
from vfl.proto import common_pb2
from vfl.secure.channel import InProcessHub
from vfl.secure.errors import PayloadError, PsiError
from vfl.secure.executor import PSI_POINT, BlockExecutor, LocalExecutor
from vfl.secure.psi.active import aligned_order, common_rows
from vfl.secure.psi.curve import Blinder, IdColumn, canonical_ids, equal_rows, hash_to_curve
from vfl.secure.psi.protocol import PsiConfig, PsiResult, run_psi
from vfl.secure.psi.wire import PsiWire, points_from_payload, points_to_payload
from vfl.secure.wire.payload import control_to_payload

from tests.support.data import DATA, FATE

INLINE = PsiConfig(workers=1, timeout=20)
Outcomes = Mapping[str, PsiResult | Exception]


def run_parties(
    ids: Mapping[str, IdColumn],
    active: str,
    seed: int | None = 7,
    config: PsiConfig = INLINE,
    executors: Mapping[str, BlockExecutor] | None = None,
) -> Outcomes:
    """Every party of `ids` runs `run_psi` in its own thread (with its executor in
    `executors`, if any); returns result or exception."""
    hub = InProcessHub()
    channels = {party: hub.channel(party) for party in ids}
    passives = [party for party in ids if party != active]
    out: dict[str, PsiResult | Exception] = {}

    def side(party: str) -> None:
        try:
            out[party] = run_psi(
                channels[party],
                party,
                active,
                passives,
                ids[party],
                "job1/psi",
                seed,
                config,
                (executors or {}).get(party),
            )
        except Exception as exc:
            out[party] = exc

    threads = [threading.Thread(target=side, args=(party,)) for party in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return out


def results_of(out: Outcomes) -> dict[str, PsiResult]:
    """The results, failing the test on any party's exception."""
    for party, result in out.items():
        assert isinstance(result, PsiResult), f"party {party} failed: {result!r}"
    return {party: result for party, result in out.items() if isinstance(result, PsiResult)}


def aligned(ids: Mapping[str, IdColumn], out: Outcomes) -> dict[str, list[str]]:
    """Each party's ids (as text) in its aligned order."""
    results = results_of(out)
    return {p: [str(ids[p][i]) for i in results[p].positions.tolist()] for p in ids}


def assert_aligned(ids: Mapping[str, IdColumn], out: Outcomes, expected: set[str]) -> None:
    rows = aligned(ids, out)
    first = next(iter(rows.values()))
    assert all(r == first for r in rows.values()), "parties disagree on the aligned order"
    assert set(first) == expected and len(first) == len(expected)
    sizes = {p: len(v) for p, v in ids.items()}
    for result in results_of(out).values():
        assert result.intersection_size == len(expected)
        assert result.set_sizes == sizes
        assert result.positions.dtype == np.int64


FATE_DIRS = (DATA / "fate", FATE)


def fate_file(name: str) -> Path:
    """A FATE example file from the repository's copies of FATE's `examples/data/`."""
    for folder in FATE_DIRS:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{name} not found in {[str(f) for f in FATE_DIRS]}")


def read_ids(path: Path) -> list[str]:
    with path.open(newline="") as handle:
        return [row["id"] for row in csv.DictReader(handle)]


# X25519 primitives ------------------------------------------------------------------


def mult(scalar: bytes, point: bytes) -> bytes:
    key = X25519PrivateKey.from_private_bytes(scalar)
    return key.exchange(X25519PublicKey.from_public_bytes(point))


@settings(max_examples=50, deadline=None)
@given(
    a=st.binary(min_size=32, max_size=32),
    b=st.binary(min_size=32, max_size=32),
    name=st.text(max_size=20),
)
def test_x25519_scalar_multiplication_commutes(a: bytes, b: bytes, name: str) -> None:
    point = hash_to_curve([name.encode()]).tobytes()
    assert mult(a, mult(b, point)) == mult(b, mult(a, point))


def test_clamping_ignores_low_and_top_scalar_bits() -> None:
    # Prepare: two scalars that differ only in bits that RFC 7748 clamping overwrites
    point = hash_to_curve([b"133"]).tobytes()
    a = bytearray(range(32))
    a_other = bytearray(a)
    a_other[0] ^= 0b111
    a_other[31] ^= 0b1100_0000
    b = bytes(range(100, 132))
    # Assert: same products, and commutativity still holds for the unclamped bytes
    assert mult(bytes(a), point) == mult(bytes(a_other), point)
    assert mult(bytes(a), mult(b, point)) == mult(b, mult(bytes(a_other), point))


def test_small_order_point_is_rejected() -> None:
    with Blinder(workers=1) as blinder, pytest.raises(PayloadError, match="small order"):
        list(blinder.stream([bytes(32)]))


def test_canonical_ids_text_form() -> None:
    assert canonical_ids([133, "133", np.int64(133)]) == [b"133"] * 3
    assert canonical_ids(np.array([5, -1], dtype=np.int64)) == [b"5", b"-1"]
    for bad in ([1.0], [True], [None]):
        with pytest.raises(PsiError, match="row 0 has type"):
            canonical_ids(bad)


def test_points_payload_checks_width_and_count() -> None:
    payload = points_to_payload(bytes(64), "B")
    assert points_from_payload(payload, 2) == bytes(64)
    with pytest.raises(PayloadError, match="expected 3 points"):
        points_from_payload(payload, 3)
    with pytest.raises(PayloadError, match="expected curve points"):
        points_from_payload(control_to_payload({"x": 1}), 2)
    bad = common_pb2.Payload(ec_points=common_pb2.EcPoints(curve="x25519", count=2, blob=b"x"))
    with pytest.raises(PayloadError, match="blob has 1 bytes"):
        points_from_payload(bad, 2)


# Protocol ----------------------------------------------------------------------------


def test_full_overlap_two_parties() -> None:
    rng = np.random.default_rng(0)
    base = [f"user{i}" for i in range(300)]
    ids = {
        "B": [base[i] for i in rng.permutation(300)],
        "A": [base[i] for i in rng.permutation(300)],
    }
    out = run_parties(ids, "B")
    assert_aligned(ids, out, set(base))


def test_fate_breast_partial_overlap() -> None:
    guest = read_ids(fate_file("breast_hetero_guest.csv"))
    host = read_ids(fate_file("breast_hetero_host_sample_id.csv"))
    ids = {"guest": guest, "host": host}
    out = run_parties(ids, "guest")
    assert_aligned(ids, out, set(guest) & set(host))
    assert results_of(out)["guest"].intersection_size == 299


@pytest.mark.parametrize("duplicated", ["guest", "host"])
def test_repeated_ids_rejected_at_every_party(duplicated: str) -> None:
    repeated = read_ids(fate_file("breast_hetero_guest_repeated_id.csv"))
    clean = read_ids(fate_file("breast_hetero_guest.csv"))
    ids = {"guest": clean, "host": clean}
    ids[duplicated] = repeated
    out = run_parties(ids, "guest")
    counts = Counter(repeated).values()
    extra, distinct = sum(c - 1 for c in counts), sum(c > 1 for c in counts)
    message = f"{extra} of {len(repeated)} rows repeat an id .*\\({distinct} distinct ids"
    assert isinstance(out[duplicated], PsiError)
    assert re.search(message, str(out[duplicated])), str(out[duplicated])
    assert "deduplicate the id column" in str(out[duplicated])
    other = "host" if duplicated == "guest" else "guest"
    assert isinstance(out[other], PsiError) and "aborted PSI" in str(out[other])


def test_three_parties_partial_overlap_int_and_str_ids() -> None:
    rng = np.random.default_rng(3)
    sets = {p: rng.choice(2000, size=900, replace=False) for p in ("B", "A1", "A2")}
    ids: Mapping[str, IdColumn] = {
        "B": sets["B"].astype(np.int64),
        "A1": [str(v) for v in sets["A1"].tolist()],
        "A2": sets["A2"].tolist(),
    }
    expected = set(sets["B"].tolist()) & set(sets["A1"].tolist()) & set(sets["A2"].tolist())
    out = run_parties(ids, "B")
    assert_aligned(ids, out, {str(v) for v in expected})


def test_empty_intersection_raises_at_every_party() -> None:
    ids: dict[str, IdColumn] = {"B": list(range(50)), "A": [f"x{i}" for i in range(40)]}
    out = run_parties(ids, "B")
    for result in out.values():
        assert isinstance(result, PsiError)
        assert "empty intersection" in str(result) and "A: 40, B: 50 ids" in str(result)


def test_same_seed_gives_same_order_and_no_id_in_logs(caplog: pytest.LogCaptureFixture) -> None:
    ids = {"B": [f"secret{i}" for i in range(200)], "A": [f"secret{i}" for i in range(100, 300)]}
    with caplog.at_level(logging.DEBUG):
        first, second = aligned(ids, run_parties(ids, "B")), aligned(ids, run_parties(ids, "B"))
    assert first == second
    messages = [record.getMessage() for record in caplog.records]
    assert not any("secret" in message for message in messages)
    assert "job1/psi: party B aligned 100 rows" in " ".join(messages)  # the tag once
    assert not any(message.startswith("psi job1/psi") for message in messages)


def test_process_pool_path() -> None:
    config = PsiConfig(workers=2, chunk_size=300, parallel_min=100, timeout=60)
    ids = {"B": list(range(1500)), "A": list(range(700, 2000))}
    out = run_parties(ids, "B", seed=None, config=config)
    assert_aligned(ids, out, {str(v) for v in range(700, 1500)})


def test_a_party_executor_blinds_large_chunks_in_blocks() -> None:
    executor = LocalExecutor(workers=2, min_task_ms=0.5)  # 16 points per task
    assert executor.block_items(PSI_POINT) == 16
    executor.warm_up()
    try:
        config = PsiConfig(workers=1, chunk_size=300, timeout=60)
        ids = {"B": list(range(1500)), "A": list(range(700, 2000))}
        out = run_parties(ids, "B", seed=None, config=config, executors={"B": executor})
        assert_aligned(ids, out, {str(v) for v in range(700, 1500)})
        # B blinds its own 5 chunks and A's 5 (4 x 300 and 100 points): 2 blocks each
        assert executor.tasks == 20
        with Blinder(executor=executor) as blinder, pytest.raises(PayloadError, match="small"):
            list(blinder.stream([bytes(32) * 40]))  # small-order points, found on a worker
    finally:
        executor.close()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("A", "B", []), "at least one distinct passive"),
        (("A", "B", ["A", "A"]), "at least one distinct passive"),
        (("C", "B", ["A"]), "neither the active party nor a passive"),
    ],
)
def test_bad_roles(args: tuple[str, str, list[str]], match: str) -> None:
    channel = InProcessHub().channel(args[0])
    with pytest.raises(PsiError, match=match):
        run_psi(channel, args[0], args[1], args[2], ["1"], "j/psi")


def test_oversized_announcement_from_peer_is_rejected() -> None:
    # Prepare: a fake active party that announces more points than max_ids allows
    hub = InProcessHub()
    passive, fake = hub.channel("A"), hub.channel("B")
    PsiWire(fake, "j/psi", 5, 10).send(
        ["A"], "own/B/n", control_to_payload({"count": 10**9, "chunk": 10})
    )
    # Execute / Assert
    with pytest.raises(PayloadError, match="announced 1000000000 points"):
        run_psi(passive, "A", "B", ["A"], ["1", "2"], "j/psi", config=INLINE)


def test_malformed_points_from_active_abort_both_sides() -> None:
    # Prepare: a fake active party announces 2 points but sends 1
    hub = InProcessHub()
    passive, fake = hub.channel("A"), hub.channel("B")
    wire = PsiWire(fake, "j/psi", 5, 10)
    wire.send(["A"], "own/B/n", control_to_payload({"count": 2, "chunk": 2}))
    wire.send(["A"], "own/B/0", points_to_payload(hash_to_curve([b"1"]).tobytes(), "B"))
    # Execute / Assert
    with pytest.raises(PayloadError, match="expected 2 points"):
        run_psi(passive, "A", "B", ["A"], ["1", "2"], "j/psi", config=INLINE)
    assert wire.recv_header("A", "double/A") == (2, 2)
    with pytest.raises(PsiError, match="party 'A' aborted PSI: expected 2 points"):
        wire.recv("A", "double/A/0")  # the abort stands in for the chunk it waits on


def test_duplicate_points_from_passive_are_rejected() -> None:
    # Prepare: a fake passive party sends the same point twice
    hub = InProcessHub()
    active, fake = hub.channel("B"), hub.channel("A")
    wire = PsiWire(fake, "j/psi", 5, 10)
    twice = hash_to_curve([b"1", b"1"]).tobytes()
    wire.send_points(["B"], "own/A", 2, 2, [twice])
    # Execute / Assert
    with pytest.raises(PayloadError, match="contain duplicates"):
        run_psi(active, "B", "B", ["A"], ["1", "2"], "j/psi", config=INLINE)
    with pytest.raises(PsiError, match="party 'B' aborted PSI: points exchanged"):
        wire.recv("B", "result")


# Matching at scale: 16-byte keys, word sorts, the exact fallback -----------------------


def _keys(values: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), -1).copy()


def test_common_rows_fast_and_exact_paths_agree() -> None:
    rng = np.random.default_rng(1)
    shared = [rng.bytes(16) for _ in range(50)]
    a = shared[:40] + [rng.bytes(16) for _ in range(30)]
    b = [rng.bytes(16) for _ in range(20)] + shared[10:]
    # b also holds a point equal to one of a's in its first 8 bytes only: not a match
    b.append(a[45][:8] + bytes(8))
    order_a, order_b = rng.permutation(len(a)), rng.permutation(len(b))
    a, b = [a[i] for i in order_a], [b[i] for i in order_b]
    expected = {(i, j) for i, x in enumerate(a) for j, y in enumerate(b) if x == y}
    ia, ib = common_rows(_keys(a), _keys(b))
    assert set(zip(ia.tolist(), ib.tolist(), strict=True)) == expected and len(expected) == 30
    # two of a's points tie in their first 8 bytes: the exact path gives the same pairs
    tied = a + [a[0][:8] + b"\xff" * 8]
    ia, ib = common_rows(_keys(tied), _keys(b))
    assert set(zip(ia.tolist(), ib.tolist(), strict=True)) == expected


def test_equal_rows_finds_only_whole_repeats() -> None:
    rows = [b"a" * 8 + b"1" * 8, b"a" * 8 + b"2" * 8, b"b" * 16, b"a" * 8 + b"1" * 8]
    groups = equal_rows(_keys(rows))
    assert [sorted(g.tolist()) for g in groups] == [[0, 3]]
    assert equal_rows(_keys(rows[:3])) == []


def test_aligned_order_sorts_by_the_ids_digests() -> None:
    import hashlib

    ids = np.array([f"user{i}" for i in range(300)], dtype=np.dtypes.StringDType())
    rows = np.random.default_rng(2).permutation(300)[:200]
    order = aligned_order(ids, rows, seed=5)
    prefix = b"vfl/psi/order/v1\x00" + b"5" + b"\x00"
    digests = [hashlib.sha256(prefix + str(ids[r]).encode()).digest() for r in rows.tolist()]
    assert [digests[i] for i in order.tolist()] == sorted(digests)


def test_numpy_string_ids_align_like_lists() -> None:
    base = [f"user{i}" for i in range(150)]
    as_list = {"B": base[:120], "A": base[30:]}
    as_array = {p: np.array(v, dtype=np.dtypes.StringDType()) for p, v in as_list.items()}
    assert aligned(as_list, run_parties(as_list, "B")) == aligned(
        as_array, run_parties(as_array, "B")
    )


def test_the_aligned_order_is_the_order_of_the_ids_digests() -> None:
    import hashlib

    ids = {"B": [f"user{i}" for i in range(400)], "A": [f"user{i}" for i in range(100, 500)]}
    rows = aligned(ids, run_parties(ids, "B", seed=7))
    prefix = b"vfl/psi/order/v1\x00" + b"7" + b"\x00"
    expected = sorted(
        set(ids["B"]) & set(ids["A"]), key=lambda i: hashlib.sha256(prefix + i.encode()).digest()
    )
    assert rows["B"] == rows["A"] == expected
