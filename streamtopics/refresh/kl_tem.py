"""One step of KL-tEM, the refinement's EM (:mod:`~streamtopics.refresh.refinement` runs the steps and scores them).

* E-step: each document's mixture gamma_d moves towards the minimiser of KL(f_d || A gamma_d)
  (:func:`~streamtopics.inference.infer_mixtures`), by :data:`E_UPDATES` multiplicative updates
  from the previous iteration's gamma_d, in float32 (:data:`SINGLE`);
* M-step: ``A_jk <- A_jk * sum_d H_dj gamma_dk / (A gamma_d)_j``, then every column is
  renormalised (:func:`normalised_m_step`), over the batch grouped by word (:class:`WordMajor`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..statistics.cooccurrence import word_run_offsets
from ..text.documents import DocumentBatch
from ..inference import REASSOCIATE, infer_mixtures
from ..statistics.prefetch import ROWS_AHEAD, prefetch_row

E_UPDATES = 5  # multiplicative mixture updates per KL-tEM E-step, warm-started (see kl_tem_step)
SINGLE = True  # the E-step's mixture updates in float32 (inference.infer_mixtures(single=True)): 1.6 times as
# fast as float64. Only the E-step: the held-out mixtures, warm-started through every iterate, stay float64 (in
# float32 their scores drifted by up to 4e-3 per token over 30 iterates on 20 Newsgroups, and the iterate kept on
# the quality guard's stream moved from 30 to 22); with the E-step alone in float32 the guard's figures and kept
# iterates were those of float64 (`git show 8e056d1:BENCHMARKS.md`, "What the defaults cost"). The M-step sums in
# float64.


@dataclass(frozen=True)
class WordMajor:
    """A batch's tokens grouped by word: ``docs[ptr[j]:ptr[j+1]]`` are the documents holding word
    ``j``, ``counts`` their counts. The M-step runs over words in parallel on it: each word's row
    of the new topic matrix is one thread's, so no two threads write the same entry and the sums
    run in the same order whatever the number of threads."""
    ptr: np.ndarray
    docs: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, batch: DocumentBatch, n_words: int) -> "WordMajor":
        return cls(*_word_major(batch.indptr, batch.indices, batch.counts, n_words))


@njit(cache=True, nogil=True)
def _word_major(indptr, indices, counts, n_words):
    """A counting sort of the entries by word, stable (each word's documents in order), in one
    pass: :class:`WordMajor`'s arrays."""
    ptr = word_run_offsets(indices, n_words)
    fill = ptr[:-1].copy()
    docs = np.empty(indices.size, np.int64)
    out = np.empty(indices.size)
    for d in range(indptr.size - 1):
        for p in range(indptr[d], indptr[d + 1]):
            q = fill[indices[p]]
            docs[q] = d
            out[q] = counts[p]
            fill[indices[p]] += 1
    return ptr, docs, out


@njit(cache=True, nogil=True, parallel=True, fastmath=REASSOCIATE)
def _m_step(ptr, docs, counts, topic_word, gamma, out):
    """``out_jk = A_jk sum_d gamma_dk H_dj / (A gamma_d)_j``, one word per iteration: the sum over
    the word's documents first, ``A_jk`` once at the end (one multiplication per entry less than
    weighting every term by it: 1.3 times as fast at V = 15,000, K = 101, equal to 4e-15)."""
    k = topic_word.shape[1]
    flat = gamma.reshape(-1)
    for j in prange(ptr.size - 1):
        total = np.zeros(k)
        for p in range(ptr[j], ptr[j + 1]):
            if p + ROWS_AHEAD < ptr[j + 1]:
                prefetch_row(flat, docs[p + ROWS_AHEAD], k)
            d = docs[p]
            fhat = 0.0
            for a in range(k):
                fhat += topic_word[j, a] * gamma[d, a]
            if fhat <= 0.0:
                continue
            scale = counts[p] / fhat
            for a in range(k):
                total[a] += scale * gamma[d, a]
        for a in range(k):
            out[j, a] += topic_word[j, a] * total[a]


def kl_tem_step(batch: DocumentBatch, topic_word: np.ndarray, mixtures: np.ndarray | None = None, prior=None,
                updates: int = E_UPDATES, smoothing: float = 0.0,
                by_word: WordMajor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One E-step and M-step of KL-tEM over ``batch``; returns the new V x K topic matrix and the
    mixtures. The E-step is ``updates`` multiplicative updates from ``mixtures`` (the previous
    iteration's; None: from ``prior``): each update raises the same likelihood the M-step raises,
    so a partial, warm-started E-step keeps EM monotone at a fraction of a converged one's cost.
    ``smoothing`` is a pseudo-count added to every word of every topic in the M-step (MAP under
    a symmetric Dirichlet(1 + smoothing) prior on the topics): EM on a sample otherwise drives the
    topic's probability of every word the sample did not give it to exactly 0. ``by_word`` is
    ``WordMajor.of(batch, V)``, built once for all the iterations over one batch."""
    mixtures = infer_mixtures(batch, topic_word, prior, max_iter=updates, tol=1e-5, start=mixtures, single=SINGLE)
    by_word = WordMajor.of(batch, topic_word.shape[0]) if by_word is None else by_word
    out = np.zeros_like(topic_word)
    _m_step(by_word.ptr, by_word.docs, by_word.counts, topic_word, mixtures, out)
    return normalised_m_step(out, topic_word, smoothing), mixtures


def normalised_m_step(out: np.ndarray, topic_word: np.ndarray, smoothing: float) -> np.ndarray:
    """The M-step's sums ``out`` (in place) made the new topic matrix: ``smoothing`` added to
    every used topic, columns normalised; a topic no document uses keeps ``topic_word``'s column.
    In place over whole rows (boolean column selections copied the V x K matrix: 40 ms a step at
    V = 15,000, K = 101)."""
    if smoothing > 0:
        out += np.where(out.sum(axis=0) > 0, smoothing, 0.0)
    sums = out.sum(axis=0)
    empty = sums <= 0
    out /= np.where(empty, 1.0, sums)
    if empty.any():
        out[:, empty] = topic_word[:, empty]  # a topic no document uses keeps its seed column
    return out
