"""Weight of evidence and information value of one binned column, from its counts.

For bin i with e_i events (label 1) and n_i non-events, over a column's E events and N
non-events in all:

    WOE_i = ln( (e_i' / E) / (n_i' / N) )
    IV    = sum_i (e_i' / E - n_i' / N) WOE_i

where e_i' = e_i and n_i' = n_i, except in a bin that holds rows but no event or no
non-event, where both get + 0.5 (`SMOOTHING`: the bin's WOE stays finite; E and N are
not changed). A bin that holds no row at all says nothing: its WOE is 0 and it adds 0 to
the IV. With no event or no non-event in all the rows there is no IV (`WoeError`).

`monotone_starts` merges neighbouring bins (pool-adjacent-violators on the event rate)
until the rate rises, or falls, monotonically; `select` keeps a party's columns by IV.
Pure functions over counts: the active party runs them on its own columns' counts and on
the passive parties' decrypted ones alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from vfl.party.errors import DataError

SMOOTHING = 0.5  # added to both counts of a bin that lacks events or non-events


class WoeError(DataError):
    """The rows hold no event or no non-event: WOE and IV are undefined."""


def woe_iv(events: Sequence[int], non_events: Sequence[int]) -> tuple[list[float], float]:
    """(WOE per bin, IV) of one column's bins, as the module doc defines them.

    Raises:
        WoeError: no event or no non-event in all the bins.
        ValueError: the two lists differ in length, or a count is negative.
    """
    e = np.asarray(events, dtype=np.float64)
    n = np.asarray(non_events, dtype=np.float64)
    if e.shape != n.shape or e.ndim != 1:
        raise ValueError("events and non-events need one count per bin each")
    if (e < 0).any() or (n < 0).any():
        raise ValueError("a bin count is negative")
    total_e, total_n = float(e.sum()), float(n.sum())
    if total_e == 0 or total_n == 0:
        what = "event (label 1)" if total_e == 0 else "non-event (label 0)"
        raise WoeError(
            f"the rows analysed hold no {what}: WOE and IV need both classes of a binary label"
        )
    woe: list[float] = []
    iv = 0.0
    for ei, ni in zip(e.tolist(), n.tolist(), strict=True):
        if ei == 0 and ni == 0:
            woe.append(0.0)
            continue
        if ei == 0 or ni == 0:
            ei, ni = ei + SMOOTHING, ni + SMOOTHING
        pe, pn = ei / total_e, ni / total_n
        w = math.log(pe / pn)
        woe.append(w)
        iv += (pe - pn) * w
    return woe, iv


def monotone_starts(events: Sequence[int], non_events: Sequence[int]) -> list[int]:
    """The first bin of each group of neighbouring bins whose merged event rates rise (or
    fall, whichever the column's ends point to) monotonically: pool-adjacent-violators,
    weighted by the bins' rows. Bins without rows join their neighbours."""
    e = [float(v) for v in events]
    rows = [float(a + b) for a, b in zip(events, non_events, strict=True)]
    if len(e) <= 1:
        return [0] * len(e)
    rates = [ei / r if r else None for ei, r in zip(e, rows, strict=True)]
    known = [r for r in rates if r is not None]
    rising = len(known) < 2 or known[-1] >= known[0]
    blocks: list[list[float]] = []  # [first bin, events, rows]
    for i in range(len(e)):
        blocks.append([i, e[i], rows[i]])
        while len(blocks) > 1 and _violates(blocks[-2], blocks[-1], rising):
            last = blocks.pop()
            blocks[-1][1] += last[1]
            blocks[-1][2] += last[2]
    return [int(b[0]) for b in blocks]


def _violates(left: list[float], right: list[float], rising: bool) -> bool:
    if left[2] == 0 or right[2] == 0:
        return True  # a bin without rows joins its neighbour
    a, b = left[1] / left[2], right[1] / right[2]
    return a > b if rising else a < b


def merged(counts: Sequence[int], starts: Sequence[int]) -> list[int]:
    """Per-bin counts summed over the groups that begin at `starts`."""
    bounds = [*starts, len(counts)]
    return [int(sum(counts[bounds[g] : bounds[g + 1]])) for g in range(len(starts))]


def select(ivs: Mapping[str, float | None], iv_min: float | None, top: int | None) -> set[str]:
    """The columns a party keeps: IV at least `iv_min` (a column without an IV: 0), at
    most its `top` best (ties by name), and at least its best one (a party's model needs
    an input)."""
    scored = {name: (iv if iv is not None else 0.0) for name, iv in ivs.items()}
    ranked = sorted(scored, key=lambda n: (-scored[n], n))
    kept = [n for n in ranked if iv_min is None or scored[n] >= iv_min]
    return set((kept if top is None else kept[:top]) or ranked[:1])
