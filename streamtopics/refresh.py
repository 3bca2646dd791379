"""One refresh: statistics -> anchors -> recovered topics (docs/design.md, "Anchor words", "Recovery").

The functions here read the co-occurrence sums through a small interface (``n_words``,
``n_docs``, ``word_mass``, ``document_frequency``, ``rows(ids)``, ``matmul(B)``), implemented by
the packed streaming sums and by a dense matrix alike, so a streamed model and a batch
computation over the same documents run literally the same code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment
from threadpoolctl import threadpool_limits

from .alignment import l1_distances
from .anchors import DependentRowsError, candidate_words, fast_anchor_words, random_projection
from .recovery import dirichlet_alpha, recover_kl, recover_l2, topic_covariance, topics_from_coefficients
from .candidate_clustering import rp_anchor_groups
from .rectification import rectified_rows


class NotEnoughCandidatesError(ValueError):
    """Fewer candidate anchor words than topics: the stream is too young (or K too large)."""


def normalised_rows(view, ids: np.ndarray) -> np.ndarray:
    """Qbar rows of the words ``ids``: their Q rows divided by their masses (a word of no mass
    keeps its zero row). Divided in place: every kind of statistics returns its rows as a new
    array (a packed gather, a dense fancy index, a low-rank product), and at V = 100,000 a copy of
    200 rows cost page faults of 160 MB."""
    mass = view.word_mass[ids]
    rows = np.asarray(view.rows(ids), dtype=np.float64)
    rows /= np.where(mass > 0, mass, 1.0)[:, None]
    return rows


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


# The background's cost per unit of coefficient, in units of the mean squared anchor-row norm:
# a tie-breaker. In a separable model the unigram row lies inside the anchors' hull, so the
# topics and the background explain a word equally well; the penalty gives it to the topics there
# (synthetic tests: L1 as without a background), while on real text, where the background fits
# the common words far better, it changes nothing measurable (commit c65a363, which added it).
BACKGROUND_PENALTY = 1e-3

#: The V x V x K product of recover_topics in float32 over the float64 sums
#: (:meth:`~streamtopics.cooccurrence.CooccurrenceStats.matmul` ``single``): 1.4-1.6 times as fast
#: at V = 15,000, K = 100; the snapshots moved by matched L1 1.3e-5 there and 2.1e-5 on 20 Newsgroups
#: K = 20 (`git show 8e056d1:BENCHMARKS.md`, "What the defaults cost").
SINGLE_PRODUCTS = True


@dataclass
class Recovery:
    """Recovered topics and how they were obtained."""

    anchors: np.ndarray
    coefficients: np.ndarray  # C, V x K
    topic_word: np.ndarray  # A, V x K
    prevalence: np.ndarray
    covariance: np.ndarray  # R
    alpha: np.ndarray
    iterations: np.ndarray  # solver iterations per word
    timings: dict = field(default_factory=dict)
    background: np.ndarray | None = None  # V, the common-word distribution (with ``background=True``)
    background_share: float = 0.0  # the share of all tokens it explains


def anchor_group_rows(view, groups) -> np.ndarray:
    """Row-normalised Qbar row of each group of words taken as one pseudo-word: the sum of the
    members' Q rows over the sum of their masses (K x V). A group of one word gives its row."""
    rows = np.empty((len(groups), view.n_words))
    for k, group in enumerate(groups):
        group = np.asarray(group, dtype=np.int64).reshape(-1)
        total = float(view.word_mass[group].sum())
        rows[k] = np.asarray(view.rows(group), dtype=np.float64).sum(axis=0) / (total if total > 0 else 1.0)
    return rows


def recover_topics(view, anchors: np.ndarray, start: np.ndarray | None = None, method: str = "l2",
                   tol: float = 1e-5, max_iter: int = 500, block_rows: int = 1024,
                   anchor_groups=None, background: bool = False, background_words=None) -> Recovery:
    """RecoverL2 or RecoverKL from the given anchors (K word ids), warm-started from ``start`` if
    given. ``anchor_groups`` (K arrays of word ids, e.g. the ``rp`` selector's clusters) replaces
    each anchor's row by its group's averaged row (:func:`anchor_group_rows`, Ding et al. 4.3);
    the anchors still name the topics and give the topic covariance.

    With ``background`` a (K+1)-th pseudo-anchor joins them: the unigram distribution p(w), the
    Qbar row of a word that co-occurs with everything in proportion to frequency. The part of
    each word's row it explains (``coefficients[:, K]``) goes to ``Recovery.background`` instead
    of the topics, so words common to all documents ("said", "writes", mail boilerplate) stop
    leading every topic; on LDA-generated streams it takes next to nothing (commit c65a363's
    message). ``start`` then has K+1 columns, as the returned coefficients do. The words of the
    boolean mask ``background_words`` (e.g. those in most documents) are given wholly to the
    background: they take no part in any topic."""
    timings = {}
    t0 = time.perf_counter()
    mass = view.word_mass
    safe_mass = np.where(mass > 0, mass, 1.0)
    anchor_block = None
    total = mass.sum()
    word_probability = mass / total if total > 0 else mass
    # the anchors' rows and the background's in one K(+1) x V array, filled in place: at V = 100,000
    # each V x K temporary costs about 0.1-0.3 s of page faults
    n_anchors = np.asarray(anchors).size
    anchor_rows = np.empty((n_anchors + int(background), view.n_words))
    if anchor_groups is None:
        raw = np.asarray(view.rows(anchors), dtype=np.float64)  # only read: no copy
        mass_s = view.word_mass[anchors]
        np.divide(raw, np.where(mass_s > 0, mass_s, 1.0)[:, None], out=anchor_rows[:n_anchors])  # as normalised_rows
        anchor_block = raw[:, anchors]  # for the covariance below: one gather of the anchors' rows
    else:
        if len(anchor_groups) != len(anchors):
            raise ValueError(f"{len(anchor_groups)} anchor groups for {len(anchors)} anchors")
        anchor_rows[:n_anchors] = anchor_group_rows(view, anchor_groups)
    if background:
        anchor_rows[n_anchors] = word_probability
    if method == "l2":
        # the views' products are new arrays, so they are divided in place
        products = np.asarray(view.matmul(np.ascontiguousarray(anchor_rows.T), single=SINGLE_PRODUCTS),
                              dtype=np.float64)
        products /= safe_mass[:, None]
        if background:
            topic_rows = anchor_rows[:-1]
            unit = float(np.einsum("ij,ij->", topic_rows, topic_rows)) / max(topic_rows.shape[0], 1)
            products[:, -1] -= 0.5 * BACKGROUND_PENALTY * unit
        timings["products"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        # An anchor word's own solution is exactly its unit vector (its row is the vertex); it is
        # set, not solved: the active-set finish of the solver can divide 0 by 0 on such an exact
        # vertex (seen with the rp selector's anchor order), and the result is the same.
        anchors = np.asarray(anchors, dtype=np.int64)
        others = np.ones(view.n_words, bool)
        unique_anchors = np.unique(anchors).size == anchors.size
        if unique_anchors:
            others[anchors] = False
        coefficients, iterations = recover_l2(anchor_rows, products, start, tol, max_iter, rows=np.flatnonzero(others))
        if unique_anchors:
            coefficients[anchors, np.arange(anchors.size)] = 1.0
    elif method == "kl":
        timings["products"] = 0.0
        t1 = time.perf_counter()
        parts = []
        for r0 in range(0, view.n_words, block_rows):
            ids = np.arange(r0, min(r0 + block_rows, view.n_words))
            block_start = None if start is None else start[ids]
            parts.append(recover_kl(anchor_rows, normalised_rows(view, ids), block_start, tol, max_iter))
        coefficients = np.vstack([p[0] for p in parts])
        iterations = np.concatenate([p[1] for p in parts])
    else:
        raise ValueError(f"unknown recovery method {method!r}; use 'l2' or 'kl'")
    timings["solve"] = time.perf_counter() - t1
    k = np.asarray(anchors).size
    if background and background_words is not None:
        coefficients[background_words] = 0.0
        coefficients[background_words, k] = 1.0
    topics = topics_from_coefficients(coefficients[:, :k], word_probability)
    common, share = None, 0.0
    if background:
        common = coefficients[:, k] * word_probability
        share = float(common.sum())
        common = common / share if share > 0 else np.full(view.n_words, 1.0 / view.n_words)
    if anchor_block is None:
        anchor_block = view.rows(anchors)[:, anchors]
    anchor_block = anchor_block / max(view.n_docs, 1)
    covariance = topic_covariance(topics.topic_word, anchors, anchor_block)
    alpha = dirichlet_alpha(topics.prevalence, covariance)
    timings["recovery"] = time.perf_counter() - t0
    return Recovery(np.asarray(anchors), coefficients, topics.topic_word, topics.prevalence, covariance,
                    alpha, iterations, timings, common, share)
