"""Exponential forgetting: the lazy decay clock and per-word recent activity (issue 4).

docs/design.md, "Forgetting, windows, open vocabularies", gives the method.

:class:`DecayClock` is the bookkeeping every forgetting statistic shares. A sum decayed with
half-life h, ``sum_d 2^(-(T - t_d) / h) x_d``, would need every stored number multiplied by a
factor per document (O(V^2) per document for the co-occurrence sums). Instead the stored values
are ``2^((T - epoch) / h)`` times the true ones: a document is added with weight
``2^((t_d - epoch) / h)``, readers multiply by :meth:`DecayClock.scale`, and the stored values
are settled (divided, epoch moved to now) before the exponent passes 256, long before float64
overflows (2^1023). Time t is counted in ``"documents"`` (t_d = 1, 2, ... in arrival order) or
in ``"stream"`` time (t_d = the document's own timestamp, in seconds; T = the latest seen), so
a half-life can be "500 documents" or "one day of the stream", whatever the arrival rate.

The co-occurrence sums of a forgetting model (:class:`~streamtopics.statistics.cooccurrence.CooccurrenceStats`
with ``half_life``) need that long memory for precise rows, but a topic that stopped keeps its
anchor words' decayed document frequency above the candidate threshold for log2(stationary df /
threshold) half-lives, and during that time its anchor competes with the anchor of the topic
that replaced it for the K slots (K + 1 vertices, K anchors: FastAnchorWords may drop a live
topic instead). :class:`DecayedCounter` keeps, in O(V) memory and O(distinct words) per
document, each word's document frequency decayed with a shorter ``activity_half_life``; the
model lets only words whose *recent* frequency, rescaled to the long half-life, passes the
threshold be anchor candidates. A stopped topic then leaves the candidates h /
activity_half_life times sooner, and a new one enters as soon; the rows themselves still come
from the long-memory sums.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

MAX_EXPONENT = 256.0
HALF_LIFE_UNITS = ("documents", "stream")


class DecayClock:
    """Now (``clock``) and when the stored values were last true (``epoch``) for lazily decayed sums.

    >>> clock = DecayClock(half_life=2.0)
    >>> clock.weights(clock.times(3), settle=None).tolist()   # documents 1, 2, 3
    [1.4142135623730951, 2.0, 2.8284271247461903]
    >>> clock.scale()   # stored * scale = true: the newest document weighs 1
    0.3535533905932738
    """

    def __init__(self, half_life: float, unit: str = "documents"):
        half_life = float(half_life)
        if not half_life > 0 or not np.isfinite(half_life):
            raise ValueError("half_life must be a positive number")
        if unit not in HALF_LIFE_UNITS:
            raise ValueError(f"half-life unit must be one of {HALF_LIFE_UNITS}")
        self.half_life, self.unit = half_life, unit
        self.clock = 0.0  # documents counted, or the latest stream time seen
        self.epoch = 0.0

    def times(self, n_docs: int, stream_times=None) -> np.ndarray:
        """The times of the next ``n_docs`` documents: their arrival indices, or their stream
        times. The clock never goes back: a missing time (NaN) or one older than the latest
        seen is taken as the latest seen."""
        if self.unit == "documents":
            return self.clock + 1.0 + np.arange(n_docs)
        if stream_times is None:
            return np.full(n_docs, self.clock)
        times = np.array(stream_times, dtype=np.float64)
        if times.shape != (n_docs,):
            raise ValueError("one stream time per document")
        return np.maximum(np.maximum.accumulate(np.where(np.isnan(times), -np.inf, times)), self.clock)

    def scale(self) -> float:
        """Multiply stored values by this to get the true decayed values."""
        return float(2.0 ** (-(self.clock - self.epoch) / self.half_life))

    def weights(self, times: np.ndarray, settle: Callable[[float], None] | None,
                max_exponent: float = MAX_EXPONENT) -> np.ndarray:
        """Advance the clock to the newest of ``times`` and return the documents' stored
        weights, first settling (``settle(factor)`` multiplies every stored value by factor)
        if the exponent would pass ``max_exponent`` (sums of a weight's higher powers need a
        lower one)."""
        end = max(self.clock, float(times.max())) if times.size else self.clock
        if (end - self.epoch) / self.half_life > max_exponent:
            self.clock = end
            self.settle(settle)
        self.clock = end
        return 2.0 ** ((times - self.epoch) / self.half_life)

    def settle(self, settle: Callable[[float], None] | None) -> None:
        """Make the stored values true (scale 1) at the current time."""
        if self.epoch != self.clock:
            if settle is not None:
                settle(self.scale())
            self.epoch = self.clock

    def settle_for_merge(self, other: "DecayClock", settle_mine, settle_theirs) -> None:
        """Before adding another sub-stream's stored values to ours: both sub-streams are taken
        to end now (documents add up; stream times run in parallel, so the later one is now),
        both stored values are settled onto now, and this clock moves there."""
        if (self.half_life, self.unit) != (other.half_life, other.unit):
            raise ValueError("cannot merge sums decayed with different half-lives")
        if self.unit == "stream":
            self.clock = other.clock = max(self.clock, other.clock)
        self.settle(settle_mine)
        other.settle(settle_theirs)
        if self.unit == "documents":
            self.clock = self.epoch = self.clock + other.clock

    def state_dict(self) -> dict:
        return {"half_life": np.float64(self.half_life), "clock": np.float64(self.clock),
                "epoch": np.float64(self.epoch), "unit": np.str_(self.unit)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "DecayClock":
        clock = cls(float(state["half_life"]), str(state.get("unit", "documents")))
        clock.clock, clock.epoch = float(state["clock"]), float(state["epoch"])
        return clock


class DecayedCounter:
    """``sum_d 2^(-(T - t_d) / half_life)`` per word over the documents d containing it.

    >>> c = DecayedCounter(3, half_life=1.0)
    >>> c.update(np.array([0, 1, 3]), np.array([0, 1, 2], np.int32))   # doc 1: word 0; doc 2: 1, 2
    >>> c.values().tolist()
    [0.5, 1.0, 1.0]
    """

    def __init__(self, n_words: int, half_life: float, unit: str = "documents"):
        self.decay = DecayClock(half_life, unit)
        self.stored = np.zeros(int(n_words))

    @property
    def half_life(self) -> float:
        return self.decay.half_life

    def _rescale(self, factor: float) -> None:
        self.stored *= factor

    def update(self, indptr: np.ndarray, indices: np.ndarray, stream_times=None) -> None:
        n_docs = indptr.size - 1
        if n_docs == 0:
            return
        weights = self.decay.weights(self.decay.times(n_docs, stream_times), self._rescale)
        entry_weight = np.repeat(weights, np.diff(indptr))
        self.stored += np.bincount(indices[indptr[0]:indptr[-1]], weights=entry_weight, minlength=self.stored.size)

    def grow(self, n_words: int) -> None:
        """Zero counters for words added at the end."""
        self.stored = np.concatenate([self.stored, np.zeros(n_words - self.stored.size)])

    def clear(self, word: int) -> None:
        """Forget one word (its slot goes to another word)."""
        self.stored[word] = 0.0

    def values(self) -> np.ndarray:
        return self.stored * self.decay.scale()

    def merge(self, other: "DecayedCounter") -> "DecayedCounter":
        self.decay.settle_for_merge(other.decay, self._rescale, other._rescale)
        self.stored += other.stored
        return self

    def state_dict(self) -> dict:
        return {"stored": self.stored, **self.decay.state_dict()}

    @classmethod
    def from_state_dict(cls, state: dict) -> "DecayedCounter":
        counter = cls(state["stored"].size, float(state["half_life"]), str(state.get("unit", "documents")))
        counter.stored = np.array(state["stored"], dtype=np.float64)
        counter.decay = DecayClock.from_state_dict(state)
        return counter
