"""Open vocabulary: admitting words that a stream starts using (issue 4).

Out-of-vocabulary words are tracked by a space-saving sketch (Metwally, Agrawal & El Abbadi 2005)
of ``sketch_size`` counters of document frequency: memory is O(sketch_size) however many distinct
words a stream sends (endless unique junk tokens included). A word whose *guaranteed* document
frequency (its counter minus the counter's possible overestimate) reaches ``admit_df`` is admitted
into the model's vocabulary, while the vocabulary has fewer than ``max_words`` words.

**Retiring words** (forgetting on). Once the vocabulary is full, a word ready for admission takes
the slot of a word that fell out of use: the one with the smallest decayed document frequency,
if that is below ``retire_df`` (default ``admit_df / 4``: a word must have faded to a quarter of
the support that admits one) and it is not an anchor of the current snapshot. The old word's row
and column are cleared (:meth:`~streamtopics.statistics.cooccurrence.CooccurrenceStats.clear_word`) and the
new word starts from zero in that slot, exactly like a word admitted at the end; the retired
word, if it comes back, is an unknown word again and must earn re-admission. Without forgetting
nothing fades, so nothing is retired and a full vocabulary stays as it is.

**How a late word's statistics are handled.** An admitted word gets a new index at the end of the
vocabulary; the packed co-occurrence triangle is grown to the new size (a repack, O(V^2), once per
document that admits words). Its row of Q_sum, its row sum (``word_mass``) and its document
frequency then accumulate over the documents seen *since admission* only. Anchor search and
recovery use the row-normalised row Qbar_w = Q_w / mass_w, i.e. p(w2 | w) estimated over exactly
the documents since admission: numerator and denominator cover the same documents, so the row is
an unbiased estimate of its conditional distribution (as for any word, under a stationary stream)
and the late word can be a sound anchor once its document frequency passes the candidate
threshold (which counts only documents since admission, so a word admitted late is a candidate
only after enough support of its own). What is biased is the *other* words' rows: their entries
in column w miss the co-occurrences from before admission (a fraction of their mass), so p(w | w1)
is underestimated in proportion to how much of w1's mass predates w's admission. With forgetting
on that fraction decays with the half-life; without it, it shrinks as the stream grows. Words of
a topic that is born after admission are unaffected, which is the case this is for.
"""

from __future__ import annotations

import heapq

import numpy as np


class SpaceSaving:
    """Top-frequency tracking of an unbounded set of items in ``capacity`` counters.

    ``count(item)`` overestimates the true count by at most ``error(item)``; an item with a true
    count above N / capacity (N = total offered) is always tracked.

    >>> s = SpaceSaving(2)
    >>> for w in ["a", "b", "a", "c", "a"]:
    ...     s.offer(w)
    >>> s.count("a"), s.guaranteed("a"), "b" in s, len(s)
    (3, 3, False, 2)
    """

    def __init__(self, capacity: int = 1000):
        if capacity < 1:
            raise ValueError("a sketch needs at least one counter")
        self.capacity = int(capacity)
        self.counts: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []  # (count, item), lazily updated

    def __len__(self) -> int:
        return len(self.counts)

    def __contains__(self, item) -> bool:
        return item in self.counts

    def count(self, item) -> int:
        return self.counts.get(item, 0)

    def guaranteed(self, item) -> int:
        return self.counts.get(item, 0) - self.errors.get(item, 0)

    def _pop_min(self) -> tuple[int, str]:
        while True:
            count, item = heapq.heappop(self._heap)
            if self.counts.get(item) == count:
                return count, item

    def offer(self, item, weight: int = 1) -> None:
        if item in self.counts:
            self.counts[item] += weight
        elif len(self.counts) < self.capacity:
            self.counts[item], self.errors[item] = weight, 0
        else:
            floor, evicted = self._pop_min()
            del self.counts[evicted], self.errors[evicted]
            self.counts[item], self.errors[item] = floor + weight, floor
        heapq.heappush(self._heap, (self.counts[item], item))
        if len(self._heap) > 4 * self.capacity + 16:  # drop stale entries: memory stays O(capacity)
            self._heap = [(c, i) for i, c in self.counts.items()]
            heapq.heapify(self._heap)

    def remove(self, item) -> None:
        self.counts.pop(item, None)
        self.errors.pop(item, None)

    def to_dict(self) -> dict:
        return {"capacity": self.capacity, "counts": self.counts, "errors": self.errors}

    @classmethod
    def from_dict(cls, data: dict) -> "SpaceSaving":
        sketch = cls(data["capacity"])
        sketch.counts = {k: int(v) for k, v in data["counts"].items()}
        sketch.errors = {k: int(v) for k, v in data["errors"].items()}
        sketch._heap = [(c, i) for i, c in sketch.counts.items()]
        heapq.heapify(sketch._heap)
        return sketch


class OpenVocabulary:
    """Which out-of-vocabulary words to admit: see the module docstring."""

    LOG_SIZE = 1000  # admissions and retirements remembered (the most recent)

    def __init__(self, max_words: int, admit_df: int = 20, sketch_size: int = 1000,
                 retire_df: float | None = None):
        self.max_words = int(max_words)
        self.admit_df = int(admit_df)
        self.retire_df = self.admit_df / 4 if retire_df is None else float(retire_df)
        self.sketch = SpaceSaving(sketch_size)
        self.admitted: list[tuple[str, int]] = []  # (word, documents absorbed when admitted)
        self.retired: list[tuple[str, int]] = []  # (word, documents absorbed when retired)

    def observe(self, unknown_words) -> list[str]:
        """Count one document's distinct unknown words; return those frequent enough to be
        admitted (sorted). They stay counted until :meth:`admit` takes them."""
        ready = []
        for word in unknown_words:
            self.sketch.offer(word)
            if self.sketch.guaranteed(word) >= self.admit_df:
                ready.append(word)
        return sorted(ready)

    def admit(self, word: str, documents: int) -> None:
        self.sketch.remove(word)
        self._log(self.admitted, word, documents)

    def retire(self, word: str, documents: int) -> None:
        self._log(self.retired, word, documents)

    def _log(self, log: list, word: str, documents: int) -> None:
        log.append((word, int(documents)))
        del log[:-self.LOG_SIZE]

    def to_dict(self) -> dict:
        return {"max_words": self.max_words, "admit_df": self.admit_df, "retire_df": self.retire_df,
                "sketch": self.sketch.to_dict(), "admitted": self.admitted, "retired": self.retired}

    @classmethod
    def from_dict(cls, data: dict) -> "OpenVocabulary":
        policy = cls(data["max_words"], data["admit_df"], data["sketch"]["capacity"], data.get("retire_df"))
        policy.sketch = SpaceSaving.from_dict(data["sketch"])
        policy.admitted = [tuple(x) for x in data["admitted"]]
        policy.retired = [tuple(x) for x in data.get("retired", [])]
        return policy


def grow_packed(packed: np.ndarray, old_n: int, new_n: int) -> np.ndarray:
    """The packed upper triangle of an ``old_n`` matrix embedded in a zero ``new_n`` one."""
    out = np.zeros(new_n * (new_n + 1) // 2)
    for i in range(old_n):
        src = i * old_n - (i * (i - 1)) // 2
        dst = i * new_n - (i * (i - 1)) // 2
        out[dst:dst + old_n - i] = packed[src:src + old_n - i]
    return out
