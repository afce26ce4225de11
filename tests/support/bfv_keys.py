"""TESTS ONLY: pin the BFV secret keys the MatMul layer's parties generate, and read them
back from their checkpoints (as `blindfl_keys` does for the Paillier key pairs: a bfv
party's initial shares depend on its BFV secret key too)."""

from __future__ import annotations

from vfl.contract.spec import JobSpec
from vfl.party.state import StateDir
from vfl.secure.lattice.bfv import BfvContext, KeyPair

SEAM = "vfl.secure.source_layers.matmul.bfv.common.generate_keys"


def pin_bfv_keys(monkeypatch, secrets: dict[str, bytes] | None) -> None:
    """Make the BFV layers use these saved secret keys (by party) instead of new ones;
    with None, any key generation fails the test."""

    def generate(ctx: BfvContext, owner: str) -> KeyPair:
        if secrets is None:
            raise AssertionError(f"party '{owner}' generated a BFV key while resuming")
        return KeyPair(ctx, secrets[owner])

    monkeypatch.setattr(SEAM, generate)


def checkpointed_bfv_secrets(
    states: dict[str, StateDir], job_id: str, spec: JobSpec
) -> dict[str, bytes]:
    """Every party's BFV secret key from its newest checkpoint of `job_id`."""
    out = {}
    for party, state in states.items():
        ck = state.load(job_id, state.rounds(job_id)[-1], spec.spec_hash(), party)
        out[party] = bytes(ck.state["trainer"]["src"]["secret"])
    return out
