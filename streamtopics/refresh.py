"""One refresh: statistics -> anchors -> recovered topics (DESIGN 2.3-2.4).

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

from .anchors import candidate_words, fast_anchor_words, random_projection
from .recovery import dirichlet_alpha, recover_kl, recover_l2, topic_covariance, topics_from_coefficients


class NotEnoughCandidatesError(ValueError):
    """Fewer candidate anchor words than topics: the stream is too young (or K too large)."""


def _normalised_rows(view, ids: np.ndarray) -> np.ndarray:
    mass = view.word_mass[ids]
    rows = np.array(view.rows(ids), dtype=np.float64)  # a copy: dense views return their own rows
    rows /= np.where(mass > 0, mass, 1.0)[:, None]
    return rows


def _candidate_rows(view, candidates: np.ndarray, projection_dim: int | None, seed: int, chunk: int = 512) -> np.ndarray:
    """Qbar rows of the candidates, randomly projected a chunk at a time when asked, so that at
    most ``chunk`` full rows exist at once (3,000 full rows at V = 15,000 would take 360 MB)."""
    if not projection_dim or projection_dim >= view.n_words:
        return _normalised_rows(view, candidates)
    projection = random_projection(view.n_words, projection_dim, seed)
    return np.vstack([_normalised_rows(view, candidates[s : s + chunk]) @ projection
                      for s in range(0, candidates.size, chunk)])


def select_anchors(view, n_topics: int, min_df: int, max_candidates: int | None = None,
                   projection_dim: int | None = None, cleanup: bool = True, seed: int = 0) -> np.ndarray:
    """FastAnchorWords over the candidate words' Qbar rows; returns K word ids."""
    candidates = candidate_words(view.document_frequency, min_df, max_candidates)
    candidates = candidates[view.word_mass[candidates] > 0]
    if candidates.size < n_topics:
        raise NotEnoughCandidatesError(
            f"{candidates.size} words occur in at least {min_df} documents; {n_topics} topics need "
            f"at least {n_topics} candidate anchors (absorb more documents or lower anchor_min_df)"
        )
    rows = _candidate_rows(view, candidates, projection_dim, seed)
    return candidates[fast_anchor_words(rows, n_topics, cleanup=cleanup)]


def match_columns(previous_rows: np.ndarray, current_rows: np.ndarray) -> np.ndarray:
    """For each current anchor row, the previous anchor row it continues (Hungarian, L1)."""
    cost = np.array([np.abs(current_rows - row).sum(axis=1) for row in previous_rows])
    previous_index, current_index = linear_sum_assignment(cost)
    mapping = np.full(current_rows.shape[0], -1, np.int64)
    mapping[current_index] = previous_index
    return mapping


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


def recover_topics(view, anchors: np.ndarray, start: np.ndarray | None = None, method: str = "l2",
                   tol: float = 1e-5, max_iter: int = 500, block_rows: int = 1024) -> Recovery:
    """RecoverL2 or RecoverKL from the given anchors, warm-started from ``start`` if given."""
    timings = {}
    t0 = time.perf_counter()
    mass = view.word_mass
    safe_mass = np.where(mass > 0, mass, 1.0)
    anchor_rows = _normalised_rows(view, anchors)
    if method == "l2":
        products = view.matmul(np.ascontiguousarray(anchor_rows.T)) / safe_mass[:, None]
        timings["products"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        coefficients, iterations = recover_l2(anchor_rows, products, start, tol, max_iter)
    elif method == "kl":
        timings["products"] = 0.0
        t1 = time.perf_counter()
        parts = []
        for r0 in range(0, view.n_words, block_rows):
            ids = np.arange(r0, min(r0 + block_rows, view.n_words))
            block_start = None if start is None else start[ids]
            parts.append(recover_kl(anchor_rows, _normalised_rows(view, ids), block_start, tol, max_iter))
        coefficients = np.vstack([p[0] for p in parts])
        iterations = np.concatenate([p[1] for p in parts])
    else:
        raise ValueError(f"unknown recovery method {method!r}; use 'l2' or 'kl'")
    timings["solve"] = time.perf_counter() - t1
    total = mass.sum()
    topics = topics_from_coefficients(coefficients, mass / total if total > 0 else mass)
    anchor_block = view.rows(anchors)[:, anchors] / max(view.n_docs, 1)
    covariance = topic_covariance(topics.topic_word, anchors, anchor_block)
    alpha = dirichlet_alpha(topics.prevalence, covariance)
    timings["recovery"] = time.perf_counter() - t0
    return Recovery(np.asarray(anchors), coefficients, topics.topic_word, topics.prevalence, covariance,
                    alpha, iterations, timings)
