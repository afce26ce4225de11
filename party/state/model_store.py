"""A party's model store: its own part of every model a successful job trained.

    <state_dir>/models/<model_id>/manifest.json   what the part is (readable, no secrets)
    <state_dir>/models/<model_id>/part.ckpt       the part itself (checkpoint format)
    <state_dir>/models/<model_id>/drift.json      drift counts of the rows it scored since
    <state_dir>/models/<model_id>/stability.json  the newest prediction's stability index
                                                  per column (and of the scores)

The model id is the training job's id. The part is what this party needs to score: its
bottom model (`split`) or its key pair, shares and ciphertexts (`blindfl`), and at the
active party the top model. It never leaves this party's daemon. Both files are written
atomically (0600 in a 0700 folder), the manifest last, so a part without a manifest is
an unfinished write and is not listed. A part whose file fails its hash, cannot be read or
does not match its manifest, or whose manifest is unreadable, is listed with its problem
(`problem`, `unreadable`): it cannot score, and `vfl models` says so.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from vfl.party.errors import CheckpointError, ModelError, UnknownModel
from vfl.party.state.checkpoint_file import (
    Checkpoint,
    decode_checkpoint,
    encode_checkpoint,
    verify_checkpoint,
)
from vfl.party.state.store import StateDir, safe_name, write_atomically
from vfl.party.tables.preprocess.drift import DRIFT_KINDS
from vfl.party.tables.preprocess.preprocessor import Preprocessor
from vfl.party.training.task import Task

MANIFEST = "manifest.json"
PART = "part.ckpt"
DRIFT = "drift.json"
STABILITY = "stability.json"


class Column(BaseModel):
    """One input column of a model part, in the order the model reads them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["dense", "categorical"]
    cardinality: int = 0  # categorical: codes 0..cardinality-1 were trained


class Manifest(BaseModel):
    """What one party holds of one model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: str  # the training job's id
    name: str  # the training job's name
    party_id: str
    role: Literal["active", "passive"]
    protocol: Literal["split", "blindfl", "secureboost"]
    kind: Literal["network", "trees"] = "network"  # the model's family (`party.kinds`)
    columns: tuple[Column, ...]
    spec_json: str  # the training spec (canonical JSON)
    spec_hash: str
    key_fingerprint: str = ""  # blindfl: SHA-256 of this party's Paillier modulus
    task: Task | None = None  # active party only: how outputs become scores
    metrics: dict[str, float] = {}  # active party only: the final validation
    rows: int = 0  # aligned training rows
    peers: dict[str, str] = {}  # the peers' addresses at training (online scoring dials them)
    snapshots: dict[str, str] = {}  # sql datasets trained on: name -> snapshot SHA-256
    created_at: float = 0.0

    @property
    def dense_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.kind == "dense")

    @property
    def categorical_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.kind == "categorical")


def key_fingerprint(modulus: int) -> str:
    """SHA-256 (hex) of a Paillier modulus, big-endian."""
    return hashlib.sha256(int(modulus).to_bytes((int(modulus).bit_length() + 7) // 8)).hexdigest()


class ModelStore:
    """The model parts under one state directory."""

    def __init__(self, state: StateDir) -> None:
        self._state = state
        self.root = state.root / "models"

    def folder(self, model_id: str) -> Path:
        """Raises: ModelError: a model id that cannot name a folder."""
        if not safe_name(model_id):
            raise ModelError(f"model id {model_id!r} is not a model id (a job id such as j-1a2b)")
        return self.root / model_id

    def save(self, manifest: Manifest, part: dict[str, Any]) -> Path:
        """Keep `part` under its manifest (replacing an older copy of the same model)."""
        folder = self.folder(manifest.model_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        ck = Checkpoint(manifest.model_id, manifest.spec_hash, manifest.party_id, 0, part)
        write_atomically(folder / PART, encode_checkpoint(ck))
        data = manifest.model_copy(update={"created_at": manifest.created_at or time.time()})
        write_atomically(folder / MANIFEST, data.model_dump_json(indent=2).encode())
        return folder

    def manifest(self, model_id: str, party_id: str) -> Manifest:
        """Raises:
        UnknownModel: this party holds no such model (never trained here, or deleted).
        ModelError: its manifest is unreadable."""
        path = self.folder(model_id) / MANIFEST
        if not path.is_file():
            raise UnknownModel(
                f"party '{party_id}' holds no part of model {model_id} (it was deleted, or "
                "trained without this party); list the models with `vfl models`"
            )
        try:
            return Manifest.model_validate_json(path.read_bytes())
        except (ValidationError, OSError):
            raise ModelError(
                f"party '{party_id}': its manifest of model {model_id} is unreadable; "
                "delete the model and train it again"
            ) from None

    def load(self, model_id: str, party_id: str) -> tuple[Manifest, dict[str, Any]]:
        """This party's manifest and part of `model_id`, checked to belong together.

        Raises:
            ModelError: missing, deleted, corrupt, or another party's.
        """
        manifest = self.manifest(model_id, party_id)
        where = f"party '{party_id}': part of model {model_id}"
        try:
            ck = decode_checkpoint((self.folder(model_id) / PART).read_bytes(), where)
        except OSError:
            raise ModelError(f"{where} is missing; delete the model and train it again") from None
        except Exception as exc:  # noqa: BLE001 - CheckpointError names the problem
            raise ModelError(str(exc)) from None
        if (ck.job_id, ck.party_id, ck.spec_hash) != (model_id, party_id, manifest.spec_hash):
            raise ModelError(f"{where} does not match its manifest; it was not loaded")
        return manifest, ck.state

    def problem(self, model_id: str, party_id: str) -> str:
        """Empty if this party's part of `model_id` is whole (its manifest reads, its part
        file is there and matches its hash; nothing is unpickled), else why not and the
        fix; names the party and the model, never a path."""
        where = f"party '{party_id}': part of model {model_id}"
        fix = f"delete the model (`vfl models delete {model_id}`) and train it again"
        try:
            self.manifest(model_id, party_id)
            verify_checkpoint((self.folder(model_id) / PART).read_bytes(), where)
        except ModelError as exc:
            return f"{exc}" if "train it again" in str(exc) else f"{exc}; {fix}"
        except CheckpointError as exc:
            return f"{exc}; {fix}"
        except OSError:
            return f"{where} is missing; {fix}"
        return ""

    def stamp(self, model_id: str) -> tuple[int, ...]:
        """What changes when the files of `model_id` change (sizes, times, inodes): a
        `problem` found for one stamp holds until the stamp changes."""
        stamp: list[int] = []
        for name in (MANIFEST, PART):
            try:
                st = (self.folder(model_id) / name).stat()
            except OSError:
                stamp += [-1, -1, -1]
                continue
            stamp += [st.st_size, st.st_mtime_ns, st.st_ino]
        return tuple(stamp)

    def unreadable(self, party_id: str) -> dict[str, str]:
        """The models whose manifest is here but unreadable: model id -> the problem."""
        if not self.root.is_dir():
            return {}
        found = {}
        for folder in self.root.iterdir():
            try:
                Manifest.model_validate_json((folder / MANIFEST).read_bytes())
            except FileNotFoundError:
                continue  # an unfinished write
            except (ValidationError, OSError):
                found[folder.name] = (
                    f"party '{party_id}': its manifest of model {folder.name} is unreadable; "
                    f"delete the model (`vfl models delete {folder.name}`) and train it again"
                )
        return found

    def list(self) -> list[Manifest]:
        """Every model this party holds a complete part of, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for folder in self.root.iterdir():
            try:
                found.append(Manifest.model_validate_json((folder / MANIFEST).read_bytes()))
            except (ValidationError, OSError):
                continue
        return sorted(found, key=lambda m: (m.created_at, m.model_id))

    def drift(self, model_id: str) -> dict[str, int]:
        """The drift counts of the rows `model_id` scored here since it was kept (zeros
        when none were counted or the file is unreadable)."""
        try:
            saved = json.loads((self.folder(model_id) / DRIFT).read_text())
        except (OSError, ValueError):
            saved = {}
        return {k: int(saved.get(k, 0)) if isinstance(saved, dict) else 0 for k in DRIFT_KINDS}

    def add_drift(self, model_id: str, counts: dict[str, int]) -> dict[str, int]:
        """Add `counts` (`preprocess.drift.Drift.totals`) to `model_id`'s drift counts."""
        total = self.drift(model_id)
        for kind in DRIFT_KINDS:
            total[kind] += int(counts.get(kind, 0))
        folder = self.folder(model_id)
        if folder.is_dir():
            write_atomically(folder / DRIFT, json.dumps(total).encode())
        return total

    def keep_stability(
        self, model_id: str, job_id: str, columns: dict[str, float], scores: float | None
    ) -> None:
        """Keep prediction `job_id`'s stability index of each column (and of the scores)
        as the newest of `model_id`: the party's own record, read by its operator."""
        folder = self.folder(model_id)
        if folder.is_dir():
            kept = {"job": job_id, "columns": columns, "scores": scores}
            write_atomically(folder / STABILITY, json.dumps(kept, indent=2).encode())

    def delete(self, model_id: str) -> bool:
        """Drop this party's part of `model_id`; returns whether it held one."""
        folder = self.folder(model_id)
        if not folder.exists():
            return False
        (folder / MANIFEST).unlink(missing_ok=True)  # unlisted first, then gone
        shutil.rmtree(folder, ignore_errors=True)
        return True


def model_columns(preprocessor: Preprocessor) -> tuple[Column, ...]:
    """The columns a model reads, in order: its numeric features, then its categorical
    columns with their number of codes."""
    if preprocessor.sparse is not None:
        return tuple(Column(name=name, kind="dense") for name in preprocessor.sparse.names)
    names = [c.name for c in preprocessor.numeric] + [c.name for c in preprocessor.binned]
    dense = [Column(name=name, kind="dense") for name in names]
    cats = [
        Column(name=c.name, kind="categorical", cardinality=c.cardinality)
        for c in preprocessor.categorical
    ]
    return tuple(dense + cats)
