"""The warm start of recovery: the previous refresh's coefficients, their columns following the new anchors.

Recovery solves every word from a starting point; after a refresh most words' solutions barely
move, so the previous solution is the start (:func:`warm_start_point`) once its columns are
matched to the new anchors (:func:`match_columns`): an anchor kept keeps its column, the others
are assigned by the Hungarian method.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from .alignment import l1_distances
from .statistics_view import normalised_rows


def warm_start_point(coefficients: np.ndarray, previous: np.ndarray, view, anchors: np.ndarray,
                     background: bool) -> np.ndarray | None:
    """The previous solution ``coefficients`` (V x K, plus the background's column last with
    ``background``) with its columns reordered to follow the new ``anchors``; ``previous`` are the
    word ids of the previous refresh's anchors. None (start cold) for a solution saved with the
    background setting the other way. Words admitted since start uniform."""
    # each word's row read once: in a warm refresh most anchors are the previous ones
    words, where = np.unique(np.concatenate([previous, anchors]), return_inverse=True)
    mapping = match_columns(normalised_rows(view, words), where[: previous.size], where[previous.size:])
    extra = int(background)  # the background's column stays last
    if coefficients.shape[1] != anchors.size + extra:
        return None  # saved with the background setting the other way: start cold
    if coefficients.shape[0] < view.n_words:  # words admitted since: start them uniform
        k = coefficients.shape[1]
        coefficients = np.vstack([coefficients, np.full((view.n_words - coefficients.shape[0], k), 1.0 / k)])
    return coefficients[:, np.concatenate([mapping, np.arange(anchors.size, anchors.size + extra)])]


def match_columns(rows: np.ndarray, previous: np.ndarray, current: np.ndarray) -> np.ndarray:
    """For each current anchor, the previous anchor it continues (Hungarian, L1 between rows).

    ``previous`` and ``current`` index ``rows``, one row per distinct anchor word: an anchor kept
    from the previous refresh (most of them in a warm refresh) has the same index in both and is
    matched to itself first, and the Hungarian method assigns the others. Some optimal assignment
    of the whole problem keeps every such zero-cost pair (by the triangle inequality, giving one up
    never lowers the cost), so this is the whole problem's assignment, without its 100 x 100
    distances over V words (0.04-0.1 s at V = 15,000). With a previous index twice (a tie), the
    whole problem is solved as it stands. Indices rather than a row per anchor: at V = 100,000
    gathering 200 rows, dividing them and hashing their bytes took 0.5 s."""
    previous, current = np.asarray(previous, np.int64), np.asarray(current, np.int64)
    mapping = np.full(current.size, -1, np.int64)
    position = {int(i): p for p, i in enumerate(previous)}
    if len(position) == previous.size:
        for c, i in enumerate(current):
            p = position.pop(int(i), None)
            if p is not None:
                mapping[c] = p
    rest_current = np.flatnonzero(mapping < 0)
    rest_previous = np.setdiff1d(np.arange(previous.size), mapping[mapping >= 0])
    if rest_current.size and rest_previous.size:
        cost = l1_distances(rows[previous[rest_previous]].T, rows[current[rest_current]].T)
        previous_index, current_index = linear_sum_assignment(cost)
        mapping[rest_current[current_index]] = rest_previous[previous_index]
    return mapping
