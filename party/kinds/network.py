"""Networks: each party's bottom model (`split`) or federated source layer (`blindfl`)
under the active party's top model (docs/protocols.md). The roles live in
`party.training.split` and `party.training.blindfl`, their torch parts in
`party.training.nets`.

What the model holds, for the limits: a parameter holds 4 bytes for its weight, its
gradient and each optimiser slot (adagrad 1, adam 2, sgd 0); a batch's activations
three copies of every layer's outputs; a blindfl job adds its source layer's ciphertexts
(a column's `out_dim` of them, mod n^2) and `BLINDFL_BYTES` (bench/results/scale_rows.txt:
a 1e5-row blindfl epoch's bank tree peaked 278 MB above split's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from vfl.contract.spec import JobSpec
from vfl.contract.spec.data import Preprocess
from vfl.party.kinds.base import (
    ModelEstimate,
    ModelKind,
    ScoringRole,
    TrainingRole,
    Y,
    active_labels,
)
from vfl.party.state.model_store import key_fingerprint
from vfl.party.tables.preprocess.fit import check_secure_bounds
from vfl.party.tables.table import RawTable
from vfl.party.training.blindfl import BlindActiveTrainer, BlindPassiveTrainer
from vfl.party.training.context import RoleContext
from vfl.party.training.split.active import ActiveTrainer
from vfl.party.training.split.passive import PassiveTrainer
from vfl.party.training.task import Labels, Task

PARAMETER_BYTES = 4
SLOTS = {"adagrad": 1, "adam": 2, "sgd": 0}  # optimiser state per parameter
BLINDFL_BYTES = 256 << 20  # a blindfl job's obfuscator pools, key tables and workers' share
TRAINING_ONLY = ("opt", "updater", "history", "rows")  # what a trained model's part leaves out


class NetworkRole(TrainingRole, ScoringRole, Protocol):
    """A network's role: the same object trains (`run`) and scores (`score`)."""


ActiveRole = Callable[[RoleContext, Labels, Task], NetworkRole]
PassiveRole = Callable[[RoleContext], NetworkRole]
ROLES: dict[str, tuple[ActiveRole, PassiveRole]] = {  # protocol -> (active, passive)
    "split": (ActiveTrainer, PassiveTrainer),
    "blindfl": (BlindActiveTrainer, BlindPassiveTrainer),
}
KEYED = ("blindfl",)  # the protocols that exchange keys before training


class Networks(ModelKind):
    name = "network"

    def keyed(self, spec: JobSpec) -> bool:
        return spec.protocol in KEYED

    def check_rows(
        self, spec: JobSpec, raw: RawTable, mode: Preprocess | None, party_id: str
    ) -> None:
        if self.keyed(spec):  # the source layers' fixed point holds every feature
            check_secure_bounds(raw, mode, party_id)

    def trainer(self, ctx: RoleContext, role: str, labels: Y, val_labels: Y) -> TrainingRole:
        active, passive = ROLES[ctx.spec.protocol]
        if role != "active":
            return passive(ctx)
        encoded, task = active_labels(ctx, labels, val_labels)
        return active(ctx, encoded, task)

    def scorer(self, ctx: RoleContext, role: str, task: Task | None) -> ScoringRole:
        active, passive = ROLES[ctx.spec.protocol]
        if role != "active":
            return passive(ctx)
        if task is None:
            raise ValueError("the active party scores with the model's task")
        return active(ctx, Labels(), task)

    def model_part(self, trainer: TrainingRole) -> dict[str, Any]:
        """Its models, key pair and shares, not its optimiser, local-update cache or
        history."""
        return {k: v for k, v in trainer.state_dict().items() if k not in TRAINING_ONLY}

    def key_fingerprint(self, trainer: TrainingRole) -> str:
        keypair = getattr(trainer, "keypair", None)
        return "" if keypair is None else key_fingerprint(keypair.public.n)

    def estimate(
        self, spec: JobSpec, party_id: str, columns: int, training: bool, rows: int | None = None
    ) -> ModelEstimate:
        if not training:
            return ModelEstimate(0, 0)
        widths = self.widths(spec, party_id, columns)
        parameters = sum(a * b + b for a, b in widths)
        activations = spec.train.batch_size * sum(b for _, b in widths) * 3 * PARAMETER_BYTES
        held = parameters * self.parameter_bytes(spec) + activations
        if self.keyed(spec):  # the source layer's ciphertexts, mod n^2
            held += columns * spec.model.source.out_dim * spec.crypto.key_bits // 4
            held += BLINDFL_BYTES
        return ModelEstimate(parameters, held)

    def parameters(
        self, spec: JobSpec, party_id: str, width: int, cardinalities: Sequence[int]
    ) -> int:
        emb = spec.model.source.embedding_dim
        widths = self.widths(spec, party_id, width + emb * len(cardinalities))
        return sum(a * b + b for a, b in widths) + emb * sum(cardinalities)

    def parameter_bytes(self, spec: JobSpec) -> int:
        return PARAMETER_BYTES * (2 + SLOTS[spec.train.optimizer])

    @staticmethod
    def widths(spec: JobSpec, party_id: str, columns: int) -> list[tuple[int, int]]:
        """The (in, out) widths of the linear layers this party builds for `spec` with
        `columns` input columns: its bottom model, and at the active party the top."""
        src, top = spec.model.source, spec.model.top
        out = src.out_dim
        widths = _layers(columns, src.hidden, out) if columns else []
        if spec.party(party_id).role == "active":
            top_in = out * len(spec.parties)
            widths += _layers(top_in, top.hidden, 1 if top.task != "multiclass" else 16)
        return widths


def _layers(width: int, hidden: Sequence[int], out: int) -> list[tuple[int, int]]:
    dims = [width, *hidden, out]
    return list(zip(dims, dims[1:], strict=False))
