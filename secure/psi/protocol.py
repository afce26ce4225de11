"""ECDH private set intersection over a `Channel`: the ALIGNING stage of a job.

One active party B and K >= 1 passive parties A_1..A_K, in a star around B. Every party
draws a fresh X25519 scalar per run (`secure.psi.curve`); H is the hash onto the curve.

1. Every party hashes its ids, shuffles them, blinds them and streams them: each A_k
   sends H(x)^a_k to B; B sends H(y)^b to every A_k.
2. A_k blinds B's points again in B's order and streams H(y)^(b a_k) back to B.
3. B blinds A_k's points again, H(x)^(a_k b) in A_k's shuffled order, and matches them
   with step 2. A row of B is common if it matches in every A_k.
4. B orders the common rows by SHA-256(seed, id) and sends each A_k the intersection
   size, every party's set size, and the positions of the common rows in A_k's shuffled
   list in that order. Every party ends with its own row positions in the same order.

What a party learns (semi-honest model): every set size, the intersection size, which of
its own rows are common to all parties, and the aligned order, which is a function of
the job seed and ids the party holds. B also learns which of its rows lie in each
pairwise intersection with A_k (the leakage of any star topology, as in FATE's
multi-host intersection). Shuffles and scalars always come from OS randomness, never
from `seed`: the job seed is shared, so a seeded shuffle could be undone by the peer.
With the same seed and inputs, a re-run (e.g. a resumed job) yields the same order.

Duplicate ids are rejected. FATE instead supports a match-id convention (several rows
sharing an id, joined many-to-many); that makes the aligned row count depend on both
parties' duplication, leaks the duplication pattern through equal blinded values, and
leaves no single row per person to train on.

Modules: `psi_ec` (ids, hashing, blinding pool), `psi_wire` (tags, point streams,
aborts), `psi_active` (matching and ordering); this module holds the API and the passive
party's side.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from vfl.secure.channel import Channel
from vfl.secure.errors import PayloadError, PsiError, SecureError
from vfl.secure.executor.base import BlockExecutor
from vfl.secure.psi.active import run_active
from vfl.secure.psi.curve import Blinder, IdColumn, OwnSet, prepare_own
from vfl.secure.psi.wire import MAX_CHUNK, PsiWire
from vfl.secure.wire.payload import control_from_payload, indices_from_payload

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PsiConfig:
    """Tuning of one PSI run.

    workers: processes for the scalar multiplications (0: every core; 1: in-thread),
        unless `run_psi` is given the party's executor.
    chunk_size: points per message (32 bytes each; 2^15 points is 1 MiB).
    parallel_min: chunks smaller than this are blinded in the calling thread.
    max_ids: largest set this party accepts from itself or announced by a peer.
    timeout: seconds to wait for any one message (None: the channel's default). The
        passive parties wait for the result while the active party blinds all of
        their sets: raise it for many passive parties with tens of millions of ids.

    Raises:
        PsiError: a field is out of range.
    """

    workers: int = 0
    chunk_size: int = 1 << 15
    parallel_min: int = 2048
    max_ids: int = 100_000_000
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.workers < 0 or not 1 <= self.chunk_size <= MAX_CHUNK or self.max_ids < 1:
            raise PsiError(
                f"PsiConfig needs workers >= 0, 1 <= chunk_size <= {MAX_CHUNK} and "
                f"max_ids >= 1; got {self.workers}, {self.chunk_size}, {self.max_ids}"
            )


@dataclass(frozen=True, eq=False)
class PsiResult:
    """`positions`: int64 row positions into this party's `ids`, in the aligned order."""

    positions: np.ndarray
    intersection_size: int
    set_sizes: dict[str, int]
    seconds: float


def run_psi(
    channel: Channel,
    my_id: str,
    active_id: str,
    passive_ids: Sequence[str],
    ids: IdColumn,
    tag_prefix: str,
    seed: int | None = None,
    config: PsiConfig | None = None,
    executor: BlockExecutor | None = None,
    source: str = "",
) -> PsiResult:
    """Run this party's side of the PSI; every listed party must call it with the same
    roles, `tag_prefix` and `seed`.

    Args:
        ids: this party's ids, str or int, one per row (canonicalised to their text form).
        source: what `ids` are, named by an error about them (e.g. "dataset 'loans'").
        seed: fixes the aligned order across re-runs; None draws a fresh order.
        executor: the party's (its config's `compute:`): large chunks are blinded there
            (None: `config.workers` local processes).

    Raises:
        PsiError: bad roles, non-str/int or duplicate ids, an empty set or intersection,
            or a peer aborted (every party raises, with the same cause).
        PayloadError: a peer sent a malformed or inconsistent message.
        ChannelTimeout, ChannelClosed: from the channel.
    """
    start = time.perf_counter()
    cfg = config or PsiConfig()
    _check_roles(channel, my_id, active_id, passive_ids, tag_prefix)
    wire = PsiWire(channel, tag_prefix, cfg.timeout, cfg.max_ids)
    with Blinder(cfg.workers, cfg.parallel_min, executor) as blinder:
        if my_id == active_id:
            peers = list(passive_ids)
            own = _own_set(wire, ids, peers, cfg, source)
            send = lambda: _stream_own(wire, blinder, own, peers, cfg)  # noqa: E731
            positions, size, sizes = run_active(wire, blinder, own, peers, seed, send)
        else:
            positions, size, sizes = _run_passive(wire, blinder, ids, active_id, cfg, source)
    if size == 0:
        raise PsiError(_empty_message(sizes))
    seconds = time.perf_counter() - start
    logger.info("%s: party %s aligned %d rows in %.2f s", tag_prefix, my_id, size, seconds)
    return PsiResult(positions, size, sizes, seconds)


def _check_roles(
    channel: Channel, my_id: str, active_id: str, passive_ids: Sequence[str], prefix: str
) -> None:
    if not passive_ids or len(set(passive_ids)) != len(passive_ids) or active_id in passive_ids:
        raise PsiError(
            "PSI needs one active party and at least one distinct passive party; got active "
            f"'{active_id}' and passive {list(passive_ids)}"
        )
    if my_id != active_id and my_id not in passive_ids:
        raise PsiError(f"party '{my_id}' is neither the active party nor a passive party")
    if my_id != channel.party_id:
        raise PsiError(f"my_id '{my_id}' differs from the channel's party '{channel.party_id}'")
    if not prefix:
        raise PsiError("tag_prefix must be non-empty, e.g. '<job_id>/psi'")


def _own_set(wire: PsiWire, ids: IdColumn, peers: list[str], cfg: PsiConfig, source: str) -> OwnSet:
    """This party's set, hashed and shuffled; on bad input the peers are told, then this
    raises."""
    me = wire.channel.party_id
    try:
        return prepare_own(ids, cfg.max_ids, source)
    except PsiError as exc:
        wire.abort(peers, f"own/{me}/n", str(exc))
        raise


def _stream_own(
    wire: PsiWire, blinder: Blinder, own: OwnSet, peers: list[str], cfg: PsiConfig
) -> None:
    """Stream this party's set, hashed and blinded chunk by chunk, to `peers`."""
    me = wire.channel.party_id
    tick = time.perf_counter()
    blinded = blinder.stream(own.chunks(cfg.chunk_size))
    wire.send_points(peers, f"own/{me}", own.size, cfg.chunk_size, blinded)
    logger.info("%s: party %s blinded its set in %.2f s", wire.prefix, me, _since(tick))


def _run_passive(
    wire: PsiWire, blinder: Blinder, ids: IdColumn, active: str, cfg: PsiConfig, source: str
) -> tuple[np.ndarray, int, dict[str, int]]:
    """Stream this party's set while blinding the active party's set again (both at
    once, sharing the blinding pool, so neither set waits whole in a mailbox), then read
    the result."""
    me = wire.channel.party_id
    own = _own_set(wire, ids, [active], cfg, source)

    def double() -> None:
        try:
            _double_blind_active(wire, blinder, active)
        except SecureError as exc:
            wire.abort([active], f"double/{me}/n", str(exc))
            raise

    wire.together(lambda: _stream_own(wire, blinder, own, [active], cfg), double)
    fields = control_from_payload(wire.recv(active, "result"), ("intersection",))
    size, sizes = _parse_result(fields)
    if sizes.get(me) != own.size:
        raise PayloadError(f"party '{active}' reports a wrong set size for party '{me}'")
    if size == 0:
        return np.empty(0, dtype=np.int64), 0, sizes
    rows = indices_from_payload(wire.recv(active, f"rows/{me}"), own.size)
    if rows.size != size or np.unique(rows).size != size:
        raise PayloadError(f"party '{active}' sent {rows.size} row indices for {size} rows")
    return own.perm[rows], size, sizes


def _double_blind_active(wire: PsiWire, blinder: Blinder, active: str) -> None:
    """Blind the active party's points again and stream them back in the same order."""
    count, chunk = wire.recv_header(active, f"own/{active}")
    if count == 0:
        raise PayloadError(f"party '{active}' sent an empty set")
    theirs = wire.recv_points(active, f"own/{active}", count, chunk)
    me = wire.channel.party_id
    wire.send_points([active], f"double/{me}", count, chunk, blinder.stream(theirs))


def _parse_result(fields: dict[str, str]) -> tuple[int, dict[str, int]]:
    try:
        size = int(fields["intersection"])
        sizes = {k[5:]: int(v) for k, v in fields.items() if k.startswith("size:")}
    except ValueError as exc:
        raise PayloadError("PSI result holds non-integer sizes") from exc
    if size < 0 or any(n < size for n in sizes.values()):
        raise PayloadError(f"PSI result sizes are inconsistent: {size} of {sizes}")
    return size, sizes


def _empty_message(sizes: dict[str, int]) -> str:
    listed = ", ".join(f"{party}: {n}" for party, n in sorted(sizes.items()))
    return (
        f"empty intersection: no id is common to all parties ({listed} ids); check that "
        "every party uses the same id column and format (e.g. '0133' vs '133')"
    )


def _since(tick: float) -> float:
    return time.perf_counter() - tick
