"""Whether the anchors already explain the sums: the recovery's residual against its sampling noise.

RecoverL2 writes each word's Qbar row as a convex combination of the anchors' rows. Where the
topics are separable (every topic has anchor words: the seed papers' setting, Arora et al. 2013),
what it cannot write is sampling noise alone, and the anchor solution is as close to the truth as
the sums allow; the likelihood refinement then only moves it away (a separable stream, V = 2,000,
K = 20, 50,000 documents: L1 0.16 for the recovery, 0.29 refined). Text is not separable, the
residual stands well above the noise, and the refinement brings the topics much closer (20
Newsgroups K = 20 0.57 -> 0.15).

:func:`fit_to_noise` measures the difference: over the :data:`FIT_WORDS` most frequent words, the
mass-weighted mean of each word's squared residual over the squared noise its row would have from
its own co-occurrences alone, ``(1 - ||Qbar_i||^2) / (c_i (L_i - 1))`` (``c_i`` its tokens, ``L_i =
c_i / m_i`` the harmonic mean length of the documents they sit in, ``m_i`` its mass: a word of
Qbar is an average of its documents' other tokens). Measured with the defaults' anchors (the ratio
of the mean squares): separable streams 0.99-1.17 (K = 20 and 50, 5,000-100,000 documents);
Gibbs-truth streams of text at least 2.7 (Debian K = 50 and 100 at 5,000 documents, its shortest
and most uneven documents) and up to 37 (20 Newsgroups K = 100). The refinement is skipped below
:data:`SEPARABLE_FIT` (:func:`~streamtopics.refresh.steps.refine`).

Only where the sums are exact and give each word's tokens (the packed sums, not the large
vocabularies' low-rank sketch, whose rows lose their noise to the truncation).
"""

from __future__ import annotations

import numpy as np

from .statistics_view import normalised_rows

FIT_WORDS = 1000  # the fit is measured over this many of the most frequent words
SEPARABLE_FIT = 2.0  # below this ratio of residual to noise the anchors are taken to explain the sums
ROWS_AT_ONCE = 256  # Qbar rows read at once


def measurable(view) -> bool:
    """Whether :func:`fit_to_noise` can be measured on ``view``: exact sums that count each word's tokens."""
    return getattr(view, "word_counts", None) is not None and not hasattr(view, "block")


def most_frequent_words(view, count: int) -> np.ndarray:
    """Ids of the ``count`` words of highest document frequency that have mass (ties by id), ascending."""
    frequency = np.asarray(view.document_frequency, dtype=np.float64)
    ids = np.flatnonzero(np.asarray(view.word_mass) > 0)
    order = np.lexsort((ids, -frequency[ids]))
    return np.sort(ids[order[:count]])


def squared_residuals(view, words: np.ndarray, weights: np.ndarray, products: np.ndarray,
                      anchor_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of the ``words``' squared residual ``||Qbar_i - C_i S||^2`` and squared norm ``||Qbar_i||^2``:
    ``weights`` are their C_i (one row each), ``products`` their ``Qbar_i S^T``, ``anchor_rows`` S
    (the anchors' Qbar rows, and the background's when recovered). The rows are read a few at a time."""
    words = np.asarray(words, dtype=np.int64)
    norms = np.empty(words.size)
    for s in range(0, words.size, ROWS_AT_ONCE):
        rows = normalised_rows(view, words[s:s + ROWS_AT_ONCE])
        norms[s:s + rows.shape[0]] = np.einsum("ij,ij->i", rows, rows)
    gram = anchor_rows @ anchor_rows.T
    residual = norms - 2.0 * np.einsum("ik,ik->i", weights, products) + np.einsum("ik,kl,il->i", weights, gram, weights)
    return np.maximum(residual, 0.0), norms


def fit_to_noise(view, words: np.ndarray, weights: np.ndarray, products: np.ndarray, anchor_rows: np.ndarray) -> float:
    """The mass-weighted mean of the ``words``' squared residuals over their squared sampling
    noise (see the module docstring; the arguments as :func:`squared_residuals`')."""
    residual, norms = squared_residuals(view, words, weights, products, anchor_rows)
    words = np.asarray(words, dtype=np.int64)
    mass = np.asarray(view.word_mass, dtype=np.float64)[words]
    tokens = np.asarray(view.word_counts, dtype=np.float64)[words]
    partners = tokens * np.maximum(tokens / mass - 1.0, 1e-12)
    noise = np.maximum(1.0 - norms, 1e-12) / partners
    return float(np.average(residual / noise, weights=mass))
