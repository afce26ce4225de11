"""A party's recorded view of a job (`vfl party serve --record-views`, used by `vfl
attack`): one `.npz` file per record under `<state_dir>/views/<job>/`, files 0600.

What a party records (the trainers call `RoleContext.view`, a no-op in every other job):
its own aligned ids, inputs and training and validation rows (`own`; the active party
also its labels, for the harness to score attacks after the fact), per training round
what it decoded from the envelopes it received and its own state (`train/r<n>`: the rows,
split's activations and derivatives, blindfl's Z and G at the active party; a tree
passive party's instance space, the tree active party's partitions and validation
decisions of each passive party's splits), what it
decrypted (`dec/<tag>`: at a blindfl passive party the plaintexts of m1 and of the
Embed-MatMul layer's c and de, as floats), and
after training what its own model computes on its rows (`final`; a tree passive
party: its splits' columns, which only the harness reads). The envelopes as they
crossed are the wire audit's (`--audit`); nothing here is sent anywhere.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vfl.party.training.context import View

FLOAT_BITS = 60  # a decrypted integer keeps its leading bits as a float


def ints_as_floats(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Rows of big integers as a float64 matrix, all shifted right by the same number of
    bits so that the largest keeps FLOAT_BITS (their ratios, which scores read, survive)."""
    ints = [[int(v) for v in row] for row in rows]
    top = max((abs(v).bit_length() for row in ints for v in row), default=0)
    shift = max(0, top - FLOAT_BITS)
    return np.array([[float(v >> shift) for v in row] for row in ints], dtype=np.float64)


def _plain(value: Any) -> np.ndarray:
    """An array numpy stores without pickling (text for objects such as string ids)."""
    arr = np.asarray(value)
    return arr.astype(str) if arr.dtype == object else arr


def record_file(folder: Path, name: str) -> Path:
    """The file of record `name` (`train/r12` -> `train_r12.npz`)."""
    return folder / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npz")


class ViewFiles(View):
    """A party's view of one job, written as it happens into `folder`."""

    recording = True

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder = folder
        self._lock = threading.Lock()

    def record(self, name: str, arrays: dict[str, Any]) -> None:
        values = {k: _plain(v) for k, v in arrays.items() if v is not None}
        path = record_file(self.folder, name)
        with self._lock:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **values)  # type: ignore[arg-type]

    def decrypted(self, tag: str, rows: Sequence[Sequence[int]]) -> None:
        self.record(f"dec/{tag}", {"values": ints_as_floats(rows)})


def read_view(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every record of a view folder: file stem -> its arrays."""
    out = {}
    for path in sorted(Path(folder).glob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            out[path.stem] = {k: data[k] for k in data.files}
    return out
