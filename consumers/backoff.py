"""How long to wait before retrying a failed connection (when periodic work is due is
:class:`streamtopics.schedule.RefreshSchedule`'s to say)."""

from __future__ import annotations

import random


class Backoff:
    """Exponential back-off from ``initial`` to ``maximum`` seconds, each delay drawn between
    half and all of the current ceiling so that restarted consumers do not retry in step."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0):
        self.initial, self.maximum = float(initial), float(maximum)
        self.attempts = 0

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * 2 ** self.attempts)
        self.attempts += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0
