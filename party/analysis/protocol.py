"""The WOE/IV exchange: a passive party's per-bin event counts through the encrypted
bucket sums (`vfl.secure.histograms`), nothing else of the label, and nothing of its bins
to the active party (docs/protocols.md, "13. WOE and IV").

    B -> A_k   woe/pk        B's Okamoto-Uchiyama public key (a fresh key per job)
    B -> A_k   woe/layout    the layout: 2 values per row (event indicator, 1), scale 2^0
    B -> A_k   woe/rows/<i>  the aligned rows' ciphertexts, 50,000 rows an envelope
    A_k -> B   woe/bins      control: the number of bins of each of its columns; its
                             names if its config shares them; with binning: monotone,
                             how many bins of each come in order (a numeric column's)
    A_k -> B   woe/sums      its bucket sums, packed and re-randomised
    B -> A_k   woe/end       control: the columns it keeps (a training job with
                             features.select); its columns' counts if B's config shows
                             them to it (`analysis: {show_passive: true}`)

B decrypts (events, rows) per bucket, exactly: the values are integers (scale 2^0).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from vfl.contract.spec import JobSpec
from vfl.party.analysis.binning import ColumnBins
from vfl.party.analysis.result import opaque, peer_column
from vfl.party.errors import JobError
from vfl.proto import coordinator_pb2 as pb
from vfl.secure.channel import Channel
from vfl.secure.executor import BlockExecutor
from vfl.secure.histograms import (
    Bins,
    BucketSummer,
    EncryptedRows,
    Layout,
    decrypt,
    encrypt_rows,
    layout_from_payload,
    layout_to_payload,
    pack,
    packed_from_payload,
    packed_to_payload,
    rows_from_payload,
    rows_to_payload,
)
from vfl.secure.ou.keys import OuKeyPair, generate_ou_keypair
from vfl.secure.wire.keys import ou_public_key_from_payload, ou_public_key_to_payload
from vfl.secure.wire.payload import control_from_payload, control_to_payload

TAG = "woe"
ROWS_PER_ENVELOPE = 50_000  # 12.8 MB of 2048-bit ciphertexts


@dataclass
class PeerAnalysis:
    """What the active party learns of one passive party's columns."""

    names: list[str]
    columns: list[pb.ColumnAnalysis] = field(default_factory=list)


class EarlyKeys:
    """B's key pair, made in a thread of its own from the job's start, while PSI runs: a
    2048-bit Okamoto-Uchiyama key takes 2-20 s on a busy core (its safe prime), which
    would otherwise follow PSI. A daemon thread: a job that ends first leaves nothing."""

    def __init__(self, party_id: str, spec: JobSpec) -> None:
        crypto = spec.crypto
        self._args = (party_id, crypto.key_bits, crypto.allow_insecure_test_keys)
        self._made: OuKeyPair | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._make, name="ou-keys", daemon=True)
        self._thread.start()

    def _make(self) -> None:
        try:
            self._made = generate_ou_keypair(*self._args)
        except BaseException as exc:  # handed to the job's thread by `get`
            self._error = exc

    def get(self) -> OuKeyPair:
        """The key pair, once made.

        Raises:
            OuKeyError: the job's key size is refused (`generate_ou_keypair`).
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._made is not None
        return self._made


def envelopes(rows: int) -> list[tuple[int, int]]:
    """The (first, end) rows of each `woe/rows/<i>` envelope."""
    return [
        (lo, min(lo + ROWS_PER_ENVELOPE, rows)) for lo in range(0, max(rows, 1), ROWS_PER_ENVELOPE)
    ]


def active_exchange(
    channel: Channel,
    spec: JobSpec,
    events: np.ndarray,
    executor: BlockExecutor | None,
    early: EarlyKeys | None = None,
) -> dict[str, PeerAnalysis]:
    """B's side up to the decrypted counts: each passive party's columns (its names or
    opaque ones), with counts, WOE and IV. `events`: 0/1 per aligned row analysed."""
    me = channel.party_id
    keys = (early or EarlyKeys(me, spec)).get()
    n = len(events)
    layout = Layout.create(2, max(n, 1), 1.0, 0, keys.public.plaintext_bits)
    values = np.column_stack([events, np.ones(n)]).astype(np.float64)
    rows = encrypt_rows(values, keys.private, layout, executor)
    passives = [p.id for p in spec.passives]
    for peer in passives:
        channel.send(peer, f"{TAG}/pk", ou_public_key_to_payload(keys.public))
        channel.send(peer, f"{TAG}/layout", layout_to_payload(layout))
        for i, (lo, hi) in enumerate(envelopes(n)):
            part = EncryptedRows(keys.public, layout, rows.data[lo:hi])
            channel.send(peer, f"{TAG}/rows/{i}", rows_to_payload(part))
    out: dict[str, PeerAnalysis] = {}
    for peer in passives:
        fields = control_from_payload(channel.recv(peer, f"{TAG}/bins"), ["counts"])
        counts = _ints(fields["counts"], peer, "counts")
        names = json.loads(fields["names"]) if fields.get("names") else None
        if names is not None and (not isinstance(names, list) or len(names) != len(counts)):
            raise JobError(f"party '{peer}' sent {len(counts)} columns' bins but other names")
        ordered = _ints(fields["ordered"], peer, "ordered") if fields.get("ordered") else None
        if ordered is not None and len(ordered) != len(counts):
            raise JobError(f"party '{peer}' sent {len(counts)} columns' bins but other orders")
        if any(c < 1 for c in counts):
            raise JobError(f"party '{peer}' sent a column of no bins in the WOE exchange")
        shown = (
            [str(v) for v in names]
            if names is not None
            else [opaque(j) for j in range(len(counts))]
        )
        analysis = PeerAnalysis(shown)
        if counts:
            packed = packed_from_payload(
                channel.recv(peer, f"{TAG}/sums"), keys.public, layout, sum(counts)
            )
            sums = decrypt(packed, keys.private, scaled=False, executor=executor)
            if ((sums[:, 0] < 0) | (sums[:, 0] > sums[:, 1])).any():
                raise JobError(
                    f"party '{peer}' sent bin sums of more events than rows, or fewer "
                    "than none, in the WOE exchange"
                )
            start = 0
            for j, count in enumerate(counts):
                block = sums[start : start + count]
                start += count
                order = None if ordered is None else ordered[j]
                column = peer_column(
                    peer, shown[j], block[:, 0].tolist(), block[:, 1].tolist(), order
                )
                analysis.columns.append(column)
        out[peer] = analysis
    return out


def active_end(
    channel: Channel, peer: str, keep: Sequence[int] | None, shown: PeerAnalysis | None
) -> None:
    """Tell `peer` which of its columns it keeps (positions; a training job's selection)
    and, if B's config shows them, its columns' counts."""
    fields: dict[str, str] = {}
    if keep is not None:
        fields["keep"] = ",".join(str(j) for j in keep)
    if shown is not None:
        fields["events"] = json.dumps([list(c.events) for c in shown.columns])
        fields["non_events"] = json.dumps([list(c.non_events) for c in shown.columns])
        fields["merged_from"] = json.dumps([list(c.merged_from) for c in shown.columns])
    channel.send(peer, f"{TAG}/end", control_to_payload(fields))


@dataclass(frozen=True)
class PassiveEnd:
    """What a passive party hears at the end: the columns it keeps (None: no selection)
    and, if the active party shows them, its columns' counts."""

    keep: list[int] | None
    events: list[list[int]] | None = None
    non_events: list[list[int]] | None = None
    merged_from: list[list[int]] | None = None


def passive_exchange(
    channel: Channel,
    spec: JobSpec,
    columns: Sequence[ColumnBins],
    names: Sequence[str] | None,
    executor: BlockExecutor | None,
    monotone: bool,
) -> PassiveEnd:
    """A_k's side: B's rows summed per bin of each of its columns, packed, sent back.
    `names`: its columns' names if its config shares them."""
    active = spec.active.id
    crypto = spec.crypto
    key = ou_public_key_from_payload(
        channel.recv(active, f"{TAG}/pk"), active, crypto.allow_insecure_test_keys
    )
    layout = layout_from_payload(channel.recv(active, f"{TAG}/layout"), key)
    n = len(columns[0].codes) if columns else None
    parts = []
    for i, _ in enumerate(envelopes(layout.rows)):
        parts.append(rows_from_payload(channel.recv(active, f"{TAG}/rows/{i}"), key, layout).data)
    data = np.concatenate(parts) if parts else np.zeros((0, layout.parts, key.width), np.uint8)
    if n is not None and data.shape[0] != n:
        raise JobError(
            f"party '{active}' sent {data.shape[0]} rows' ciphertexts for {n} aligned rows"
        )
    counts = [c.count for c in columns]
    fields = {"counts": ",".join(str(c) for c in counts)}
    if names is not None:
        fields["names"] = json.dumps(list(names))
    if monotone:
        fields["ordered"] = ",".join(str(0 if c.categorical else c.ordered) for c in columns)
    channel.send(active, f"{TAG}/bins", control_to_payload(fields))
    if columns:
        rows = EncryptedRows(key, layout, data)
        codes = np.column_stack([c.codes for c in columns])
        summer = BucketSummer(rows, Bins(codes, tuple(counts)), executor)
        try:
            packed = pack(summer.sums(), None, executor)
        finally:
            summer.close()
        channel.send(active, f"{TAG}/sums", packed_to_payload(packed))
    end = control_from_payload(channel.recv(active, f"{TAG}/end"))
    keep = _ints(end["keep"], active, "keep") if "keep" in end else None
    if "events" not in end:
        return PassiveEnd(keep)
    return PassiveEnd(
        keep,
        json.loads(end["events"]),
        json.loads(end["non_events"]),
        json.loads(end.get("merged_from", "[]")) or None,
    )


def _ints(text: str, peer: str, what: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")] if text else []
    except ValueError:
        raise JobError(f"party '{peer}' sent malformed {what} in the WOE exchange") from None
