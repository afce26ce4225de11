"""The tree protocols by name: each one's active and passive sides of the histogram
exchange (`histograms`: the seam; `encrypted`: secureboost's)."""

from __future__ import annotations

from collections.abc import Callable

from vfl.party.training.context import RoleContext
from vfl.party.training.trees.encrypted import EncryptedActive, EncryptedPassive
from vfl.party.training.trees.histograms import ActiveSide, PassiveSide, PlainActive, PlainPassive

# protocol -> (the active party's side, given the task's kind and its trees a round;
# a passive party's)
SIDES: dict[
    str, tuple[Callable[[RoleContext, str, int], ActiveSide], Callable[[RoleContext], PassiveSide]]
] = {
    "split": (lambda ctx, kind, trees: PlainActive(), lambda ctx: PlainPassive()),
    "secureboost": (EncryptedActive, EncryptedPassive),
}
