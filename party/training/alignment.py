"""Row alignment until private set intersection lands: all parties must hold the same id set.

The active party sends a fresh random key; each passive party returns an HMAC-SHA256 of
its sorted id column under that key, so ids never cross the wire. Equal digests mean equal
id sets; every party then orders its rows by id.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import numpy as np

from party.errors import JobError
from secure.channel import Channel
from secure.payload import (
    control_from_payload,
    control_to_payload,
    digest_from_payload,
    digest_to_payload,
)


def id_set_digest(key: bytes, ids: np.ndarray) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for i in sorted(ids):
        mac.update(str(i).encode() + b"\n")
    return mac.digest()


def aligned_order(ids: np.ndarray) -> np.ndarray:
    """Row positions sorted by id text: the common order once the id sets match.

    Raises:
        JobError: the id column has duplicates.
    """
    keys = ids.astype(str)
    uniq = np.unique(keys)
    if len(uniq) != len(keys):
        raise JobError(
            f"the id column has {len(keys) - len(uniq)} duplicate id(s); ids must be unique "
            "per row: deduplicate the dataset"
        )
    return np.argsort(keys, kind="stable")


def align_active(channel: Channel, passives: list[str], ids: np.ndarray, timeout: float):
    key = secrets.token_bytes(32)
    order = aligned_order(ids)
    for p in passives:
        channel.send(p, "align/key", control_to_payload({"key": key.hex()}))
    mine = id_set_digest(key, ids)
    problems = []
    for p in passives:
        digest, count = digest_from_payload(channel.recv(p, "align/digest", timeout))
        if not hmac.compare_digest(digest, mine):
            problems.append(f"'{p}' ({count} ids vs {len(ids)} here)")
    verdict = "ok" if not problems else "mismatch: " + ", ".join(problems)
    for p in passives:
        channel.send(p, "align/verdict", control_to_payload({"verdict": verdict}))
    if problems:
        raise JobError(_mismatch_message(problems))
    return order


def align_passive(channel: Channel, active: str, ids: np.ndarray, timeout: float):
    order = aligned_order(ids)
    fields = control_from_payload(channel.recv(active, "align/key", timeout), ["key"])
    try:
        key = bytes.fromhex(fields["key"])
    except ValueError:
        raise JobError("the active party sent a malformed alignment key") from None
    channel.send(active, "align/digest", digest_to_payload(id_set_digest(key, ids), len(ids)))
    verdict = control_from_payload(channel.recv(active, "align/verdict", timeout), ["verdict"])
    if verdict["verdict"] != "ok":
        raise JobError(_mismatch_message([verdict["verdict"]]))
    return order


def _mismatch_message(problems: list[str]) -> str:
    return (
        "the parties' id sets differ: " + "; ".join(problems) + ". Until private set "
        "intersection is enabled every party must hold exactly the same ids; restrict each "
        "dataset to the common ids"
    )
