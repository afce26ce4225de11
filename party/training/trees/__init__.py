"""Gradient-boosted trees across parties (`model: {trees: {...}}`; docs/protocols.md,
"Gradient-boosted trees"): the active party holds the labels, the (g, h) of every row,
the trees' structure and leaf values; every party bins its own columns and keeps its own
splits, known to the others only by opaque ids; the row partitions of splits cross.

    active, passive     the roles (`ActiveTrees`, `PassiveTrees`): training and scoring
    active_round        one round at the active party, level by level
    histograms          the histogram exchange, the one seam between the learner and its
                        protocol (`split`: in the clear; `secureboost`: encrypted, to come)
    levels              a party's open nodes of a round (`NodeBook`): histograms by
                        subtraction, candidates, partitions
    candidates          a node's candidate splits from its bin counts (`Layout`)
    columns             a party's bin codes (`BinnedColumns`) and its splits (`Splits`)
    grower, forest      gains and leaf values (`Growth`); the trees (`Tree`, `Forest`)
    objective, wire     per-task (g, h) and loss; the messages
"""

from vfl.party.training.trees.active import ActiveTrees
from vfl.party.training.trees.passive import PassiveTrees

__all__ = ["ActiveTrees", "PassiveTrees"]
