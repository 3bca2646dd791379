"""Seeded likelihood refinement of recovered topics (docs/design.md, "Refinement"; Awasthi & Risteski 2015).

Anchor recovery gives every topic a good start ("seeded initialisation"); alternating KL
minimisation (KL-tEM) then improves the likelihood on a bounded reservoir of recent documents:

* E-step: each document's mixture gamma_d moves towards the minimiser of KL(f_d || A gamma_d)
  (:func:`~streamtopics.inference.infer_mixtures`), by a few multiplicative updates from the
  previous iteration's gamma_d (converging it from uniform every iteration cost several times
  more and, on 20newsgroups, held out slightly worse), in float32
  (:data:`~streamtopics.refresh.kl_tem.SINGLE`; the step itself is :mod:`~streamtopics.refresh.kl_tem`);
* M-step: ``A_jk <- A_jk * sum_d H_dj gamma_dk / (A gamma_d)_j``, then every column is
  renormalised. With token counts H_d as weights this is the EM step of the multinomial
  mixture likelihood ``sum_d sum_j H_dj log (A gamma_d)_j``, so the reservoir's own likelihood
  never decreases.

What must not decrease is the likelihood of documents *not* used for fitting. The reservoir is
therefore split: every tenth document is held out (:data:`HOLDOUT_EVERY`) and scored by document
completion (gamma fitted on half of each held-out document's distinct words, the log-likelihood
per token measured on the other half). Every iterate is scored, the seed being iterate 0 (the
held-out mixtures fitted to the seed by 100 updates from uniform, then moved along with the
iterates by a few warm-started updates, as the fitted ones are: with 30 for the seed the
iterates' mixtures were the more converged, which fits the observed halves closer and scored
them lower, a bias towards the seed). Iterating stops once the score has clearly passed its peak,
and :func:`refine_topics` returns the latest iterate within a tolerance of the best score (its
docstring says why), so refinement never lowers the held-out likelihood below its seed's by more
than that tolerance. The M-step's pseudo-count (``smoothing``) matters here: without it EM gives
0 to every word a topic's sample lacks, held-out tokens of such words cost log(1e-9), and the
score turned down after 1-2 iterations while the topics were still getting closer to the truth
(Gibbs-truth streams: 20 Newsgroups K=50 at 20,000 documents, L1 0.95 after the early stop vs
0.68 after 15 iterations); with 0.01 it peaks where the topics stop improving.

After KL-tEM, ``sweeps`` sweeps of sparse CVB0 (:mod:`~streamtopics.refresh.collapsed`, LDA's collapsed
variational updates) run over the same fitted documents from the iterate kept, with the
mixtures of its E-step placing the first shares. They are not scored: the held-out completion
score above fell from CVB0's first sweep on while its topics kept approaching the truth
(Reuters K = 50, alpha 0.1, 100,000 documents: -7.263 to -7.380 per token over 20 sweeps, L1
0.273 to 0.218), and a completion score folded in by CVB0 itself rose on Reuters but fell by
0.06 on Debian K = 50, alpha 0.1, while L1 fell from 0.694 to 0.508.

The scale of Dirichlet alpha (recovery gives alpha up to a scale, proportional to the topic
prevalences) is chosen on the same held-out documents (:func:`choose_alpha_scale`): the
completion mixture is the posterior-mean style blend ``(n_obs gamma + alpha) / (n_obs + sum
alpha)`` and the scale with the best held-out likelihood per token wins. It reuses the held-out
mixtures the refinement fitted to the KL-tEM iterate it kept (a few warm updates adapt them to the
topics as published, after the CVB0 sweeps too): fitting every reservoir document from uniform to
convergence for it took longer than the whole refinement at K = 100 (4.6 s of a 10 s refresh at
V = 15,000).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from .collapsed import LOG_FLOOR, CollapsedShares
from .device import refinement_device
from ..text.documents import DocumentBatch
from ..inference import REASSOCIATE, infer_mixtures
from .kl_tem import WordMajor, kl_tem_step

HELD_UPDATES = 10  # updates of the held-out mixtures per iterate, from the last iterate's (refine_topics)
HELD_TOLERANCE = 0.02  # nats per token: a dip of the held-out score smaller than this neither stops EM nor keeps
# an earlier iterate (refine_topics)
PATIENCE = 10  # iterates without a new best held-out score after which EM stops (refine_topics)
HOLDOUT_EVERY = 10  # every tenth reservoir document is held out to score the iterates, the rest fitted: on the
# quality protocol's 12 Gibbs-truth settings lower L1 than every third in 47 of 48 cells (EM sees 35 % more
# documents; the score, compared between iterates on the same documents, needs few), and the seed's held-out fit,
# a third of the refinement's cost at K = 100, shrinks with it (`git show 8e056d1:BENCHMARKS.md`, "Holding out a
# tenth")
SEED_HELD_UPDATES = 100  # updates fitting the held-out mixtures to the seed from uniform: near convergence,
# so that the seed and the iterates (warm-started from it) are scored alike (refine_topics)
DOCUMENT_PRIOR = 0.003  # CVB0's symmetric Dirichlet on the mixtures: on the quality protocol's 12 Gibbs-truth
# settings (truths drawn with alpha 0.03 and 0.1) 0.003 gave lower L1 at 100k documents than 0.03 in all 12 (Debian
# K = 50, alpha 0.03: 0.279 -> 0.266), and 0.01 or 0.001 no better; real text unchanged (`git show
# 8e056d1:BENCHMARKS.md`, "A sparser document prior for CVB0")
ALPHA_UPDATES = 10  # updates adapting the kept iterate's held-out mixtures to the published topics
EM_DOCUMENTS = 10_000  # on the CPU KL-tEM runs over at most this many of the fitted documents (evenly spaced), the
# CVB0 sweeps over all of them (refine_topics)


def split_for_completion(batch: DocumentBatch) -> tuple[DocumentBatch, DocumentBatch]:
    """Each document's distinct words alternately into an observed and a held-out half
    (documents with fewer than 2 distinct words are dropped)."""
    parts = _split_entries(batch.indptr, batch.indices, batch.counts)
    n = parts[0].size - 1
    return (DocumentBatch(*parts[:3], np.zeros(n, np.uint64)), DocumentBatch(*parts[3:], np.zeros(n, np.uint64)))


@njit(cache=True, nogil=True)
def _split_entries(indptr, indices, counts):
    """:func:`split_for_completion`'s arrays: entries 0, 2, 4, ... of each document of at least
    two entries observed, entries 1, 3, ... held out."""
    n_kept, size = 0, 0
    for d in range(indptr.size - 1):
        if indptr[d + 1] - indptr[d] >= 2:
            n_kept += 1
            size += indptr[d + 1] - indptr[d]
    n_held = size // 2 + n_kept  # at most: a document's held half is the smaller
    observed_ptr, held_ptr = np.zeros(n_kept + 1, np.int64), np.zeros(n_kept + 1, np.int64)
    observed_ids, held_ids = np.empty(size, np.int32), np.empty(n_held, np.int32)
    observed_counts, held_counts = np.empty(size), np.empty(n_held)
    o, h, k = 0, 0, 0
    for d in range(indptr.size - 1):
        if indptr[d + 1] - indptr[d] < 2:
            continue
        for p in range(indptr[d], indptr[d + 1]):
            if (p - indptr[d]) % 2 == 0:
                observed_ids[o], observed_counts[o] = indices[p], counts[p]
                o += 1
            else:
                held_ids[h], held_counts[h] = indices[p], counts[p]
                h += 1
        k += 1
        observed_ptr[k], held_ptr[k] = o, h
    return (observed_ptr, observed_ids[:o].copy(), observed_counts[:o].copy(),
            held_ptr, held_ids[:h].copy(), held_counts[:h].copy())


def _split_reservoir(reservoir: DocumentBatch, holdout_every: int,
                     held: np.ndarray | None = None) -> tuple[DocumentBatch, DocumentBatch]:
    """The documents fitted (those not held out) and the held-out ones: those of the mask
    ``held``, or every ``holdout_every``-th from the first."""
    if held is None:
        held = np.zeros(len(reservoir), bool)
        held[::holdout_every] = True
    return reservoir.select(np.flatnonzero(~held)), reservoir.select(np.flatnonzero(held))


def completion_log_likelihood(observed: DocumentBatch, held: DocumentBatch, topic_word: np.ndarray,
                              alpha: np.ndarray | None = None) -> float:
    """Held-out log-likelihood per token: gamma fitted on ``observed`` (``SEED_HELD_UPDATES``
    updates from uniform, as the refinement scores its seed; optionally blended with the
    Dirichlet ``alpha``), each held-out token scored by ``log (A gamma)_j``."""
    gamma = infer_mixtures(observed, topic_word, None, max_iter=SEED_HELD_UPDATES, tol=1e-5)
    return _completion_score(observed, held, topic_word, gamma, alpha)


def _completion_score(observed, held, topic_word, gamma, alpha=None) -> float:
    """:func:`completion_log_likelihood` given the mixtures fitted on ``observed``."""
    if alpha is None:
        return float(_completion_scores(observed, held, topic_word, gamma)[0])
    alpha = np.asarray(alpha, dtype=np.float64)
    return float(_completion_scores(observed, held, topic_word, gamma, alpha, np.ones(1))[0])


def _completion_scores(observed, held, topic_word, gamma, shape=None, scales=None) -> np.ndarray:
    """The completion score with ``alpha = c * shape`` for every c of ``scales`` (one score
    without ``shape``), in one pass over the held-out tokens: the blended mixture's probability
    of word j is ``(n_obs (A gamma)_j + c (A shape)_j) / (n_obs + c sum(shape))``, so each token
    needs one dot product over the topics whatever the number of scales."""
    topic_word = np.ascontiguousarray(topic_word, dtype=np.float64)
    if shape is None:
        shape, scales = np.zeros(topic_word.shape[1]), np.zeros(1)
    n_obs = (np.add.reduceat(observed.counts, observed.indptr[:-1]) if observed.counts.size
             else np.zeros(len(observed)))
    totals, tokens = _completion_sums(held.indptr, held.indices, held.counts, topic_word,
                                      np.ascontiguousarray(gamma, dtype=np.float64), n_obs, topic_word @ shape,
                                      float(shape.sum()), np.asarray(scales, dtype=np.float64))
    return totals.sum(axis=0) / max(tokens.sum(), 1.0)


@njit(cache=True, nogil=True, parallel=True, fastmath=REASSOCIATE)
def _completion_sums(indptr, indices, counts, topic_word, gamma, n_obs, shape_mass, shape_total, scales):
    """Per held-out document (in parallel; each row is one thread's), ``sum_j H_dj log max(p_j,
    LOG_FLOOR)`` for each scale, and its tokens: see :func:`_completion_scores`."""
    n_docs = indptr.size - 1
    totals = np.zeros((n_docs, scales.size))
    tokens = np.zeros(n_docs)
    for d in prange(n_docs):
        for p in range(indptr[d], indptr[d + 1]):
            j = indices[p]
            mix = 0.0
            for a in range(topic_word.shape[1]):
                mix += topic_word[j, a] * gamma[d, a]
            for s in range(scales.size):
                c = scales[s]
                value = mix if c == 0.0 else (n_obs[d] * mix + c * shape_mass[j]) / (n_obs[d] + c * shape_total)
                totals[d, s] += counts[p] * np.log(max(value, LOG_FLOOR))
            tokens[d] += counts[p]
    return totals, tokens


@dataclass
class HeldOut:
    """The held-out documents split for completion, with mixtures fitted on their observed halves."""
    observed: DocumentBatch
    held: DocumentBatch
    mixtures: np.ndarray


@dataclass
class Refinement:
    topic_word: np.ndarray
    held_out: HeldOut  # its mixtures are the ones fitted to ``topic_word``
    heldout: list[float] = field(default_factory=list)  # held-out LL per token of iterates 0 (seed), 1, ...
    best_iteration: int = 0  # the iterate with the highest held-out score
    kept_iteration: int = 0  # the KL-tEM iterate kept: the latest within the tolerance of the best
    sweeps: int = 0  # CVB0 sweeps run from it (``topic_word`` is their result when > 0)
    shares: CollapsedShares | None = None  # the sweeps' shares (on the CPU), for a carried refinement
    source: str = "restart"  # what ``topic_word`` continues: see :func:`~streamtopics.refresh.carried.refine_carried`


def refine_recovery(recovery, reservoir: DocumentBatch, n_topics: int, background_words: np.ndarray | None,
                    iterations: int, smoothing: float, sweeps: int, device_setting: str):
    """The refresh's refinement step: the recovered topics (a :class:`~streamtopics.refresh.recovery.Recovery`)
    refined over the ``reservoir`` (:func:`refine_topics`) and returned as a Recovery again, with
    the :class:`Refinement` run.

    The background is refined with the topics: both explain the reservoir's tokens. The words of
    ``background_words`` (over the document-frequency ceiling) belong to the background alone, so
    the share of them the smoothing gave the topics is taken back and the topics renormalised.
    Recovery gives alpha's shape (its direction, or the prevalences where it is all 0); the scale
    with the best held-out completion is chosen here (:func:`choose_alpha_scale`).
    ``device_setting`` is ``refine_device`` (:func:`~streamtopics.refresh.device.refinement_device`)."""
    columns = recovery_columns(recovery)
    refinement = refine_topics(columns, reservoir, iterations, smoothing=smoothing, sweeps=sweeps,
                               device=refinement_device(device_setting, columns.shape[1]))
    refined, _ = refined_recovery(recovery, refinement.topic_word, n_topics, background_words, refinement.held_out)
    return refined, refinement


def recovery_columns(recovery) -> np.ndarray:
    """The recovered topics and, when recovered, the background as one more column: the refinement's seed."""
    columns = (recovery.topic_word if recovery.background is None
               else np.column_stack([recovery.topic_word, recovery.background]))
    return np.ascontiguousarray(columns, dtype=np.float64)


def refined_recovery(recovery, columns: np.ndarray, n_topics: int, background_words: np.ndarray | None,
                     held_out: HeldOut | float) -> tuple:
    """``recovery`` with its topics (and background) replaced by the refined ``columns``, and
    alpha's scale: the words of ``background_words`` taken from the topics, alpha's shape from
    the recovery and its scale chosen on ``held_out`` (:func:`choose_alpha_scale`), or given as
    a number."""
    topic_word = columns[:, :n_topics]
    if background_words is not None and background_words.any():  # the smoothing gave them some
        topic_word = topic_word.copy()
        topic_word[background_words[: topic_word.shape[0]]] = 0.0
        topic_word /= topic_word.sum(axis=0, keepdims=True)
    shape = np.asarray(recovery.alpha, dtype=np.float64)
    shape = shape / shape.sum() if shape.sum() > 0 else np.asarray(recovery.prevalence)
    scale = held_out if isinstance(held_out, float) else choose_alpha_scale(topic_word, shape, held_out)[0]
    background = None if recovery.background is None else columns[:, n_topics]
    return dataclasses.replace(recovery, topic_word=topic_word, alpha=scale * shape, background=background), scale


def refine_topics(topic_word: np.ndarray, reservoir: DocumentBatch, iterations: int = 10, prior=None,
                  holdout_every: int = HOLDOUT_EVERY, patience: int = PATIENCE, smoothing: float = 0.0,
                  tolerance: float = HELD_TOLERANCE, sweeps: int = 0,
                  document_prior: float = DOCUMENT_PRIOR, device: str = "cpu",
                  held_out: np.ndarray | None = None, hold_from: int | None = None,
                  em_documents: int | None = EM_DOCUMENTS) -> Refinement:
    """KL-tEM seeded with ``topic_word`` on the reservoir's fitting part, then ``sweeps`` sweeps of
    sparse CVB0 (:mod:`~streamtopics.refresh.collapsed`) from the KL-tEM iterate kept: the latest whose
    held-out completion likelihood is within ``tolerance`` of the best (iterate 0 = the seed).

    At most ``iterations`` iterations. An iterate scoring more than ``tolerance`` (log-likelihood
    per token) below the best stops EM at once: the held-out likelihood of EM on a small reservoir
    rises, peaks and then falls (overfitting). A smaller dip does not: EM goes on until
    ``patience`` iterates in a row brought no new best. From an anchor seed the score often peaks
    after 1-2 iterations, dips by 0.01-0.015 and then climbs past that peak while the topics keep
    approaching the truth (Gibbs-truth streams, 20 Newsgroups K = 50, alpha = 0.1, 50,000
    documents: L1 0.78 at the first peak, 0.39 after 30 iterations; ``git show
    8e056d1:BENCHMARKS.md``, "Refinement that looks past a dip"); where the score falls it falls by
    more than the tolerance within a few iterations, so those refreshes stop about as early as
    before.

    The iterate returned (``kept_iteration``) is the last one run whose score is within
    ``tolerance`` of the best (``best_iteration``): a slow decline of the score after its peak
    came with topics still approaching the truth (20 Newsgroups K = 20, alpha = 0.1, 100,000
    documents: L1 0.144 at the peak, iterate 1, and 0.106 at iterate 5, 0.019 nats per token
    below it), a fast one (Debian, short documents) with topics moving away, and the fast one
    stops EM before any of its iterates could be kept.

    ``held_out`` (a mask over the reservoir) chooses the held-out documents instead of every
    ``holdout_every``-th. ``device="cuda"`` runs the E-steps, M-steps and CVB0 sweeps on a CUDA
    device (:mod:`~streamtopics.refresh.gpu`); the result equals the CPU's to rounding where the
    fitted documents are at most ``em_documents``. On the CPU KL-tEM runs over at most
    ``em_documents`` of them, evenly spaced, and the CVB0 sweeps over all, their first shares from
    mixtures fitted afresh (:meth:`HostRefinementSteps.cvb0_sweeps`): KL-tEM only moves the seed
    into the basin the sweeps then settle, and on seven Gibbs-truth streams of 100,000 documents
    refreshed every 5,000 its topics were as close to the truth with 10,000 documents as with the
    reservoir's 14,000-45,000 (BENCHMARKS.md, "Carried refinement"), for a quarter less
    refreshing. The sweeps' shares are returned too (:attr:`Refinement.shares`); with
    ``hold_from`` their columns from that one on (the background) stay the seed's
    (:meth:`~streamtopics.refresh.collapsed.CollapsedShares.hold`).
    """
    seed = np.ascontiguousarray(topic_word, dtype=np.float64)
    fit, held_documents = _split_reservoir(reservoir, holdout_every, held_out)
    observed, held = split_for_completion(held_documents)
    if device == "cuda":
        from .gpu import DeviceRefinementSteps
        steps = DeviceRefinementSteps(fit, observed, seed.shape[0])
    else:
        steps = HostRefinementSteps(fit, observed, seed.shape[0], em_documents)
    current, mixtures = seed, None
    held_mixtures = steps.held_mixtures(seed, None, SEED_HELD_UPDATES)
    kept = Refinement(seed, HeldOut(observed, held, held_mixtures), [_completion_score(observed, held, seed, held_mixtures)])
    fitted_to_kept = None  # the fitted documents' mixtures from the E-step on the kept iterate
    for it in range(1, iterations + 1):
        current, mixtures = steps.kl_tem_step(current, mixtures, prior, smoothing)
        if kept.kept_iteration == it - 1:
            fitted_to_kept = mixtures
        # the held-out mixtures follow the iterates as the fitted ones do (warm, a few updates)
        held_mixtures = steps.held_mixtures(current, held_mixtures, HELD_UPDATES)
        score = _completion_score(observed, held, current, held_mixtures)
        kept.heldout.append(score)
        if score < kept.heldout[kept.best_iteration] - tolerance:
            break
        kept.topic_word, kept.kept_iteration, kept.held_out = current, it, HeldOut(observed, held, held_mixtures)
        if score > kept.heldout[kept.best_iteration]:
            kept.best_iteration = it
        elif it - kept.best_iteration >= patience:
            break
    if sweeps > 0:
        # the mixtures of the last E-step when the last iterate run was kept (its E-step fitted them to
        # the iterate before): they only place the first shares
        kept.topic_word, kept.shares = steps.cvb0_sweeps(
            kept.topic_word, fitted_to_kept if fitted_to_kept is not None else mixtures, sweeps, document_prior,
            smoothing, None if hold_from is None else (hold_from, seed))
        kept.sweeps = sweeps
    return kept


class HostRefinementSteps:
    """The steps of :func:`refine_topics` over its fitted and held-out documents, on the CPU
    (:class:`~streamtopics.refresh.gpu.DeviceRefinementSteps` has the same methods)."""

    def __init__(self, fit: DocumentBatch, observed: DocumentBatch, n_words: int, em_documents: int | None = None):
        """KL-tEM's steps run over at most ``em_documents`` of the ``fit`` documents, evenly
        spaced (None: all), the CVB0 sweeps over all of them."""
        self.fit, self.observed = fit, observed
        share = len(fit) if em_documents is None else min(len(fit), max(int(em_documents), 1))
        self.em_fit = fit if share == len(fit) else fit.select(np.arange(share) * len(fit) // share)
        self.by_word = WordMajor.of(self.em_fit, n_words)

    def held_mixtures(self, topic_word: np.ndarray, start: np.ndarray | None, updates: int) -> np.ndarray:
        """The observed halves' mixtures after ``updates`` updates from ``start`` (None: uniform)."""
        return infer_mixtures(self.observed, topic_word, None, max_iter=updates, tol=1e-5, start=start)

    def kl_tem_step(self, topic_word, mixtures, prior, smoothing) -> tuple[np.ndarray, np.ndarray]:
        """One KL-tEM step over KL-tEM's share of the fitted documents (:func:`kl_tem_step`)."""
        return kl_tem_step(self.em_fit, topic_word, mixtures, prior, smoothing=smoothing, by_word=self.by_word)

    def cvb0_sweeps(self, start: np.ndarray, mixtures: np.ndarray | None, sweeps: int, document_prior: float,
                    smoothing: float, hold=None) -> tuple[np.ndarray, CollapsedShares]:
        """The topics after ``sweeps`` sparse CVB0 sweeps over the fitted documents from ``start``
        (first shares placed by ``mixtures``, KL-tEM's, when it ran over all of them; otherwise
        fitted to ``start``), and the shares; ``hold``: ``(first, columns)`` for
        :meth:`~streamtopics.refresh.collapsed.CollapsedShares.hold`."""
        self.by_word = None  # KL-tEM's word-major copy (50 MB at K = 100), freed before the shares are allocated
        shares = CollapsedShares.seeded(self.fit, start, mixtures if self.em_fit is self.fit else None)
        if hold is not None:
            shares.hold(*hold)
        for _ in range(sweeps):
            shares.sweep(document_prior, smoothing)
        return shares.topic_word(smoothing), shares


def choose_alpha_scale(topic_word: np.ndarray, prevalence: np.ndarray, held_out: HeldOut,
                       scales=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)) -> tuple[float, dict[float, float]]:
    """The scale c of ``alpha = c * prevalence`` with the best held-out completion likelihood.

    ``held_out`` is a refinement's (:attr:`Refinement.held_out`); ``topic_word`` may have fewer
    columns than its mixtures (a background column dropped after refinement): the mixtures are
    restricted to the topics and renormalised, then ``ALPHA_UPDATES`` warm updates fit them to
    ``topic_word``.
    """
    k = topic_word.shape[1]
    start = held_out.mixtures[:, :k]
    total = start.sum(axis=1, keepdims=True)
    start = np.where(total > 0, start / np.where(total > 0, total, 1.0), 1.0 / k)
    gamma = infer_mixtures(held_out.observed, topic_word, None, max_iter=ALPHA_UPDATES, tol=1e-5, start=start)
    prevalence = np.asarray(prevalence, dtype=np.float64) / np.sum(prevalence)
    values = _completion_scores(held_out.observed, held_out.held, topic_word, gamma, prevalence,
                                np.asarray(scales, dtype=np.float64))
    scores = {float(c): float(v) for c, v in zip(scales, values)}
    return max(scores, key=scores.get), scores
