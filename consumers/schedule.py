"""When periodic work is due, and how long to wait before retrying a failed connection.

:class:`Every` is the consumers' one trigger for refreshes and checkpoints: the model's own
:class:`streamtopics.policy.RefreshPolicy` (after N units of work or T seconds, on the wall
clock), plus the rule that it fires only if some work was done since it last fired.
:class:`Backoff` spaces reconnection attempts.
"""

from __future__ import annotations

import random

from streamtopics.policy import RefreshPolicy


class Every:
    """Due after ``every_count`` units of work or ``every_seconds`` of wall time (0 turns either
    off), whichever comes first, and only if some work was done since it last fired.

    >>> every = Every(every_count=100)
    >>> every.due(99), every.due(100)
    (False, True)
    >>> every.reset(100); every.due(100)
    False
    """

    def __init__(self, every_count: int = 0, every_seconds: float = 0.0, count: int = 0):
        self.policy = RefreshPolicy(int(every_count or 0) or None, float(every_seconds or 0.0) or None, clock="wall")
        self.reset(count)

    def reset(self, count: int) -> None:
        """It fired (or the work was done otherwise) at ``count``: count and time from here."""
        self.count = count
        self.policy.restart(count)

    def due(self, count: int) -> bool:
        return count > self.count and self.policy.due(count)


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
