"""Each party's view of a job, as `vfl attack` recorded it: the envelopes it received
(the wire audit, `--audit`), decoded as the party decodes them, and what it recorded
itself (`--record-views`, `party.state.views`): its own rows and inputs, what it
decrypted, its state at each training round and its trained model's outputs.

An attack gets one `PartyView`, the attacker's, and nothing of another party's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from vfl.attack.errors import ViewError
from vfl.party.state.views import read_view
from vfl.party.transport.audit import read_audit
from vfl.proto import common_pb2
from vfl.secure.channel import decode_payload
from vfl.secure.wire.payload import tensor_from_payload

ROUND_TAG = re.compile(r"^(?:train|tree)/r(\d+)/(.+)$")  # networks, trees
ROUND_RECORD = re.compile(r"^train_r(\d+)$")
# A ciphertext is read by its lowest 64 bits: uniform whatever the key, whereas its
# leading bits follow the modulus's (two runs under two keys differ there, not in what
# the ciphertexts carry).
LOW_BYTES = 8


@dataclass
class PartyView:
    """One party's view of one job.

    `own`: its aligned `ids`, `inputs` (rows x columns, preprocessed), `train_rows`,
    `val_rows`, `batches_per_epoch` (and at the active party its `labels`, which only the
    harness reads, to score attacks). `rounds`: per training round what it recorded
    (`rows`; split: `act`, `grad`, at the active party `act_<passive>`, `grad_<passive>`;
    blindfl active: `z`, `g`; trees: a passive party's instance space `groups`, the
    active party's `cut_*_<passive>` and `val_<passive>`, `party.training.trees`).
    `received`: per training round (a network's `train/r<n>`, a tree job's `tree/r<n>`),
    what each envelope it received decodes to, by the tag's tail (`grad`, `m3`, `gh`,
    `d0/grow`, ...): a tensor as a tensor, ciphertexts as the lowest 64 bits of each, a
    float matrix. `decrypted`: the plaintexts it decrypted, by record name. `final`: what
    its trained model computes on its rows (`representation`), or a tree passive party's
    split columns (`split_columns`, for the harness)."""

    party: str
    role: str
    own: dict[str, np.ndarray]
    rounds: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    received: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    decrypted: dict[str, np.ndarray] = field(default_factory=dict)
    final: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def batches_per_epoch(self) -> int:
        return int(self.own["batches_per_epoch"])

    def epoch_of(self, rnd: int) -> int:
        """The epoch (from 1) of training round `rnd` (from 1)."""
        return (rnd - 1) // self.batches_per_epoch + 1

    @property
    def epochs(self) -> int:
        return max((self.epoch_of(r) for r in self.rounds), default=0)

    def rounds_of(self, epoch: int) -> list[int]:
        return sorted(r for r in self.rounds if self.epoch_of(r) == epoch)

    def inputs(self) -> np.ndarray:
        return np.asarray(self.own["inputs"], dtype=np.float64)


def load_view(party: str, role: str, view_dir: Path, audit_dir: Path | None) -> PartyView:
    """The view of `party` from its recorded folder and the wire audit.

    Raises:
        ViewError: the folder holds no recorded view.
    """
    records = read_view(view_dir)
    if "own" not in records:
        raise ViewError(
            f"party '{party}' recorded no view in {view_dir}; run its daemon with "
            "--record-views (vfl attack does)"
        )
    view = PartyView(party, role, records.pop("own"))
    view.final = records.pop("final", {})
    for name, arrays in records.items():
        found = ROUND_RECORD.match(name)
        if found:
            view.rounds[int(found.group(1))] = arrays
        elif name.startswith("dec_"):
            view.decrypted[name[4:]] = arrays["values"]
    if audit_dir is not None:
        view.received = received_rounds(audit_dir, party)
    return view


def received_rounds(audit_dir: Path, party: str) -> dict[int, dict[str, np.ndarray]]:
    """What `party` received in each training round, decoded: per round, tag tail ->
    a tensor, or the lowest 64 bits of each ciphertext as floats (rows x columns)."""
    out: dict[int, dict[str, np.ndarray]] = {}
    for rec in read_audit(audit_dir, party):
        found = ROUND_TAG.match(rec["tag"])
        if rec["direction"] != "received" or found is None:
            continue
        value = decoded(decode_payload(rec["data"]))
        if value is not None:
            out.setdefault(int(found.group(1)), {})[found.group(2)] = value
    return out


def decoded(payload: common_pb2.Payload) -> np.ndarray | None:
    """A tensor as the party decodes it; ciphertexts as the lowest 64 bits of each (their
    big-endian encoding's last 8 bytes), as a float matrix of their logical shape (BFV's,
    of variable length: one row per ciphertext, its bytes' last 8); None for other
    kinds."""
    kind = payload.WhichOneof("kind")
    if kind == "tensor":
        return np.asarray(tensor_from_payload(payload), dtype=np.float64)
    if kind != "ciphertexts":
        return None
    c = payload.ciphertexts
    shape = [int(d) for d in c.shape]
    width = int(c.width)
    if width == 0:  # BFV: SEAL's bytes of variable length, `shape` lists them
        ends = np.cumsum(shape)
        raw = np.frombuffer(c.blob, dtype=np.uint8)
        low = [raw[end - LOW_BYTES : end] for end in ends if end >= LOW_BYTES]
        return np.array([[float(int.from_bytes(b.tobytes(), "big"))] for b in low])
    blob = np.frombuffer(c.blob, dtype=np.uint8).reshape(-1, width)[:, -LOW_BYTES:]
    lead = blob.copy().view(">u8").ravel().astype(np.float64)
    return lead.reshape(shape) if int(np.prod(shape)) == lead.size else lead[:, None]
