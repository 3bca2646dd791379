"""Recovery of the topic-word matrix from anchors (Arora et al. 2013, Algorithm 3): the refresh's recovery step.

:func:`recover_topics` writes every word's row-normalised co-occurrence row as a convex
combination ``C_i`` of the anchor rows (solved per word by :mod:`~streamtopics.refresh.l2_recovery` or
:mod:`~streamtopics.refresh.kl_recovery`), optionally with a background pseudo-anchor. Bayes' rule then
gives ``A'_ik = p(w=i) C_ik`` whose column sums are the topic marginals p(z); normalising the
columns gives A (:func:`topics_from_coefficients`); the anchor block of the co-occurrences gives
the topic covariance and from it Dirichlet alpha (:func:`topic_covariance`,
:func:`dirichlet_alpha`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .kl_recovery import recover_kl
from .l2_recovery import recover_l2
from .separability import fit_to_noise
from .statistics_view import normalised_rows

# The background's cost per unit of coefficient, in units of the mean squared anchor-row norm:
# a tie-breaker. In a separable model the unigram row lies inside the anchors' hull, so the
# topics and the background explain a word equally well; the penalty gives it to the topics there
# (synthetic tests: L1 as without a background), while on real text, where the background fits
# the common words far better, it changes nothing measurable (commit c65a363, which added it).
BACKGROUND_PENALTY = 1e-3

#: The V x V x K product of recover_topics in float32 over the float64 sums
#: (:meth:`~streamtopics.statistics.cooccurrence.CooccurrenceStats.matmul` ``single``): 1.4-1.6 times as fast
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
    fit_to_noise: float | None = None  # the frequent words' residual over their sampling noise (separability.py)
    older_share: np.ndarray | None = None  # per topic, describe.older_share of the share step's pool (None: unknown)
    newer_share: np.ndarray | None = None  # per topic, describe.newer_share of the same
    recent_share: np.ndarray | None = None  # per topic, describe.recent_shares: the ratio (None: unknown)
    recent_expected: np.ndarray | None = None  # ... and the weight the recent documents would hold at the older one


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
                   anchor_groups=None, background: bool = False, background_words=None,
                   fit_words: np.ndarray | None = None) -> Recovery:
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
    background: they take no part in any topic. With ``fit_words`` (RecoverL2 only) the recovery
    also measures how far those words' rows lie from the anchors' hull in units of their sampling
    noise (:func:`~streamtopics.refresh.separability.fit_to_noise`, ``Recovery.fit_to_noise``)."""
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
        fit_products = None if fit_words is None else products[fit_words]  # before the background's penalty
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
    fit = None
    if fit_words is not None and method == "l2":
        fit = fit_to_noise(view, fit_words, coefficients[fit_words], fit_products, anchor_rows)
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
                    alpha, iterations, timings, common, share, fit)


@dataclass
class Topics:
    """The result of Bayes' rule on the recovered coefficients."""

    topic_word: np.ndarray  # A, V x K, columns sum to 1
    prevalence: np.ndarray  # p(z), K, sums to 1


def topics_from_coefficients(coefficients: np.ndarray, word_probability: np.ndarray) -> Topics:
    """``A'_ik = p(w=i) C_ik``; p(z) = column sums of A'; A = A' with columns normalised."""
    joint = coefficients * word_probability[:, None]
    prevalence = joint.sum(axis=0)
    joint /= np.maximum(prevalence, 1e-300)  # in place: the topics (one V x K array, not two)
    return Topics(joint, prevalence / max(prevalence.sum(), 1e-300))


def topic_covariance(topic_word: np.ndarray, anchors: np.ndarray, anchor_block: np.ndarray) -> np.ndarray:
    """R = E[W W^T] from the anchor block of Q: ``Q_SS = A_S R A_S^T`` (A_S = rows of A at the
    anchors), the identity ``Q = A R A^T`` restricted to anchor rows and columns. It avoids a
    second V x V x K pass, and is exact for the population Q of a separable model."""
    inverse = np.linalg.pinv(topic_word[anchors])
    covariance = inverse @ anchor_block @ inverse.T
    covariance = 0.5 * (covariance + covariance.T)
    return covariance / max(covariance.sum(), 1e-300)


def dirichlet_alpha(prevalence: np.ndarray, covariance: np.ndarray, default_concentration: float = 1.0) -> np.ndarray:
    """Dirichlet parameters whose moments match p(z) and R.

    For W ~ Dir(alpha) with alpha0 = sum(alpha) and p = alpha / alpha0,
    ``trace(R) = (alpha0 |p|^2 + 1) / (alpha0 + 1)``, so ``alpha0 = (1 - tr) / (tr - |p|^2)``.
    When the estimate is not a valid concentration (noisy R), ``default_concentration`` is used.
    The scale can be refined by held-out likelihood (see the refinement module).
    """
    trace = float(np.trace(covariance))
    spread = float(prevalence @ prevalence)
    denominator = trace - spread
    alpha0 = (1.0 - trace) / denominator if denominator > 1e-12 else -1.0
    if not np.isfinite(alpha0) or alpha0 <= 0:
        alpha0 = default_concentration
    return prevalence * alpha0
