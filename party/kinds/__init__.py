"""Model kinds: the families of model a party trains and scores, behind one seam
(`base.ModelKind`; docs/architecture.md, "Adding a model kind").

    ModelKind, TrainingRole, ScoringRole, ModelEstimate   the seam (`base`)
    Networks        bottom models or source layers under a top network (`network`)
    Trees           a gradient-boosted tree ensemble (`trees`)
    kind_of(spec)   the kind of a job's model; kind_named(name) of a stored part's
"""

from __future__ import annotations

from types import MappingProxyType

from vfl.contract.spec import JobSpec
from vfl.party.errors import ModelError
from vfl.party.kinds.base import ModelEstimate, ModelKind, ScoringRole, TrainingRole
from vfl.party.kinds.network import Networks
from vfl.party.kinds.trees import Trees

# every kind this party runs, by name (a new kind is one more entry)
KINDS = MappingProxyType({kind.name: kind for kind in (Networks(), Trees())})

__all__ = [
    "KINDS",
    "ModelEstimate",
    "ModelKind",
    "Networks",
    "ScoringRole",
    "TrainingRole",
    "Trees",
    "kind_named",
    "kind_of",
]


def kind_of(spec: JobSpec) -> ModelKind:
    """The kind of the model `spec` trains (its model section names it)."""
    return kind_named(spec.model.kind)


def kind_named(name: str) -> ModelKind:
    """Raises:
    ModelError: no kind of that name (a part stored by a newer release, say)."""
    try:
        return KINDS[name]
    except KeyError:
        raise ModelError(
            f"this party trains no model kind '{name}' (it knows {sorted(KINDS)}); "
            "upgrade its daemon to the release that trained the model"
        ) from None
