"""Topic identity across refreshes (docs/design.md, "Topic identity").

Recovered topics come back in arbitrary order. A new snapshot's topic keeps the id of a previous
topic when they are the same topic by any of three tests, strongest first:

1. **the same anchor word** (pairs sharing an anchor are matched first), unless the anchor's
   topic moved past the L1 limit below while another new topic is the old one's mutual nearest
   within it: then the words moved to a new anchor, and the id goes with the words;
2. **close in L1**: the Hungarian pairing on the L1 distance between topic-word columns, below
   ``match_threshold`` times the median distance between two different previous topics ("much
   closer than two distinct topics are", a scale that holds for sparse real topics, ~1.8 apart,
   and dense synthetic ones, ~1 apart);
3. **most of the top words**: the pair are each other's nearest topic in L1 and share at least
   ``min_overlap`` of their ``top_n`` words (a topic whose tail moved but whose head a reader
   recognises).

Any other new topic gets a fresh id (a birth) and an unmatched previous topic is a death.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.optimize import linear_sum_assignment

from ..evaluation import top_word_ids


def l1_distances(previous: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Pairwise L1 distances between the columns of two V x K matrices (0 to 2), each pair summed
    over the words in order: scipy's ``cdist(previous.T, current.T, "cityblock")`` bit for bit,
    without its transposed copies, in about a third of its time at V = 100,000, K = 101
    (``git show 8e056d1:BENCHMARKS.md``, "Topic distances read row by row, top words in one pass")."""
    previous = np.ascontiguousarray(previous, dtype=np.float64)
    current = np.ascontiguousarray(current, dtype=np.float64)
    return _column_l1(previous, current)


@njit(cache=True, nogil=True)
def _column_l1(previous, current):
    """``out_ij = sum_w |previous_wi - current_wj|``, the words in order, the matrices read a
    word's row at a time (the inner loop runs along a row of ``current``, vectorised). One thread:
    on two it took 0.7 times as long at V = 100,000 but 2 s more to compile on a first run."""
    n_words, n_previous = previous.shape
    n_current = current.shape[1]
    out = np.zeros((n_previous, n_current))
    for w in range(n_words):
        for i in range(n_previous):
            x = previous[w, i]
            for j in range(n_current):
                out[i, j] += abs(x - current[w, j])
    return out


def top_word_overlap(previous: np.ndarray, current: np.ndarray, n: int = 10) -> np.ndarray:
    """Share of the ``n`` most probable words that two topics have in common, for every pair of
    columns (K_previous x K_current, 0 to 1)."""
    n = min(n, previous.shape[0])
    shared = (_top_word_indicator(previous, n) @ _top_word_indicator(current, n).T).toarray()
    return shared.astype(float) / max(n, 1)


def _top_word_indicator(topic_word: np.ndarray, n: int) -> sp.csr_matrix:
    """K x V 0/1 matrix of each column's ``n`` most probable words."""
    words, k = topic_word.shape
    top = top_word_ids(topic_word, n)
    return sp.csr_matrix((np.ones(k * n), top.ravel(), np.arange(0, k * n + 1, n)), shape=(k, words))


@dataclass
class Alignment:
    """Ids for the new topics and what happened to the old ones."""

    topic_ids: list[int]
    births: list[int] = field(default_factory=list)
    deaths: list[int] = field(default_factory=list)
    distances: dict[int, float] = field(default_factory=dict)  # id -> L1 moved since last snapshot
    next_id: int = 0


def align_topics(previous: np.ndarray | None, previous_ids, current: np.ndarray, next_id: int,
                 match_threshold: float = 0.5, previous_anchors=None, current_anchors=None,
                 top_n: int = 10, min_overlap: float = 0.5) -> Alignment:
    """Match the columns of ``current`` to those of ``previous`` (same vocabulary); anchors (one
    word per column, in the same order) are optional.

    Examples
    --------
    >>> import numpy as np
    >>> old = np.array([[0.9, 0.1], [0.1, 0.9]])
    >>> new = np.array([[0.1, 0.8, 0.0], [0.9, 0.2, 0.0], [0.0, 0.0, 1.0]])[:2]
    >>> new = new / new.sum(axis=0).clip(1e-9)
    >>> a = align_topics(old, [7, 3], new[:, :2], next_id=8)
    >>> a.topic_ids, a.births, a.deaths
    ([3, 7], [], [])
    """
    k = current.shape[1]
    if previous is None:
        ids = list(range(next_id, next_id + k))
        return Alignment(ids, births=list(ids), next_id=next_id + k)
    distances = l1_distances(previous, current)
    separation = l1_distances(previous, previous)[np.triu_indices(previous.shape[1], 1)]  # each pair once
    limit = match_threshold * (np.median(separation) if separation.size else 2.0)
    nearest_current, nearest_previous = distances.argmin(axis=1), distances.argmin(axis=0)
    mutual = {r: int(c) for r, c in enumerate(nearest_current) if nearest_previous[c] == r}  # previous -> current
    pairs = _content_over_anchor(_same_anchor_pairs(previous_anchors, current_anchors), distances, limit, mutual)
    free_rows = [r for r in range(previous.shape[1]) if r not in {r for r, _ in pairs}]
    free_cols = [c for c in range(k) if c not in {c for _, c in pairs}]
    rows, cols = linear_sum_assignment(distances[np.ix_(free_rows, free_cols)])
    overlap = top_word_overlap(previous, current, top_n)
    for r, c in zip(np.asarray(free_rows)[rows], np.asarray(free_cols)[cols]):
        if distances[r, c] < limit or (mutual.get(r) == c and overlap[r, c] >= min_overlap):
            pairs.append((int(r), int(c)))
    ids: list[int | None] = [None] * k
    moved: dict[int, float] = {}
    for r, c in pairs:
        ids[c] = int(previous_ids[r])
        moved[int(previous_ids[r])] = float(distances[r, c])
    births = []
    for c in range(k):
        if ids[c] is None:
            ids[c] = next_id
            births.append(next_id)
            next_id += 1
    kept = set(ids)
    deaths = [int(i) for i in previous_ids if int(i) not in kept]
    return Alignment([int(i) for i in ids], births, deaths, moved, next_id)


def _same_anchor_pairs(previous_anchors, current_anchors) -> list[tuple[int, int]]:
    """(previous column, current column) of the topics anchored on the same word."""
    if previous_anchors is None or current_anchors is None:
        return []
    where = {word: r for r, word in enumerate(previous_anchors)}
    return [(where[word], c) for c, word in enumerate(current_anchors) if word in where]


def _content_over_anchor(pairs: list[tuple[int, int]], distances: np.ndarray, limit: float,
                         mutual: dict[int, int]) -> list[tuple[int, int]]:
    """Same-anchor ``pairs`` (previous column, current column), with the words overruling the
    anchor: a pair at least ``limit`` apart gives way when either side has another mutual nearest
    (``mutual``: previous column -> current column) within ``limit``, which it is matched with
    instead (if that one is free). On a stationary 20 Newsgroups stream (K = 50) "committee
    administration clinton" moved from the anchor "four" to "administration" (L1 0.07) while
    "four" came to anchor unrelated words (L1 1.87): by the anchor alone the topic was born again
    under a new id and its old id lived on in the stray."""
    close = {r: c for r, c in mutual.items() if distances[r, c] < limit}
    close_of_current = {c: r for r, c in close.items()}
    kept, overruled = [], []
    for r, c in pairs:
        elsewhere = close.get(r, c) != c or close_of_current.get(c, r) != r
        if distances[r, c] >= limit and elsewhere:
            overruled.append((r, c))
        else:
            kept.append((r, c))
    used_previous, used_current = {r for r, _ in kept}, {c for _, c in kept}
    for r, c in overruled:
        for row, column in ((r, close.get(r)), (close_of_current.get(c), c)):
            if row is not None and column is not None and row not in used_previous and column not in used_current:
                kept.append((row, column))
                used_previous.add(row)
                used_current.add(column)
    return kept


@dataclass
class MissingTopic:
    """A topic absent from the latest snapshots, kept for a few refreshes so that it gets its id
    back if it returns (recovered topics flicker: a weak topic can lose its anchor to noise for
    one refresh and find it again the next). Its death is announced only once the grace is over.
    Its share when last seen and its highest share while present tell a topic that faded away from
    one that went at once (:func:`~streamtopics.refresh.lineage.faded`)."""

    column: np.ndarray  # its topic-word column when last seen
    anchor: str
    words: list[str]
    refreshes: int = 1  # refreshes it has been missing for
    share: float | None = None  # its share of the stream when last seen (None: not known, an older state file)
    peak: float | None = None  # the highest share it had while present
