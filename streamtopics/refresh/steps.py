"""One refresh as named steps: statistics view -> anchors -> recovery -> refinement -> shares -> alignment -> description.

:func:`run_refresh` runs them in that order (docs/design.md, "Anchor words" to "Topic identity");
each step is a function here, and the work of each lives in its own module:

* :func:`read_statistics`: the document-frequency floor and ceiling the statistics impose
  (:mod:`~streamtopics.refresh.statistics_view`: how the sums are read);
* :func:`choose_anchors`: K anchor words (:mod:`~streamtopics.refresh.anchor_selection`, a table of
  selectors);
* :func:`recover`: topics from the anchors, warm-started from the previous refresh's solution
  (:mod:`~streamtopics.refresh.recovery`, :mod:`~streamtopics.refresh.warm_start`);
* :func:`refine`: seeded likelihood refinement over the reservoir
  (:func:`~streamtopics.refresh.refinement.refine_recovery`);
* :func:`share`: each topic's share of the stream, the mean of its weight in the mixtures of a pool
  of reservoir documents, published as its prevalence (:mod:`~streamtopics.refresh.describe`);
* :func:`align`: topic ids continued from the previous snapshot, and the births, deaths and changes
  since it (:meth:`~streamtopics.refresh.lineage.RefreshState.publish`);
* :func:`describe`: coherence from the reservoir, and representative documents from the pool
  (:mod:`~streamtopics.refresh.describe`).

What one refresh hands on to the next (the previous snapshot and its coefficients, the topic ids)
is the :class:`~streamtopics.refresh.lineage.RefreshState` the steps are given.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from .anchor_selection import select_anchors
from .carried import refine_carried
from .emerging import RecentWords
from .describe import (document_pool, newer_share, older_share, pool_mixtures, pooled_rows, recent_shares,
                       representative_documents, topic_coherence, topic_shares)
from .recovery import Recovery, recover_topics
from .refinement import Refinement, recovery_columns, refine_recovery
from .separability import FIT_WORDS, SEPARABLE_FIT, measurable, most_frequent_words
from .device import refinement_device
from .warm_start import warm_start_point


@dataclass(frozen=True)
class StatisticsLimits:
    """What the statistics allow this refresh: ``min_df``, the document frequency a candidate
    anchor needs; ``ceiling``, the most documents (effective, under forgetting) a word may occur
    in to be an anchor or take part in a topic (None: no ceiling); ``background_words``, the mask
    of the words over it, which the background explains alone."""

    min_df: int
    ceiling: float | None
    background_words: np.ndarray | None


def read_statistics(view, config) -> StatisticsLimits:
    """The statistics view step: the floor grows with the documents seen
    (:meth:`~streamtopics.config.ModelConfig.min_document_frequency`), the ceiling is ``max_df``
    of the documents in the sums. A sketch's low-rank view is factorised here, on every BLAS
    thread: on its first use inside the anchor search (one BLAS thread) its V x s products took
    1.25 s at V = 100,000, s = 400, against 0.75-1.0 s on two."""
    if hasattr(view, "factors"):
        view.factors()
    ceiling = None if config.max_df is None else config.max_df * view.n_docs
    background_words = None if ceiling is None else np.asarray(view.document_frequency) > ceiling
    return StatisticsLimits(config.min_document_frequency(view.n_docs), ceiling, background_words)


def choose_anchors(view, limits: StatisticsLimits, config, tracker, state, vocabulary,
                   replaced_slots: set[int], n_docs: int) -> np.ndarray:
    """The anchors step: K anchor word ids by ``anchor_method``
    (:func:`~streamtopics.refresh.anchor_selection.select_anchors`; ``tracker`` for the tracker-based
    methods). With ``anchor_stickiness`` the previous snapshot's anchors still in the vocabulary
    are kept unless a word is clearly farther out, so topics keep their anchors and ids. With the
    default candidate cap, FastAnchorWords' candidates reach deeper into the frequency ranking
    where the sums say the deeper set's anchors fit better
    (:class:`~streamtopics.refresh.candidate_depth.CandidateDepth`; ``n_docs``, the documents seen,
    times that choice). The candidates' block is rectified unless the last try fell back and no
    retry is due yet (:class:`~streamtopics.refresh.rectification.RectificationSchedule`)."""
    previous = None
    if state.snapshot is not None and config.anchor_stickiness is not None:
        previous = [i for i in (vocabulary.index.get(w) for w in state.snapshot.anchors)
                    if i is not None and i not in replaced_slots]

    rectify = state.rectification.steps(config.anchor_rectification, n_docs)
    searches, fallbacks = [], []

    def search(cap):
        searches.append(cap)
        return select_anchors(view, config.n_topics, limits.min_df, cap, config.projection_dim,
                              config.anchor_cleanup, config.seed, method=config.anchor_method, tracker=tracker,
                              min_support=config.rp_min_support, max_df=limits.ceiling, previous=previous,
                              stickiness=config.anchor_stickiness or 0.0, rectify=rectify,
                              on_fallback=lambda: fallbacks.append(cap))

    chooses = config.max_anchor_candidates == "auto" and config.anchor_method == "fastanchors"
    anchors = state.candidate_depth.anchors(view, search, config.candidate_limit(), chooses, n_docs, limits.min_df)
    if config.anchor_rectification > 0 and config.anchor_method == "fastanchors":
        state.rectification.record(n_docs, tried=rectify > 0, fell_back=len(fallbacks) == len(searches))
    return anchors


def emerging_subjects(anchors: np.ndarray, view, config, state, vocabulary, recent: RecentWords | None) -> np.ndarray:
    """The emerging subjects' step: with ``emerging_anchors``, after the burn-in and over exact sums,
    an anchor for each subject whose words' rate jumped since the last refresh (``recent``) that
    ``anchors`` miss (:class:`~streamtopics.refresh.emerging.EmergingAnchors`; it remembers the words
    placed), the falling words of the topics announced stopped left out of its drift guard."""
    emerging, snapshot = state.emerging, state.snapshot
    if not (config.emerging_anchors and state.settled and config.half_life is None):
        emerging.clear()
        return anchors
    stopped = [k for k, topic in enumerate(snapshot.topic_ids) if topic in state.stopped]
    return emerging.apply(anchors, view, recent, vocabulary.words, snapshot.topic_word, stopped)


def moving_subjects(state, vocabulary, recent: RecentWords | None) -> None:
    """The moving subjects' step: after the burn-in, which topics of the last snapshot a subject
    rising since the last refresh continues (:class:`~streamtopics.refresh.moving.MovingTopics`),
    so that the events take their drift for no stop."""
    if not state.settled:
        state.moving.leads = {}
        return
    state.moving.update(recent, vocabulary.words, state.snapshot.topic_ids, state.snapshot.topic_word)


def seeded_for_emerging_subjects(result: Recovery, columns: dict[int, np.ndarray]) -> Recovery:
    """The recovery with the topic of each anchor placed for an emerging subject replaced by the
    subject's seed column (:func:`~streamtopics.refresh.emerging.lift_column`), which the refinement
    starts from."""
    if not columns:
        return result
    topic_word = np.array(result.topic_word, dtype=np.float64)
    for slot, anchor in enumerate(np.asarray(result.anchors).tolist()):
        column = columns.get(int(anchor))
        if column is not None and column.sum() > 0:
            rows = min(topic_word.shape[0], column.size)
            topic_word[:, slot] = 0.0
            topic_word[:rows, slot] = column[:rows] / column[:rows].sum()
    return dataclasses.replace(result, topic_word=topic_word)


def recover(view, anchors: np.ndarray, limits: StatisticsLimits, config, state, vocabulary) -> tuple[Recovery, bool]:
    """The recovery step: every word as a mixture of the anchors, and the topics from it
    (:func:`~streamtopics.refresh.recovery.recover_topics`); with ``warm_start`` from the previous
    refresh's solution, its columns following the new anchors
    (:func:`~streamtopics.refresh.warm_start.warm_start_point`), since most words barely move between
    refreshes. Returns the recovery and whether it was warm-started."""
    start = None
    if config.warm_start and state.coefficients is not None and state.snapshot is not None:
        previous = np.array([vocabulary[w] for w in state.snapshot.anchors])
        start = warm_start_point(state.coefficients, previous, view, anchors, config.recovers_background)
    fit_words = most_frequent_words(view, FIT_WORDS) if config.recovery == "l2" and measurable(view) else None
    result = recover_topics(view, anchors, start, config.recovery, config.recovery_tol, config.recovery_max_iter,
                            background=config.recovers_background, background_words=limits.background_words,
                            fit_words=fit_words)
    return result, start is not None


def refine(result: Recovery, reservoir, limits: StatisticsLimits, config, state,
           n_docs: int) -> tuple[Recovery, Refinement | None]:
    """The refinement step: the recovered topics refined over the ``reservoir`` documents, which
    fit the likelihood of recent text better than the moments alone; without a reservoir the
    recovery as it is. With ``refine_carry`` (CVB0 sweeps on the CPU), once the burn-in is over or
    the reservoir full, the refinement continues the state's carried one
    (:func:`~streamtopics.refresh.carried.refine_carried`), otherwise it starts from the anchor seed
    (:func:`~streamtopics.refresh.refinement.refine_recovery`; with ``refine_fill_restarts=False`` the
    carried one's restart, whose shares the refresh after the burn-in carries on).
    Where the anchors explain the frequent words' rows to within their sampling noise (separable
    sums, :mod:`~streamtopics.refresh.separability`) the recovery is published unrefined: the
    refinement would move it away from the truth."""
    if reservoir is None:
        return result, None
    n_columns = config.n_topics + (result.background is not None)
    device = refinement_device(config.refine_device, n_columns)  # first: a device asked for and missing is an error
    if result.fit_to_noise is not None and result.fit_to_noise < SEPARABLE_FIT:
        return result, Refinement(recovery_columns(result), None,
                                  source="none: the anchors fit the sums to their noise")
    full = len(reservoir) >= config.resolved_reservoir_size()
    early = state.settled and config.half_life is None  # a forgetting model follows its seed until full
    ids_first = not config.refine_fill_restarts and config.half_life is None  # the burn-in's shares kept to carry on
    if config.refine_carry and config.refine_sweeps > 0 and (full or early or ids_first) and device == "cpu":
        return refine_carried(result, reservoir, state.carried, config.n_topics, limits.background_words, n_docs,
                              config, full, new_subjects=bool(state.emerging.placed), from_seed=not (full or early))
    return refine_recovery(result, reservoir, config.n_topics, limits.background_words, config.refine_iterations,
                           config.refine_smoothing, config.refine_sweeps, config.refine_device)


def align(state, result: Recovery, vocabulary, n_docs: int, position, stream_time, replaced_slots: set[int],
          pooled: tuple | None = None):
    """The alignment step: the snapshot, its topic ids continued from the previous snapshot (and
    the missing and departed topics) and its events, the lineage moved on
    (:meth:`~streamtopics.refresh.lineage.RefreshState.publish`)."""
    pool = None if pooled is None or pooled[2] is None else (pooled[0], pooled[2])
    return state.publish(result, vocabulary, n_docs, position, stream_time, replaced_slots, pool)


def share(result: Recovery, reservoir, config, stamps=None) -> tuple[Recovery, tuple | None]:
    """The share step: ``result`` with each topic's share of the stream as its prevalence, the
    mean of its weight in the mixtures of a pool of the ``reservoir``'s documents
    (:func:`~streamtopics.refresh.describe.topic_shares`; a forgetting model's with a half-life in
    documents weighs them as its sums do, one in stream time equally), and ``(pool, mixtures,
    pool stamps)`` for the description and the events. With the reservoir documents' ``stamps``,
    each topic's :func:`~streamtopics.refresh.describe.older_share`, ``newer_share`` and
    ``recent_shares`` too (new and stopped subjects); without, the pool stamps are None. Without a reservoir, or with no
    known word in it, the recovery's share of the tokens stays, and the pool is None."""
    if reservoir is None:
        return result, None
    half_life = config.half_life if config.half_life_unit == "documents" else None
    pool, weights = document_pool(reservoir, result.topic_word.shape[0], half_life=half_life)
    mixtures = pool_mixtures(result, pool)
    shares = topic_shares(pool, mixtures, weights)
    if shares is None:
        return result, None
    pool_stamps = None if stamps is None else np.asarray(stamps)[pooled_rows(len(reservoir), half_life=half_life)]
    older, newer, recent = ((None, None, None) if pool_stamps is None
                            else (older_share(mixtures, pool_stamps), newer_share(mixtures, pool_stamps),
                                  recent_shares(result, reservoir, stamps, result.topic_word.shape[0], mixtures,
                                                pool_stamps)))
    recent_share, recent_expected = (None, None) if recent is None else recent
    return (dataclasses.replace(result, prevalence=shares, older_share=older, newer_share=newer,
                                recent_share=recent_share, recent_expected=recent_expected),
            (pool, mixtures, pool_stamps))


def describe(snapshot, reservoir, excerpts, pooled: tuple | None) -> None:
    """The description step: each topic's coherence over the ``reservoir`` and its representative
    documents among the ``pooled`` ones (with the texts of ``excerpts``), set on ``snapshot``;
    nothing without a reservoir."""
    if reservoir is not None:
        snapshot.coherence = topic_coherence(snapshot, reservoir)
    if pooled is not None:
        snapshot.representatives = representative_documents(snapshot, *pooled[:2], excerpts)


def run_refresh(state, view, tracker, vocabulary, n_docs: int, position, reservoir, stream_time,
                replaced_slots: set[int], excerpts=None, stamps=None) -> tuple:
    """The steps in order over the statistics ``view``, continuing ``state`` (a
    :class:`~streamtopics.refresh.lineage.RefreshState`); returns the snapshot and the timings of its
    steps (see :meth:`~streamtopics.refresh.lineage.RefreshState.advance`)."""
    config = state.config
    t0 = time.perf_counter()
    limits = read_statistics(view, config)
    anchors = choose_anchors(view, limits, config, tracker, state, vocabulary, replaced_slots, n_docs)
    recent = RecentWords.of(reservoir, stamps, view.n_words) if state.settled else None  # both steps read it
    anchors = emerging_subjects(anchors, view, config, state, vocabulary, recent)
    moving_subjects(state, vocabulary, recent)
    t_anchors = time.perf_counter() - t0
    result, warm = recover(view, anchors, limits, config, state, vocabulary)
    result = seeded_for_emerging_subjects(result, state.emerging.columns)
    t_refine = time.perf_counter()
    result, refinement = refine(result, reservoir, limits, config, state, n_docs)
    t_refine = time.perf_counter() - t_refine
    t_share = time.perf_counter()
    result, pooled = share(result, reservoir, config, stamps)
    t_share = time.perf_counter() - t_share
    t1 = time.perf_counter()
    snapshot = align(state, result, vocabulary, n_docs, position, stream_time, replaced_slots, pooled)
    t_describe = time.perf_counter()
    describe(snapshot, reservoir, excerpts, pooled)
    t_describe = time.perf_counter() - t_describe
    timings = {
        "anchors_s": t_anchors, "recovery_s": result.timings["recovery"],
        "products_s": result.timings["products"], "solve_s": result.timings["solve"],
        "share_s": t_share, "align_s": time.perf_counter() - t1 - t_describe, "describe_s": t_describe,
        "total_s": time.perf_counter() - t0,
        "warm": warm, "iterations_mean": float(result.iterations.mean()),
        "iterations_max": int(result.iterations.max()), "refine_s": t_refine,
        "emerging_anchors": list(state.emerging.placed),
    }
    if refinement is not None:
        timings.update(refinement_heldout=refinement.heldout, refinement_best_iteration=refinement.best_iteration,
                       refinement_kept_iteration=refinement.kept_iteration, refinement_sweeps=refinement.sweeps,
                       refinement_source=refinement.source)
    return snapshot, timings
