"""`vfl attack`'s analysis: published attacks run on what each party of a real job
received, decrypted and held (its recorded view), scored against the truth afterwards.

    views       a party's recorded view (`load_view`, `PartyView`)
    label       label inference by a passive party (Li et al. 2022): norm, direction
    completion  passive model completion (Fu et al. 2022)
    features    feature inference by the active party
    distinguish true-label vs permuted-label transcripts
    harness     who knows what, scoring, verdicts (`AttackRow`, `AttackReport`)
    network     the attacks on a network job's views, by protocol
    kinds       the attacks of each model kind (`evaluate`)
    report      the table, the JSON and the Markdown report
"""

from vfl.attack.errors import AttackError, DataError, ViewError
from vfl.attack.harness import AttackReport, AttackRow
from vfl.attack.kinds import evaluate
from vfl.attack.views import PartyView, load_view

__all__ = [
    "AttackError",
    "AttackReport",
    "AttackRow",
    "DataError",
    "PartyView",
    "ViewError",
    "evaluate",
    "load_view",
]
