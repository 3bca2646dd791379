"""Per-word recent activity for forgetting models (issue 4, DESIGN 2.7).

The co-occurrence sums of a forgetting model (:class:`~streamtopics.cooccurrence.CooccurrenceStats`
with ``half_life``) decay with half-life h. Their rows need that long memory to be precise, but a
topic that stopped keeps its anchor words' decayed document frequency above the candidate
threshold for log2(stationary df / threshold) half-lives, and during that time its anchor competes
with the anchor of the topic that replaced it for the K slots (K + 1 vertices, K anchors:
FastAnchorWords may drop a live topic instead). :class:`DecayedCounter` keeps, in O(V) memory and
O(distinct words) per document, each word's document frequency decayed with a shorter
``activity_half_life``; the model lets only words whose *recent* frequency, rescaled to the long
half-life, passes the threshold be anchor candidates. A stopped topic then leaves the candidates
h / activity_half_life times sooner, and a new one enters as soon; the rows themselves still come
from the long-memory sums.

The same lazy scaling as the sums: increments are multiplied by 2^((t - epoch) / half_life) and
the stored values are divided when read and settled before the exponent passes 256.
"""

from __future__ import annotations

import numpy as np

_MAX_EXPONENT = 256.0


class DecayedCounter:
    """``sum_d 2^(-(T - t_d) / half_life)`` per word over the documents d containing it.

    >>> c = DecayedCounter(3, half_life=1.0)
    >>> c.update(np.array([0, 1, 3]), np.array([0, 1, 2], np.int32))   # doc 1: word 0; doc 2: 1, 2
    >>> c.values().tolist()
    [0.5, 1.0, 1.0]
    """

    def __init__(self, n_words: int, half_life: float):
        if not half_life > 0:
            raise ValueError("half_life must be positive")
        self.half_life = float(half_life)
        self.stored = np.zeros(int(n_words))
        self.clock = 0  # documents counted
        self.epoch = 0.0

    def settle(self) -> None:
        self.stored *= 2.0 ** (-(self.clock - self.epoch) / self.half_life)
        self.epoch = float(self.clock)

    def update(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        n_docs = indptr.size - 1
        limit = max(1, int(_MAX_EXPONENT * self.half_life / 2))
        for start in range(0, n_docs, limit):
            stop = min(start + limit, n_docs)
            if (self.clock + stop - start - self.epoch) / self.half_life > _MAX_EXPONENT:
                self.settle()
            t = self.clock + 1.0 + np.arange(stop - start)
            weights = 2.0 ** ((t - self.epoch) / self.half_life)
            a, b = indptr[start], indptr[stop]
            entry_weight = np.repeat(weights, np.diff(indptr[start:stop + 1]))
            self.stored += np.bincount(indices[a:b], weights=entry_weight, minlength=self.stored.size)
            self.clock += stop - start

    def values(self) -> np.ndarray:
        return self.stored * 2.0 ** (-(self.clock - self.epoch) / self.half_life)

    def merge(self, other: "DecayedCounter") -> "DecayedCounter":
        self.settle()
        other.settle()
        self.stored += other.stored
        self.clock += other.clock
        self.epoch = float(self.clock)
        return self

    def state_dict(self) -> dict:
        return {"stored": self.stored, "half_life": np.float64(self.half_life),
                "clock": np.int64(self.clock), "epoch": np.float64(self.epoch)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "DecayedCounter":
        counter = cls(state["stored"].size, float(state["half_life"]))
        counter.stored = np.array(state["stored"], dtype=np.float64)
        counter.clock = int(state["clock"])
        counter.epoch = float(state["epoch"])
        return counter
