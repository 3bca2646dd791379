"""One refresh's anchors (docs/design.md, "Anchor words"), and the matching of the previous
refresh's columns to them; the sums are read through :mod:`~streamtopics.statistics_view`, the
topics recovered by :mod:`~streamtopics.recovery`.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from threadpoolctl import threadpool_limits

from .alignment import l1_distances
from .anchors import DependentRowsError, candidate_words, fast_anchor_words, random_projection
from .candidate_clustering import rp_anchor_groups
from .rectification import rectified_rows
from .statistics_view import normalised_rows


class NotEnoughCandidatesError(ValueError):
    """Fewer candidate anchor words than topics: the stream is too young (or K too large)."""


def _candidate_rows(view, candidates: np.ndarray, projection_dim: int | None, seed: int, chunk: int = 512) -> np.ndarray:
    """Qbar rows of the candidates, randomly projected a chunk at a time when asked, so that at
    most ``chunk`` full rows exist at once (3,000 full rows at V = 15,000 would take 360 MB)."""
    if not projection_dim or projection_dim >= view.n_words:
        return normalised_rows(view, candidates)
    projection = random_projection(view.n_words, projection_dim, seed)
    return np.vstack([normalised_rows(view, candidates[s : s + chunk]) @ projection
                      for s in range(0, candidates.size, chunk)])


ANCHOR_METHODS = ("fastanchors", "rp", "hybrid")

#: Default relative support of the tracker-based selectors: a word is eligible when it occurs in at
#: least this fraction of the documents seen (the tracker's ranking needs a threshold that grows
#: with M, see :mod:`~streamtopics.trackers`), and in at least ``min_df`` documents.
DEFAULT_RP_MIN_SUPPORT = 0.005


def support_mask(view, min_df: int, min_support: float = DEFAULT_RP_MIN_SUPPORT) -> np.ndarray:
    """Words eligible for the tracker's candidates: document frequency at least ``min_df`` and at
    least the fraction ``min_support`` of the documents seen, and some mass."""
    df = np.asarray(view.document_frequency)
    need = max(float(min_df), float(min_support) * float(view.n_docs))
    return (df >= need) & (np.asarray(view.word_mass) > 0)


def _extend_anchors(rows: np.ndarray, fixed: np.ndarray, n_more: int) -> np.ndarray:
    """Greedy farthest-point (Gram-Schmidt) steps of FastAnchorWords started from the span of the
    rows at positions ``fixed``: positions of up to ``n_more`` further rows (fewer when the rows
    run out of independent directions)."""
    rows = np.asarray(rows, dtype=np.float64)
    residual = np.einsum("ij,ij->i", rows, rows)
    tiny = 1e-24 * max(1.0, float(residual.max(initial=0.0)))
    basis: list[np.ndarray] = []
    taken = np.zeros(rows.shape[0], bool)
    picks: list[int] = []

    def add(position: int) -> None:
        nonlocal residual
        taken[position] = True
        direction = rows[position].copy()
        for u in basis:  # modified Gram-Schmidt
            direction -= (direction @ u) * u
        norm = np.linalg.norm(direction)
        if norm ** 2 <= tiny:
            return
        u = direction / norm
        basis.append(u)
        residual = np.maximum(residual - (rows @ u) ** 2, 0.0)

    for position in np.asarray(fixed, dtype=np.int64):
        add(int(position))
    while len(picks) < n_more:
        score = np.where(taken, -1.0, residual)
        position = int(np.argmax(score))
        if score[position] <= tiny:
            break
        picks.append(position)
        add(position)
    return np.asarray(picks, dtype=np.int64)


def _few_rows(view, ids: np.ndarray, projection_dim: int | None, seed: int) -> np.ndarray:
    """Qbar rows of a few words (the tracker's candidates): projected only when there are more
    rows than projection dimensions, since drawing the V x projection_dim matrix costs more than
    a few hundred full rows."""
    few = not projection_dim or ids.size <= projection_dim
    return _candidate_rows(view, ids, None if few else projection_dim, seed)


ANCHOR_SEARCH_BLAS_THREADS = 1  # BLAS/LAPACK threads in the anchor search (see select_anchors)


@threadpool_limits.wrap(limits=ANCHOR_SEARCH_BLAS_THREADS, user_api="blas")
def select_anchors(view, n_topics: int, min_df: int, max_candidates: int | None = None,
                   projection_dim: int | None = None, cleanup: bool = True, seed: int = 0, *,
                   method: str = "fastanchors", tracker=None,
                   min_support: float = DEFAULT_RP_MIN_SUPPORT, max_df: float | None = None,
                   previous=None, stickiness: float = 0.0, rectify: int = 0) -> np.ndarray:
    """K anchor word ids by one of three selectors (docs/design.md, "Anchor words"):

    ``"fastanchors"``: FastAnchorWords over the Qbar rows of the frequent words (document
    frequency >= ``min_df``, the ``max_candidates`` most frequent).
    ``"rp"``: the random-projection tracker's candidates clustered into K groups
    (:func:`~streamtopics.trackers.rp_anchor_groups`), each group's first (strongest) word; if
    there are fewer than K groups, the remaining anchors are greedy FastAnchorWords steps over
    the other frequent words, starting from the span of the groups' anchors.
    ``"hybrid"``: FastAnchorWords over the tracker's candidates only (a few hundred rows instead
    of V); if there are fewer than K candidates, the most frequent other eligible words join them.

    ``tracker`` (a :class:`~streamtopics.trackers.RandomProjectionTracker` fed the same documents
    as ``view``) is needed by ``"rp"`` and ``"hybrid"``; ``min_support`` is their relative support
    threshold (:func:`support_mask`). Words in more than ``max_df`` documents are never anchors.
    ``previous`` (word ids of the last refresh's anchors) and ``stickiness``: sticky anchors for
    ``"fastanchors"`` (:func:`~streamtopics.anchors.fast_anchor_words`); a previous anchor also
    stays a candidate while its document frequency is at least half of ``min_df``. The
    tracker-based selectors ignore them. ``rectify`` > 0: ``"fastanchors"`` compares the
    candidates' rows of their co-occurrence block after that many alternating-projection steps
    (:mod:`~streamtopics.rectification`) instead of their (projected) full rows.

    The search runs its BLAS and LAPACK calls on one thread (:data:`ANCHOR_SEARCH_BLAS_THREADS`):
    they are small (QR solves over a few thousand candidate rows, Householder QRs, Ritz
    eigenproblems), and split over OpenBLAS's pool each call waits for its slowest thread, which
    on a machine shared with other work made the phase swing from 0.3 to 20 s (BENCHMARKS.md,
    "Tried and not adopted"; ``git show 8e056d1:BENCHMARKS.md``, "One BLAS thread for the anchor
    search").
    """
    if method not in ANCHOR_METHODS:
        raise ValueError(f"unknown anchor method {method!r}; use one of {ANCHOR_METHODS}")
    frequency = np.asarray(view.document_frequency)
    if max_df is not None:  # the ceiling first: the cap then keeps the most frequent words under it
        frequency = np.where(frequency <= max_df, frequency, 0)
    candidates = candidate_words(frequency, min_df, max_candidates)
    if previous is not None and method == "fastanchors":
        # hysteresis on eligibility too: a previous anchor stays a candidate down to half the floor
        # (the floor grows with the stream; without this a young stream's topics lose their anchors)
        previous = np.asarray(previous, dtype=np.int64)
        held = previous[frequency[previous] >= min_df / 2]
        candidates = np.union1d(candidates, held)
    candidates = candidates[view.word_mass[candidates] > 0]
    if method == "fastanchors":
        if candidates.size < n_topics:
            raise _not_enough(candidates.size, min_df, n_topics)
        keep = None if previous is None else np.searchsorted(candidates, previous[np.isin(previous, candidates)])
        if rectify > 0:
            try:
                rows = rectified_rows(view, candidates, n_topics, rectify, seed)
                return candidates[fast_anchor_words(rows, n_topics, cleanup=cleanup, keep=keep, stickiness=stickiness)]
            except DependentRowsError:
                pass  # rectified to fewer than K dimensions (a few documents over a few words): the raw rows
        rows = _candidate_rows(view, candidates, projection_dim, seed)
        return candidates[fast_anchor_words(rows, n_topics, cleanup=cleanup, keep=keep, stickiness=stickiness)]
    if tracker is None:
        raise ValueError(f"anchor method {method!r} needs a RandomProjectionTracker")
    if tracker.n_words != view.n_words:
        raise ValueError(f"the tracker has {tracker.n_words} words, the statistics {view.n_words}")
    mask = support_mask(view, min_df, min_support)
    if method == "rp":
        groups = rp_anchor_groups(tracker, mask, n_topics, lambda ids: _few_rows(view, ids, projection_dim, seed))
        anchors = np.array([g[0] for g in groups], dtype=np.int64)
        if anchors.size >= n_topics:
            return anchors[:n_topics]
        # fewer groups than topics: complete with farthest-point steps over the other frequent
        # words (the groups' other members are near their representative: left out)
        pool = np.union1d(anchors, np.setdiff1d(candidates, np.concatenate(groups) if groups else anchors))
        if pool.size < n_topics:
            raise _not_enough(pool.size, min_df, n_topics)
        rows = _candidate_rows(view, pool, projection_dim, seed)
        fixed = np.searchsorted(pool, anchors)
        more = _extend_anchors(rows, fixed, n_topics - anchors.size)
        anchors = np.concatenate([anchors, pool[more]])
        if anchors.size < n_topics:
            raise _not_enough(anchors.size, min_df, n_topics)
        return anchors
    # hybrid
    pool = tracker.candidates(mask)
    if pool.size < n_topics:
        eligible = np.flatnonzero(mask)
        if eligible.size < n_topics:
            eligible = candidates
        order = np.lexsort((eligible, -np.asarray(view.document_frequency)[eligible]))
        extra = eligible[order][~np.isin(eligible[order], pool)][: n_topics - pool.size]
        pool = np.union1d(pool, extra.astype(np.int64))
        if pool.size < n_topics:
            raise _not_enough(pool.size, min_df, n_topics)
    rows = _few_rows(view, pool, projection_dim, seed)
    return pool[fast_anchor_words(rows, n_topics, cleanup=cleanup)]


def _not_enough(n_candidates: int, min_df: int, n_topics: int) -> NotEnoughCandidatesError:
    return NotEnoughCandidatesError(
        f"{n_candidates} words occur in at least {min_df} documents; {n_topics} topics need "
        f"at least {n_topics} candidate anchors (absorb more documents or lower anchor_min_df)"
    )


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
