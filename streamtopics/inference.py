"""Per-document topic mixtures against fixed topics (Awasthi & Risteski 2015, sections 4.1-4.2).

A document's mixture gamma minimises KL(f_d || A gamma) over the simplex, f_d = H_d / n_d, by the
multiplicative update ``gamma_k <- gamma_k * sum_j f_dj A_jk / (A gamma)_j``: the EM fixed point
of a mixture with known components, which never leaves the simplex and never increases the KL.
Inference is pure: it reads the topic matrix and changes nothing.

The kernels may reassociate their sums over topics (``fastmath={"reassoc"}``): that lets the
compiler vectorise the dot products, about twice as fast at K = 100; the order then depends on the
CPU's vector width, so results are deterministic on one machine but may differ from another in the
last bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .text.documents import DocumentBatch
from .statistics.prefetch import ROWS_AHEAD, prefetch_row


REASSOCIATE = {"reassoc"}  # numba fastmath flags of the sums over topics (see the module docstring)
TOLERANCE = 1e-6  # the updates stop once no weight moves by more: weights are known to this precision
#: The least weight the float32 updates keep (:func:`infer_mixtures`). The updates, and the more so a chain of warm
#: starts (KL-tEM's E-steps), take the weights of the topics a document lacks towards 0; in float32, below 1.2e-38
#: they turn subnormal, and every product with them (and of the topic matrix's 1e-12 floor with weights under
#: 1e-26) runs the processor's slow path: the E-step of KL-tEM's 12th iterate took 0.28 s instead of 0.067 on 20
#: Newsgroups (V = 15,000, K = 100, 48 % of the weights under 1e-30, 28 % exactly 0). At 1e-20 the weights stay far
#: below anything a sum over topics or documents can tell, and a topic a document lacks can still come back.
#: (float64 chains reach their subnormal range after about 100 updates from uniform: 0.3 % of the weights, 5 %
#: slower at 200.)
SINGLE_FLOOR = 1e-20


@njit(cache=True, nogil=True, fastmath=REASSOCIATE)
def _fit_mixture(indices, counts, topic_word, gamma, max_iter, tol, floor):
    """Multiplicative updates of one document's mixture ``gamma`` (in place) from where it
    stands, no weight below ``floor`` (:data:`SINGLE_FLOOR` in float32, 0 in float64); returns the
    number of updates run.

    The arithmetic is in ``topic_word``'s precision (float64, or float32 for the refinement's E-step). The
    document's rows of the topic matrix are copied topic-major (K x n): an update is then one
    pass accumulating ``(A gamma)_j`` for all n words at once (vectors over words, no reduction
    per word), one vectorised division, and K dot products over the words; 1.3 times as fast as
    word-major rows at K = 100 in float64, 2 times in float32."""
    n, k = indices.size, topic_word.shape[1]
    zero, lowest = topic_word.dtype.type(0.0), topic_word.dtype.type(floor)
    total = counts.sum()
    weights = np.empty(n, topic_word.dtype)
    for p in range(n):
        weights[p] = counts[p] / total
    rows = np.empty((k, n), topic_word.dtype)
    flat = topic_word.reshape(-1)
    for p in range(n):  # word by word, asking for the row ROWS_AHEAD words ahead before copying this one
        if p + ROWS_AHEAD < n:
            prefetch_row(flat, indices[p + ROWS_AHEAD], k)
        w = indices[p]
        for a in range(k):
            rows[a, p] = topic_word[w, a] + 1e-12
    g = np.empty(k, topic_word.dtype)
    for a in range(k):
        g[a] = max(topic_word.dtype.type(gamma[a]), lowest)
    scale = np.empty(n, topic_word.dtype)
    k4 = k - k % 4
    it = 0
    while it < max_iter:
        it += 1
        # Four topics per pass over the words: a quarter of the loads and stores of ``scale``, the
        # same additions in the same order (bit-identical to one topic per pass, 7-10 % faster).
        scale[:] = zero
        for a in range(0, k4, 4):
            g0, g1, g2, g3 = g[a], g[a + 1], g[a + 2], g[a + 3]
            for j in range(n):
                s = scale[j]
                s += rows[a, j] * g0
                s += rows[a + 1, j] * g1
                s += rows[a + 2, j] * g2
                s += rows[a + 3, j] * g3
                scale[j] = s
        for a in range(k4, k):
            ga = g[a]
            for j in range(n):
                scale[j] += rows[a, j] * ga
        for j in range(n):
            scale[j] = weights[j] / scale[j]
        change, norm = zero, zero
        for a in range(0, k4, 4):
            n0, n1, n2, n3 = zero, zero, zero, zero
            for j in range(n):
                sj = scale[j]
                n0 += rows[a, j] * sj
                n1 += rows[a + 1, j] * sj
                n2 += rows[a + 2, j] * sj
                n3 += rows[a + 3, j] * sj
            for b, new in ((a, n0), (a + 1, n1), (a + 2, n2), (a + 3, n3)):
                value = max(g[b] * new, lowest)
                change = max(change, abs(value - g[b]))
                g[b] = value
                norm += value
        for a in range(k4, k):
            new = zero
            for j in range(n):
                new += rows[a, j] * scale[j]
            value = max(g[a] * new, lowest)
            change = max(change, abs(value - g[a]))
            g[a] = value
            norm += value
        for a in range(k):
            g[a] /= norm
        if change < tol:
            break
    for a in range(k):
        gamma[a] = g[a]
    return it


@njit(cache=True, nogil=True, parallel=True)
def _infer_from(indptr, indices, counts, topic_word, mixtures, max_iter, tol, floor):
    """Every document's mixture fitted in place by :func:`_fit_mixture`, from its row of
    ``mixtures`` (a document with no entries keeps it), documents in parallel; returns the
    updates each took."""
    n_docs = indptr.size - 1
    iterations = np.zeros(n_docs, np.int64)
    for d in prange(n_docs):
        start, end = indptr[d], indptr[d + 1]
        if end > start:
            iterations[d] = _fit_mixture(indices[start:end], counts[start:end], topic_word, mixtures[d],
                                         max_iter, tol, floor)
    return iterations


_infer_serial = njit(cache=True, nogil=True)(_infer_from.py_func)  # the same kernel, no threads


def starting_mixtures(n_docs: int, n_topics: int, prior=None) -> np.ndarray:
    """Every document's starting mixture (``n_docs`` x ``n_topics``): ``prior`` normalised, or uniform."""
    first = np.full(n_topics, 1.0 / n_topics) if prior is None else np.asarray(prior, np.float64) / np.sum(prior)
    return np.tile(first, (n_docs, 1))


def infer_mixtures(batch: DocumentBatch, topic_word: np.ndarray, prior=None, max_iter: int = 200, tol: float = TOLERANCE,
                   start: np.ndarray | None = None, serial: bool = False, single: bool = False) -> np.ndarray:
    """Topic mixtures (B x K, rows on the simplex) of a batch of documents.

    ``prior`` is the starting mixture (default uniform); a document with no known word keeps it.
    ``start`` (B x K, rows on the simplex) replaces it with one starting mixture per document:
    a warm start from mixtures fitted to nearby topics needs far fewer updates (KL-tEM).
    ``serial`` runs the same kernel compiled without threads: for one document, starting the
    parallel kernel's threads (about a millisecond) costs more than the inference itself.
    ``single`` runs the updates in float32 (the mixtures returned are float64 all the same):
    about 1.6 times as fast; the mixtures differ from float64's by about 1e-7 (the refinement's
    E-step uses it: :data:`~streamtopics.refresh.kl_tem.SINGLE`). Its weights stay at
    :data:`SINGLE_FLOOR` or more: over long warm-started chains the small weights otherwise fall
    below float32's normal range (29 % of them after 400 updates at V = 15,000, K = 100), where the
    arithmetic is several times slower, and some to exactly 0, which an update cannot revive.
    """
    topic_word = np.ascontiguousarray(topic_word, dtype=np.float32 if single else np.float64)
    if start is None:  # every document starts from the prior: one kernel for both cases, one compile
        mixtures = starting_mixtures(len(batch), topic_word.shape[1], prior)
    else:
        mixtures = np.array(start, dtype=np.float64, order="C")  # a copy: the kernel fits it in place
    kernel = _infer_serial if serial else _infer_from
    kernel(batch.indptr, batch.indices, batch.counts, topic_word, mixtures, int(max_iter), float(tol),
           SINGLE_FLOOR if single else 0.0)
    return mixtures
