"""Which attacks `vfl attack` runs on a job's recorded views: its model kind's.

    evaluate(views, protocol, permuted, seed, kind)   every attack of the kind

A new model kind adds its attacks' module beside `attack.network` and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

from vfl.attack.errors import DataError
from vfl.attack.harness import AttackRow
from vfl.attack.network import attacks as network_attacks
from vfl.attack.trees import attacks as tree_attacks
from vfl.attack.views import PartyView

Attacks = Callable[[dict[str, PartyView], str, dict[str, PartyView] | None, int], list[AttackRow]]
ATTACKS: MappingProxyType[str, Attacks] = MappingProxyType(
    {"network": network_attacks, "trees": tree_attacks}
)
# the kinds whose attacks compare a second run on permuted labels (the distinguisher)
COMPARED = frozenset({"network"})


def evaluate(
    views: dict[str, PartyView],
    protocol: str,
    permuted: dict[str, PartyView] | None = None,
    seed: int = 0,
    kind: str = "network",
) -> list[AttackRow]:
    """Every attack of model kind `kind` on the views of one job (and, for those that
    compare, of the same job on permuted labels).

    Raises:
        DataError: no attacks are known for `kind`.
    """
    if kind not in ATTACKS:
        raise DataError(f"vfl attack knows no attacks on {kind} models ({sorted(ATTACKS)})")
    return ATTACKS[kind](views, protocol, permuted, seed)
