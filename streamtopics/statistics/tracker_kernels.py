"""The random-projection tracker's ingest kernels (:class:`~streamtopics.statistics.trackers.RandomProjectionTracker`).

A batch is counting-sorted by word (:func:`group_by_word`), the distinct words are cut into
chunks of about equal entries (:func:`balanced_chunks`) and each chunk's rows of the running sums
are updated in parallel (:func:`accumulate`): a word's entries are added in document order, so
the sums do not depend on the chunking or the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True)
def group_by_word(indptr, indices, counts, n_words):
    """Counting-sort a CSR batch by word, keeping document order within each word.

    Returns (words, wstart, ent_doc, ent_w, ent_u, n_used): the distinct words of the batch in
    increasing id, the offsets of their entries, and for each entry its document (row of the
    batch), its weight H_d[i] / n_d and H_d[i] (H_d[i] - 1) / (n_d (n_d - 1)) (0 if n_d < 2).
    Documents with n_d == 0 add nothing (n_used counts the others).
    """
    B = indptr.shape[0] - 1
    nnz = indptr[B] - indptr[0]
    cnt = np.zeros(n_words + 1, dtype=np.int64)
    for e in range(indptr[0], indptr[B]):
        cnt[indices[e] + 1] += 1
    n_distinct = 0
    for i in range(n_words):
        if cnt[i + 1] > 0:
            n_distinct += 1
        cnt[i + 1] += cnt[i]
    words = np.empty(n_distinct, dtype=np.int64)
    wstart = np.empty(n_distinct + 1, dtype=np.int64)
    t = 0
    for i in range(n_words):
        if cnt[i + 1] > cnt[i]:
            words[t] = i
            wstart[t] = cnt[i]
            t += 1
    wstart[n_distinct] = nnz
    pos = cnt  # reuse as insertion cursor
    ent_doc = np.empty(nnz, dtype=np.int64)
    ent_w = np.zeros(nnz, dtype=np.float64)
    ent_u = np.zeros(nnz, dtype=np.float64)
    n_used = 0
    for d in range(B):
        a = indptr[d]
        b = indptr[d + 1]
        n = 0.0
        for e in range(a, b):
            n += counts[e]
        if n > 0.0:
            n_used += 1
        for e in range(a, b):
            i = indices[e]
            p = pos[i]
            ent_doc[p] = d
            h = counts[e]
            ent_w[p] = h / n if n > 0.0 else 0.0
            ent_u[p] = h * (h - 1.0) / (n * (n - 1.0)) if n > 1.0 else 0.0
            pos[i] = p + 1
    return words, wstart, ent_doc, ent_w, ent_u, n_used


@njit(cache=True, nogil=True)
def balanced_chunks(wstart, n_chunks):
    """Split the distinct words into n_chunks contiguous runs of roughly equal entry count."""
    n_distinct = wstart.shape[0] - 1
    nnz = wstart[n_distinct]
    bounds = np.empty(n_chunks + 1, dtype=np.int64)
    bounds[0] = 0
    t = 0
    for c in range(1, n_chunks):
        target = (nnz * c) // n_chunks
        while t < n_distinct and wstart[t] < target:
            t += 1
        bounds[c] = t
    bounds[n_chunks] = n_distinct
    return bounds


@njit(cache=True, nogil=True, parallel=True)
def accumulate(S, T, U, Pm, G, words, wstart, ent_doc, ent_w, ent_u, bounds, t_sign):
    """S[i] += w, T[i] += t_sign*w*w, U[i] += u, Pm[i, :] += w * G[d, :] per entry, parallel
    over words (t_sign = -1 with negated w and u removes documents).

    Each word's row is owned by exactly one thread and its entries are added in document order,
    so the result is bit-identical to a serial document-by-document loop, for any number of
    threads and any split of the stream into batches.  The row stays in cache while all the
    batch's documents containing the word are added.
    """
    P = Pm.shape[1]
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        for t in range(bounds[c], bounds[c + 1]):
            i = words[t]
            s = S[i]
            s2 = T[i]
            su = U[i]
            row = Pm[i]
            for e in range(wstart[t], wstart[t + 1]):
                w = ent_w[e]
                g = G[ent_doc[e]]
                s += w
                s2 += t_sign * w * w
                su += ent_u[e]
                for j in range(P):
                    row[j] += w * g[j]
            S[i] = s
            T[i] = s2
            U[i] = su


# --------------------------------------------------------------------------------------------
# Tracker
# --------------------------------------------------------------------------------------------
