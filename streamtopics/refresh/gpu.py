"""The refinement on a CUDA device (``refine_device="cuda"``; issue 17 item 5).

At V = 15,000, K = 100 the refinement is two thirds of a warm refresh on the CPU (6.5 of 9.8 s
on a 2-core AMD EPYC), and all of it is per-document or per-word work over the reservoir: the
E-step's multiplicative updates, the M-step, CVB0's first shares and its sweeps. Here each of
those kernels runs with a warp of 32 GPU threads per document (or per chunk of a word's
entries), its lanes sharing the topics, doing what the CPU kernel's loop body does for that
document (:mod:`~streamtopics.inference`, :mod:`~streamtopics.refresh.refinement`,
:mod:`~streamtopics.refresh.collapsed`), with the reservoir copied to the device once per refinement.
The results equal the CPU's to rounding, not bit for bit: the device computes in float64
throughout (the CPU's E-step runs in float32, :data:`~streamtopics.refresh.kl_tem.SINGLE`), sums
over topics in a tree of warp shuffles, adds a word's entries in chunks (:class:`DeviceBatch`)
and re-sums CVB0's topic-word counts after every block (the CPU moves them by the block's
changes). Every sum runs in a fixed order, so a device gives the same result on every run.
``tests/test_gpu.py`` compares each step with the CPU's, on a device where there is one and
through numba's CUDA simulator where there is none. ``git show 8e056d1:BENCHMARKS.md``, "The
refinement on a CUDA device": 3.0-3.2 times as fast as 16 CPU cores at K = 50 and 100 on an H200
(today's figures: BENCHMARKS.md, "GPU").

The held-out scoring, the column normalisations and the choice of alpha stay on the CPU: they
are small. A device is never required; this module is imported only when asked for. The kernels
(:mod:`~streamtopics.refresh.gpu_kernels`) are cached on disk (``cache=True``): their compile, 6-9 s at a
process's first device refresh, is paid once (numba's simulator ignores the flag). Whether there
is a device, and whether a refinement uses it: :mod:`~streamtopics.refresh.device`.

Here: the host side, the reservoir's arrays on the device (:class:`DeviceBatch`), the launches of
each step and :class:`DeviceRefinementSteps`, the refinement's steps as
:func:`~streamtopics.refresh.refinement.refine_topics` calls them.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda

from .collapsed import SEED_UPDATES, SWEEP_BLOCKS, TOP_TOPICS
from .device import cuda_available  # noqa: F401  (consumers.cli.replay imports it from here)
from . import gpu_kernels as kernels
from ..text.documents import DocumentBatch
from .gpu_kernels import THREADS
from ..inference import starting_mixtures
from .kl_tem import E_UPDATES, normalised_m_step

CHUNK = 128  # a word's entries are summed this many at a time (word-major chunks, see DeviceBatch)


def _threads(kernel, n: int):
    """``kernel`` launched with a thread for each of ``n`` items."""
    return kernel[max(1, math.ceil(n / THREADS)), THREADS]


def _warps(kernel, n: int):
    """``kernel`` launched with a warp (32 threads) for each of ``n`` items."""
    return kernel[max(1, math.ceil(32 * n / THREADS)), THREADS]


def _blocks(kernel, n: int):
    """``kernel`` launched with a block of :data:`THREADS` threads for each of ``n`` items."""
    return kernel[max(1, n), THREADS]


@numba.njit(cache=True, nogil=True)
def _entries_by_word(indices, n_words):
    """A stable counting sort of the entries by word: ``entries[ptr[j]:ptr[j+1]]`` are the
    positions of word ``j``'s entries, in order."""
    ptr = np.zeros(n_words + 1, np.int64)
    for w in indices:
        ptr[w + 1] += 1
    for j in range(n_words):
        ptr[j + 1] += ptr[j]
    fill = ptr[:-1].copy()
    entries = np.empty(indices.size, np.int64)
    for e in range(indices.size):
        entries[fill[indices[e]]] = e
        fill[indices[e]] += 1
    return ptr, entries


class DeviceBatch:
    """A batch's arrays on the device, document-major and word-major. The word-major entries
    (for the M-step and the topic-word counts) are cut into chunks of at most :data:`CHUNK`
    entries of one word: a warp sums a chunk, then each word's chunks are added in order. One
    warp per word left the warps of the most frequent words (one entry in most documents) running
    long after the others."""

    def __init__(self, batch: DocumentBatch, n_words: int):
        self.n_docs, self.n_words = len(batch), n_words
        self.indptr = cuda.to_device(np.ascontiguousarray(batch.indptr, np.int64))
        self.indices = cuda.to_device(np.ascontiguousarray(batch.indices))
        self.counts = cuda.to_device(np.ascontiguousarray(batch.counts, np.float64))
        ptr, entries = _entries_by_word(np.asarray(batch.indices), n_words)
        document = np.repeat(np.arange(len(batch), dtype=np.int64), np.diff(batch.indptr))
        self.word_entries = cuda.to_device(entries)
        self.word_docs = cuda.to_device(document[entries])
        self.word_counts = cuda.to_device(np.asarray(batch.counts, np.float64)[entries])
        per_word = -(-np.diff(ptr) // CHUNK)  # chunks of each word
        chunk_word = np.repeat(np.arange(n_words, dtype=np.int64), per_word)
        first_chunk = np.concatenate([[0], np.cumsum(per_word)])
        starts = ptr[chunk_word] + CHUNK * (np.arange(chunk_word.size) - first_chunk[chunk_word])
        self.n_chunks = chunk_word.size
        self.chunk_word = cuda.to_device(chunk_word)
        self.chunk_start = cuda.to_device(starts)
        self.chunk_end = cuda.to_device(np.minimum(starts + CHUNK, ptr[chunk_word + 1]))
        self.word_chunks = cuda.to_device(first_chunk)


def infer_mixtures(batch: DeviceBatch, topic_word: np.ndarray, start: np.ndarray, max_iter: int,
                   tol: float) -> np.ndarray:
    """:func:`~streamtopics.inference.infer_mixtures` from ``start`` on the device, in float64.
    Returns the mixtures on the host."""
    topics = cuda.to_device(np.ascontiguousarray(topic_word, np.float64))
    mixtures = cuda.to_device(np.ascontiguousarray(start, np.float64))
    _warps(kernels.infer, batch.n_docs)(batch.indptr, batch.indices, batch.counts, topics, mixtures, int(max_iter),
                                        float(tol))
    return mixtures.copy_to_host()


def m_step(batch: DeviceBatch, topic_word: np.ndarray, mixtures: np.ndarray) -> np.ndarray:
    """KL-tEM's M-step sums (:func:`~streamtopics.refresh.kl_tem._m_step` into zeros), on the host."""
    topics = cuda.to_device(np.ascontiguousarray(topic_word, np.float64))
    gamma = cuda.to_device(np.ascontiguousarray(mixtures, np.float64))
    partial = cuda.device_array((max(batch.n_chunks, 1), topic_word.shape[1]), np.float64)
    _warps(kernels.m_step_chunks, batch.n_chunks)(batch.chunk_word, batch.chunk_start, batch.chunk_end,
                                                  batch.word_docs, batch.word_counts, topics, gamma, partial)
    out = cuda.device_array(topic_word.shape, np.float64)
    _threads(kernels.chunk_sums, out.size)(batch.word_chunks, partial, topics, True, out)
    return out.copy_to_host()


class CollapsedShares:
    """:class:`~streamtopics.refresh.collapsed.CollapsedShares` on the device: the constructor places the
    first shares (the CPU class's ``seeded``), ``sweep`` and ``topic_word`` do what the CPU
    class's do."""

    def __init__(self, batch: DeviceBatch, topic_word: np.ndarray, mixtures: np.ndarray, top: int = TOP_TOPICS):
        n_topics = topic_word.shape[1]
        top = min(top, n_topics)
        entries = batch.indices.size
        self.batch = batch
        self.seed_topic_word = cuda.to_device(np.ascontiguousarray(topic_word, np.float64))
        self.topic_ids = cuda.device_array((entries, top), np.int64)
        self.weights = cuda.device_array((entries, top), np.float32)
        self.doc_topic = cuda.to_device(np.zeros((batch.n_docs, n_topics)))
        self.word_topic = cuda.device_array((batch.n_words, n_topics), np.float64)
        self.totals = cuda.device_array(n_topics, np.float64)
        self.partial = cuda.device_array((max(batch.n_chunks, 1), n_topics), np.float64)
        self.phi = cuda.device_array((batch.n_words, n_topics), np.float64)
        _warps(kernels.seed_shares, batch.n_docs)(batch.indptr, batch.indices, batch.counts, self.seed_topic_word,
                                                  cuda.to_device(np.ascontiguousarray(mixtures, np.float64)),
                                                  self.topic_ids, self.weights, self.doc_topic)
        self._sum_word_topic()

    def _sum_word_topic(self) -> None:
        b = self.batch
        _warps(kernels.word_topic_chunks, b.n_chunks)(b.chunk_start, b.chunk_end, b.word_entries, b.counts,
                                                      self.topic_ids, self.weights, self.partial)
        _threads(kernels.chunk_sums, self.word_topic.size)(b.word_chunks, self.partial, self.word_topic, False,
                                                           self.word_topic)

    def _phi(self, smoothing: float, out) -> None:
        n_words, n_topics = self.word_topic.shape
        _blocks(kernels.column_totals, n_topics)(self.word_topic, self.totals)
        _threads(kernels.topic_word, n_words * n_topics)(self.word_topic, self.totals, float(smoothing),
                                                         self.seed_topic_word, out)

    def sweep(self, document_prior: float, smoothing: float, blocks: int) -> None:
        """One CVB0 sweep, ``blocks`` blocks of documents in turn, as the CPU's sweep."""
        b = self.batch
        edges = np.linspace(0, b.n_docs, min(blocks, b.n_docs) + 1).astype(np.int64)
        for first, end in zip(edges[:-1], edges[1:]):
            self._phi(smoothing, self.phi)
            _warps(kernels.sweep, int(end - first))(b.indptr, b.indices, b.counts, int(first), int(end), self.phi,
                                                     float(document_prior), self.topic_ids, self.weights, self.doc_topic)
            self._sum_word_topic()

    def topic_word(self, smoothing: float) -> np.ndarray:
        """``(n_wk + smoothing) / (n_k + V smoothing)`` on the host."""
        self._phi(smoothing, self.phi)
        return self.phi.copy_to_host()


class DeviceRefinementSteps:
    """:class:`~streamtopics.refresh.refinement.HostRefinementSteps` on the device: the fitted and the
    held-out documents copied there once, each step's topics and mixtures copied per call (a
    few MB)."""

    def __init__(self, fit: DocumentBatch, observed: DocumentBatch, n_words: int):
        self.fit, self.observed = DeviceBatch(fit, n_words), DeviceBatch(observed, n_words)

    def held_mixtures(self, topic_word: np.ndarray, start: np.ndarray | None, updates: int) -> np.ndarray:
        start = starting_mixtures(self.observed.n_docs, topic_word.shape[1]) if start is None else start
        return infer_mixtures(self.observed, topic_word, start, updates, 1e-5)

    def kl_tem_step(self, topic_word, mixtures, prior, smoothing) -> tuple[np.ndarray, np.ndarray]:
        if mixtures is None:
            mixtures = starting_mixtures(self.fit.n_docs, topic_word.shape[1], prior)
        mixtures = infer_mixtures(self.fit, topic_word, mixtures, E_UPDATES, 1e-5)
        return normalised_m_step(m_step(self.fit, topic_word, mixtures), topic_word, smoothing), mixtures

    def cvb0_sweeps(self, start: np.ndarray, mixtures: np.ndarray | None, sweeps: int, document_prior: float,
                    smoothing: float, hold=None) -> tuple[np.ndarray, None]:
        if mixtures is None:
            uniform = starting_mixtures(self.fit.n_docs, start.shape[1])
            mixtures = infer_mixtures(self.fit, start, uniform, SEED_UPDATES, 1e-5)
        shares = CollapsedShares(self.fit, start, mixtures)
        for _ in range(sweeps):
            shares.sweep(document_prior, smoothing, SWEEP_BLOCKS)
        return shares.topic_word(smoothing), None  # the shares stay on the device: nothing is carried
