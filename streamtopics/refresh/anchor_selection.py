"""Anchor selection: the refresh's anchors step, a table of selectors (docs/design.md, "Anchor words").

:data:`ANCHOR_SELECTORS` maps each ``anchor_method`` to its selector; every selector takes one
:class:`AnchorRequest` and returns K word ids, so a new selector is a function and an entry.
:func:`select_anchors` builds the request (the frequent words under the document-frequency
ceiling, with some mass, are every selector's candidates) and runs the selector on one BLAS
thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..config import ANCHOR_METHODS, DEFAULT_RP_MIN_SUPPORT
from .anchors import DependentRowsError, candidate_words, fast_anchor_words, random_projection
from .candidate_clustering import rp_anchor_groups
from .rectification import RESOLUTION, rectified_rows
from .statistics_view import normalised_rows, projected_normalised_rows


class NotEnoughCandidatesError(ValueError):
    """Fewer candidate anchor words than topics: the stream is too young (or K too large)."""


#: A tracker candidate's row must stand out from the corpus-average row by at least this many standard errors
#: of its sampling noise (:meth:`~streamtopics.statistics.trackers.RandomProjectionTracker.signal_z`): the random
#: projections' extremes are otherwise taken by rare words whose rows are noise. On Ding et al.'s noisy swimmer (256
#: images of 200 pixels) the background pixels' z stays below 5 (median 0) while the limb pixels' reaches 5-13
#: (`benchmarks/swimmer.py`). One word's z is on a knife edge there, though: a background pixel reached 5.1, and on
#: some draws no pixel of a limb reached 4.9. For ``rp`` the test is pooled too: over the word and its
#: :data:`POOLED_NEIGHBOURS` nearest eligible words
#: (:meth:`~streamtopics.statistics.trackers.RandomProjectionTracker.pooled_signal_z`) background pixels stay at
#: 4.3 or less and every limb has a pixel at 5.9 or more (seeds 0-11), and ``rp`` anchors all 16 limbs on every draw.
#: ``hybrid`` keeps one word's test: pooled, its FastAnchorWords split a topic on drifting streams (2 of 4 in
#: tests/test_drift.py's open-vocabulary setting) and still missed a faint limb on 2 of 12 swimmer draws.
SIGNAL_Z = 5.0
POOLED_NEIGHBOURS = 3  # a limb has 7 pixels; 2-5 neighbours all gave rp 16 limbs on seeds 0-11
#: Pooled, a word also passes on its own z at this stricter bound: a topic with one distinctive word has no
#: neighbours to pool with (Gibbs-truth streams lost such anchors under the pooled test alone: 20 Newsgroups K = 20,
#: alpha 0.1, L1 0.192 -> 0.319 at 100,000 documents), but one rare word's z has the heavy tail of a few Poisson
#: counts (the swimmer's background pixels reached 5.1), where four words' pooled z is nearer normal.
SIGNAL_Z_ALONE = 5.5
#: ``hybrid`` takes ``rp``'s anchors (each group's strongest word) where ``rp``'s candidates fall into K groups at
#: least this far apart (:func:`~streamtopics.refresh.candidate_clustering.group_separation`): then each group is
#: one topic's novel words (Ding et al.), while FastAnchorWords over single words' rows, each mostly noise when
#: documents are short, can take two anchors from one group. The noisy swimmer at 200 pixels: 1.47-2.03 (seeds
#: 0-11; hybrid had anchored 11 and 13 limbs on two of them); real text (BBC, 20 Newsgroups, Reuters, NIPS,
#: Debian at K = 20 and 50) 1.00-1.03, Gibbs-truth streams up to 1.08, where nothing changes.
GROUP_SEPARATION = 1.25


def support_mask(view, min_df: int, min_support: float = DEFAULT_RP_MIN_SUPPORT, tracker=None,
                 n_topics: int = 1, pooled: bool = False) -> np.ndarray:
    """Words eligible for the tracker's candidates: document frequency at least ``min_df`` and at
    least the fraction ``min_support`` of the documents seen, some mass, and (given the ``tracker``)
    a row that stands out from sampling noise by :data:`SIGNAL_Z` standard errors (``pooled``: with
    its neighbours', or alone by :data:`SIGNAL_Z_ALONE`) unless fewer than ``n_topics`` words do:
    where no document repeats a word (sets of words, clean images) the noise estimate has nothing
    to go on and every z is 0 or less."""
    df = np.asarray(view.document_frequency)
    need = max(float(min_df), float(min_support) * float(view.n_docs))
    mask = (df >= need) & (np.asarray(view.word_mass) > 0)
    z = None if tracker is None else tracker.signal_z()
    if z is not None:
        stands_out = z >= (SIGNAL_Z_ALONE if pooled else SIGNAL_Z)
        if pooled:  # words with half the evidence alone: most eligible words are noise (4,000 of 4,300 on 20 Newsgroups)
            asked = mask & (z >= SIGNAL_Z / 2)
            stands_out |= tracker.pooled_signal_z(mask, POOLED_NEIGHBOURS, asked) >= SIGNAL_Z
        distinct = mask & stands_out
        if np.count_nonzero(distinct) >= n_topics:
            return distinct
    return mask


@dataclass(frozen=True)
class AnchorRequest:
    """What every selector is given: the statistics ``view``, the ``candidates`` (words with
    document frequency at least ``min_df`` under the ceiling, the most frequent, with some mass;
    ``frequency`` is the document frequency with the words over the ceiling at 0) and the
    settings; see :func:`select_anchors` for each."""

    method: str
    view: object
    n_topics: int
    min_df: int
    frequency: np.ndarray
    candidates: np.ndarray
    projection_dim: int | None
    cleanup: bool
    seed: int
    tracker: object
    min_support: float
    previous: np.ndarray | None
    stickiness: float
    rectify: int
    on_fallback: object = None


def fast_anchors(request: AnchorRequest) -> np.ndarray:
    """``"fastanchors"``: FastAnchorWords over the Qbar rows of the candidates, sticky to the
    ``previous`` anchors, which also stay candidates down to half of ``min_df`` (the floor grows
    with the stream; without this a young stream's topics lose their anchors); over the rows of
    the candidates' rectified co-occurrence block when ``rectify`` > 0, unless those span fewer than
    K directions (then the raw rows, and ``on_fallback`` is told)."""
    r = request
    candidates, keep = r.candidates, None
    if r.previous is not None:
        previous = np.asarray(r.previous, dtype=np.int64)
        held = previous[r.frequency[previous] >= r.min_df / 2]
        candidates = np.union1d(candidates, held)
        candidates = candidates[r.view.word_mass[candidates] > 0]
        keep = np.searchsorted(candidates, previous[np.isin(previous, candidates)])
    if candidates.size < r.n_topics:
        raise _not_enough(candidates.size, r.min_df, r.n_topics)
    if r.rectify > 0:
        try:
            rows = rectified_rows(r.view, candidates, r.n_topics, r.rectify, r.seed)
            return candidates[fast_anchor_words(rows, r.n_topics, cleanup=r.cleanup, keep=keep, stickiness=r.stickiness,
                                                resolution=RESOLUTION)]
        except DependentRowsError:  # rectified to fewer than K directions (fewer positive eigenvalues kept)
            if r.on_fallback is not None:  # the raw rows below
                r.on_fallback()
    rows = _candidate_rows(r.view, candidates, r.projection_dim, r.seed)
    return candidates[fast_anchor_words(rows, r.n_topics, cleanup=r.cleanup, keep=keep, stickiness=r.stickiness)]


def random_projection_anchors(request: AnchorRequest) -> np.ndarray:
    """``"rp"``: the tracker's candidates (words whose noise test passes pooled with their
    neighbours', :func:`support_mask`) clustered into K groups
    (:func:`~streamtopics.refresh.candidate_clustering.rp_anchor_groups`), each group's first (strongest)
    word; with fewer than K groups, greedy FastAnchorWords steps over the other candidates
    complete them, starting from the span of the groups' anchors."""
    r = request
    mask = _tracker_support(r, pooled=True)
    groups = rp_anchor_groups(r.tracker, mask, r.n_topics, lambda ids: _few_rows(r.view, ids, r.projection_dim, r.seed))
    anchors = np.array([g[0] for g in groups], dtype=np.int64)
    if anchors.size >= r.n_topics:
        return anchors[: r.n_topics]
    # fewer groups than topics: complete with farthest-point steps over the other frequent
    # words (the groups' other members are near their representative: left out)
    pool = np.union1d(anchors, np.setdiff1d(r.candidates, np.concatenate(groups) if groups else anchors))
    if pool.size < r.n_topics:
        raise _not_enough(pool.size, r.min_df, r.n_topics)
    rows = _candidate_rows(r.view, pool, r.projection_dim, r.seed)
    fixed = np.searchsorted(pool, anchors)
    more = _extend_anchors(rows, fixed, r.n_topics - anchors.size)
    anchors = np.concatenate([anchors, pool[more]])
    if anchors.size < r.n_topics:
        raise _not_enough(anchors.size, r.min_df, r.n_topics)
    return anchors


def hybrid_anchors(request: AnchorRequest) -> np.ndarray:
    """``"hybrid"``: ``rp``'s anchors where its candidates fall into K groups set well apart
    (:data:`GROUP_SEPARATION`); otherwise FastAnchorWords over the tracker's candidates only (a
    few hundred rows instead of V), and with fewer than K of them, the most frequent other
    eligible words join them."""
    r = request
    groups = rp_anchor_groups(r.tracker, _tracker_support(r, pooled=True), r.n_topics,
                              lambda ids: _few_rows(r.view, ids, r.projection_dim, r.seed),
                              min_separation=GROUP_SEPARATION)
    if len(groups) == r.n_topics:
        return np.array([g[0] for g in groups], dtype=np.int64)
    mask = _tracker_support(r)
    pool = r.tracker.candidates(mask)
    if pool.size < r.n_topics:
        eligible = np.flatnonzero(mask)
        if eligible.size < r.n_topics:
            eligible = r.candidates
        order = np.lexsort((eligible, -np.asarray(r.view.document_frequency)[eligible]))
        extra = eligible[order][~np.isin(eligible[order], pool)][: r.n_topics - pool.size]
        pool = np.union1d(pool, extra.astype(np.int64))
        if pool.size < r.n_topics:
            raise _not_enough(pool.size, r.min_df, r.n_topics)
    rows = _few_rows(r.view, pool, r.projection_dim, r.seed)
    return pool[fast_anchor_words(rows, r.n_topics, cleanup=r.cleanup)]


#: The selectors by ``anchor_method``: each takes an :class:`AnchorRequest`, returns K word ids.
#: Its keys are :data:`streamtopics.config.ANCHOR_METHODS` (the settings name them without this module).
ANCHOR_SELECTORS = {
    "fastanchors": fast_anchors,
    "rp": random_projection_anchors,
    "hybrid": hybrid_anchors,
}

ANCHOR_SEARCH_BLAS_THREADS = 1  # BLAS/LAPACK threads in the anchor search (see select_anchors)


@threadpool_limits.wrap(limits=ANCHOR_SEARCH_BLAS_THREADS, user_api="blas")
def select_anchors(view, n_topics: int, min_df: int, max_candidates: int | None = None,
                   projection_dim: int | None = None, cleanup: bool = True, seed: int = 0, *,
                   method: str = "fastanchors", tracker=None,
                   min_support: float = DEFAULT_RP_MIN_SUPPORT, max_df: float | None = None,
                   previous=None, stickiness: float = 0.0, rectify: int = 0, on_fallback=None) -> np.ndarray:
    """K anchor word ids by the selector named ``method`` (:data:`ANCHOR_SELECTORS`):

    ``"fastanchors"``: FastAnchorWords over the Qbar rows of the frequent words (document
    frequency >= ``min_df``, the ``max_candidates`` most frequent).
    ``"rp"``: the random-projection tracker's candidates clustered into K groups
    (:func:`~streamtopics.refresh.candidate_clustering.rp_anchor_groups`), each group's first (strongest) word; if
    there are fewer than K groups, the remaining anchors are greedy FastAnchorWords steps over
    the other frequent words, starting from the span of the groups' anchors.
    ``"hybrid"``: ``"rp"``'s anchors where its candidates fall into K groups set apart
    (:data:`GROUP_SEPARATION`); otherwise FastAnchorWords over the tracker's candidates only (a
    few hundred rows instead of V), and if there are fewer than K candidates, the most frequent
    other eligible words join them.

    ``tracker`` (a :class:`~streamtopics.statistics.trackers.RandomProjectionTracker` fed the same documents
    as ``view``) is needed by ``"rp"`` and ``"hybrid"``; ``min_support`` is their relative support
    threshold (:func:`support_mask`). Words in more than ``max_df`` documents are never anchors.
    ``previous`` (word ids of the last refresh's anchors) and ``stickiness``: sticky anchors for
    ``"fastanchors"`` (:func:`~streamtopics.refresh.anchors.fast_anchor_words`); a previous anchor also
    stays a candidate while its document frequency is at least half of ``min_df``. The
    tracker-based selectors ignore them. ``rectify`` > 0: ``"fastanchors"`` compares the
    candidates' rows of their co-occurrence block after that many alternating-projection steps
    (:mod:`~streamtopics.refresh.rectification`) instead of their (projected) full rows, where those
    rows span K directions; where they do not, it searches the raw rows and calls ``on_fallback()``
    (if given).

    The search runs its BLAS and LAPACK calls on one thread (:data:`ANCHOR_SEARCH_BLAS_THREADS`):
    they are small (QR solves over a few thousand candidate rows, Householder QRs, Ritz
    eigenproblems), and split over OpenBLAS's pool each call waits for its slowest thread, which
    on a machine shared with other work made the phase swing from 0.3 to 20 s (BENCHMARKS.md,
    "Tried and not adopted"; ``git show 8e056d1:BENCHMARKS.md``, "One BLAS thread for the anchor
    search").
    """
    selector = ANCHOR_SELECTORS.get(method)
    if selector is None:
        raise ValueError(f"unknown anchor method {method!r}; use one of {ANCHOR_METHODS}")
    frequency = np.asarray(view.document_frequency)
    if max_df is not None:  # the ceiling first: the cap then keeps the most frequent words under it
        frequency = np.where(frequency <= max_df, frequency, 0)
    candidates = candidate_words(frequency, min_df, max_candidates)
    candidates = candidates[view.word_mass[candidates] > 0]
    return selector(AnchorRequest(method, view, n_topics, min_df, frequency, candidates, projection_dim, cleanup, seed,
                                  tracker, min_support, previous, stickiness, rectify, on_fallback))


def _tracker_support(request: AnchorRequest, pooled: bool = False) -> np.ndarray:
    """The tracker-based selectors' eligible words (:func:`support_mask`, ``pooled`` or not), once
    the tracker is checked to be there and to cover the statistics' words."""
    r = request
    if r.tracker is None:
        raise ValueError(f"anchor method {r.method!r} needs a RandomProjectionTracker")
    if r.tracker.n_words != r.view.n_words:
        raise ValueError(f"the tracker has {r.tracker.n_words} words, the statistics {r.view.n_words}")
    return support_mask(r.view, r.min_df, r.min_support, r.tracker, r.n_topics, pooled)


def _candidate_rows(view, candidates: np.ndarray, projection_dim: int | None, seed: int, chunk: int = 512) -> np.ndarray:
    """Qbar rows of the candidates, randomly projected a chunk at a time when asked, so that at
    most ``chunk`` full rows exist at once (3,000 full rows at V = 15,000 would take 360 MB; the
    sketch's view projects through its factors and forms none)."""
    if not projection_dim or projection_dim >= view.n_words:
        return normalised_rows(view, candidates)
    return projected_normalised_rows(view, candidates, random_projection(view.n_words, projection_dim, seed), chunk)


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


def _not_enough(n_candidates: int, min_df: int, n_topics: int) -> NotEnoughCandidatesError:
    return NotEnoughCandidatesError(
        f"{n_candidates} words occur in at least {min_df} documents; {n_topics} topics need "
        f"at least {n_topics} candidate anchors (absorb more documents or lower anchor_min_df)"
    )
