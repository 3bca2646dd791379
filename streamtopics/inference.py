"""Per-document topic mixtures against fixed topics (Awasthi & Risteski 2015, sections 4.1-4.2).

A document's mixture gamma minimises KL(f_d || A gamma) over the simplex, f_d = H_d / n_d, by the
multiplicative update ``gamma_k <- gamma_k * sum_j f_dj A_jk / (A gamma)_j``: the EM fixed point
of a mixture with known components, which never leaves the simplex and never increases the KL.
Inference is pure: it reads the topic matrix and changes nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .documents import DocumentBatch


@njit(cache=True, nogil=True, parallel=True)
def _infer(indptr, indices, counts, topic_word, prior, max_iter, tol):
    n_docs = indptr.size - 1
    k = topic_word.shape[1]
    mixtures = np.empty((n_docs, k))
    iterations = np.zeros(n_docs, np.int64)
    for d in prange(n_docs):
        start, end = indptr[d], indptr[d + 1]
        gamma = prior.copy()
        if end == start:
            mixtures[d] = gamma
            continue
        weights = counts[start:end] / counts[start:end].sum()
        rows = np.empty((end - start, k))
        for p in range(start, end):
            for a in range(k):
                rows[p - start, a] = topic_word[indices[p], a] + 1e-12
        new = np.empty(k)
        it = 0
        while it < max_iter:
            it += 1
            new[:] = 0.0
            for j in range(end - start):
                mix = 0.0
                for a in range(k):
                    mix += rows[j, a] * gamma[a]
                scale = weights[j] / mix
                for a in range(k):
                    new[a] += rows[j, a] * scale
            change = 0.0
            for a in range(k):
                value = gamma[a] * new[a]
                change = max(change, abs(value - gamma[a]))
                gamma[a] = value
            gamma /= gamma.sum()
            if change < tol:
                break
        mixtures[d] = gamma
        iterations[d] = it
    return mixtures, iterations


def infer_mixtures(batch: DocumentBatch, topic_word: np.ndarray, prior=None, max_iter: int = 200, tol: float = 1e-6) -> np.ndarray:
    """Topic mixtures (B x K, rows on the simplex) of a batch of documents.

    ``prior`` is the starting mixture (default uniform); a document with no known word keeps it.
    """
    k = topic_word.shape[1]
    start = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=np.float64) / np.sum(prior)
    mixtures, _ = _infer(
        batch.indptr, batch.indices, batch.counts, np.ascontiguousarray(topic_word, dtype=np.float64),
        start, int(max_iter), float(tol),
    )
    return mixtures
