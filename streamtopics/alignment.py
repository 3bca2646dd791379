"""Topic identity across refreshes (DESIGN 2.6).

Recovered topics come back in arbitrary order. A new snapshot's topics are matched to the previous
snapshot's by the Hungarian algorithm on the L1 distance between topic-word columns. A matched
pair keeps its id when its distance is below ``match_threshold`` times the median distance between
two different previous topics: "much closer than two distinct topics are", a scale that holds for
sparse real topics (distinct ones ~1.8 apart) and dense synthetic ones (~1 apart) alike. Any other
new topic gets a fresh id (a birth) and an unmatched previous topic is a death.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist


def l1_distances(previous: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Pairwise L1 distances between the columns of two V x K matrices (0 to 2)."""
    return cdist(np.ascontiguousarray(previous.T), np.ascontiguousarray(current.T), "cityblock")


@dataclass
class Alignment:
    """Ids for the new topics and what happened to the old ones."""

    topic_ids: list[int]
    births: list[int] = field(default_factory=list)
    deaths: list[int] = field(default_factory=list)
    distances: dict[int, float] = field(default_factory=dict)  # id -> L1 moved since last snapshot
    next_id: int = 0


def align_topics(previous: np.ndarray | None, previous_ids, current: np.ndarray, next_id: int, match_threshold: float = 0.5) -> Alignment:
    """Match the columns of ``current`` to those of ``previous`` (same vocabulary).

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
    separation = l1_distances(previous, previous)[np.triu_indices(previous.shape[1], 1)]
    limit = match_threshold * (np.median(separation) if separation.size else 2.0)
    rows, cols = linear_sum_assignment(distances)
    ids: list[int | None] = [None] * k
    moved: dict[int, float] = {}
    for r, c in zip(rows, cols):
        if distances[r, c] < limit:
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
