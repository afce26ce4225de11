"""What online scoring can take: a model's micro-batches measured, and the time a new
request would wait for its answer estimated from them (`party.inference.batcher` admits
a request only if that time fits its deadline).

A micro-batch of n ids runs as ceil(n / chunk) exchanges with the passive parties
(`chunk`: 64 ids, `session.MAX_BATCH_IDS`), one after another, and an exchange costs
about the same whether it carries one id or 64 of a split model, more with more ids of a
blindfl one. So the cost is kept per exchange, as the median of the last `RECENT`
batches at least half full (what a burst runs), and of smaller batches only until a
fuller one was measured: a quiet model's last batches of one id never make a burst look
cheaper than it is once a full one ran, and a blindfl model whose lone calls were cheap
learns the cost of a full exchange from the first one. A median, not a mean: one batch
that a pause stretched (a garbage collection, the machine's other work) does not halve
what the party admits, while a change that lasts shows within a few batches. Work a
batch's runner reports as one-off (a scoring session opened) is not counted
(`MicroBatcher.discount`).
"""

from __future__ import annotations

import math
import statistics
from collections import deque

PRIOR_S = 0.05  # an exchange's seconds before any batch was measured
RECENT = 9  # batches the median is taken over


class BatchCost:
    """The measured seconds of a model's exchanges, and what n ids would take. Not
    thread-safe: its batcher guards it."""

    def __init__(self, chunk: int, prior_s: float = PRIOR_S) -> None:
        self.chunk = chunk
        self._full: deque[float] = deque(maxlen=RECENT)  # per exchange, batches half full
        self._small: deque[float] = deque(maxlen=RECENT)  # per exchange, smaller batches
        self._exchange_s = prior_s

    def exchanges(self, ids: int) -> int:
        return max(1, math.ceil(ids / self.chunk))

    def add(self, ids: int, seconds: float) -> None:
        """Measure a batch of `ids` ids that took `seconds`."""
        each = max(0.0, seconds) / self.exchanges(ids)
        (self._full if 2 * ids >= self.chunk else self._small).append(each)
        self._exchange_s = statistics.median(self._full or self._small)

    @property
    def exchange_s(self) -> float:
        """An exchange's seconds: of a full one once measured, else of a small one."""
        return self._exchange_s

    def seconds(self, ids: int) -> float:
        """About how long `ids` ids queued for the model take, in full batches."""
        return 0.0 if ids <= 0 else self.exchanges(ids) * self.exchange_s
