"""The refinement on a CUDA device (``refine_device="cuda"``; issue 17 item 5).

At V = 15,000, K = 100 the refinement is two thirds of a warm refresh on the CPU (6.5 of 9.8 s
on a 2-core AMD EPYC), and all of it is per-document or per-word work over the reservoir: the
E-step's multiplicative updates, the M-step, CVB0's first shares and its sweeps. Here each of
those kernels runs with a warp of 32 GPU threads per document (or per chunk of a word's
entries), its lanes sharing the topics, doing what the CPU kernel's loop body does for that
document (:mod:`~streamtopics.inference`, :mod:`~streamtopics.refinement`,
:mod:`~streamtopics.collapsed`), with the reservoir copied to the device once per refinement.
The results equal the CPU's to rounding, not bit for bit: the device computes in float64
throughout (the CPU's E-step runs in float32, :data:`~streamtopics.kl_tem.SINGLE`), sums
over topics in a tree of warp shuffles, adds a word's entries in chunks (:class:`DeviceBatch`)
and re-sums CVB0's topic-word counts after every block (the CPU moves them by the block's
changes). Every sum runs in a fixed order, so a device gives the same result on every run.
``tests/test_gpu.py`` compares each step with the CPU's, on a device where there is one and
through numba's CUDA simulator where there is none. ``git show 8e056d1:BENCHMARKS.md``, "The
refinement on a CUDA device": 3.0-3.2 times as fast as 16 CPU cores at K = 50 and 100 on an H200
(today's figures: BENCHMARKS.md, "GPU").

The held-out scoring, the column normalisations and the choice of alpha stay on the CPU: they
are small. A device is never required; this module is imported only when asked for. The kernels
are cached on disk (``cache=True``): their compile, 6-9 s at a process's first device refresh,
is paid once (numba's simulator ignores the flag). Whether there is a device, and whether a
refinement uses it: :mod:`~streamtopics.device`.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda, float64, int64

from .device import DEVICE_MAX_COLUMNS as MAX_TOPICS
from .device import cuda_available  # noqa: F401  (consumers.cli.replay imports it from here)
from .collapsed import SEED_UPDATES, SWEEP_BLOCKS, TOP_TOPICS
from .documents import DocumentBatch
from .inference import starting_mixtures
from .kl_tem import E_UPDATES, normalised_m_step

if not hasattr(np, "row_stack"):
    # numba-cuda (0.30.4, the newest in 2026-11) registers an overload of np.row_stack when its
    # first kernel compiles; numpy 2.5 removed that alias of np.vstack, and every compile failed
    # with AttributeError (seen on an H200 with numpy 2.5.2). The alias restored, as it was.
    np.row_stack = np.vstack

THREADS = 128  # threads per block of every launch
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
    _warps(_infer, batch.n_docs)(batch.indptr, batch.indices, batch.counts, topics, mixtures, int(max_iter),
                                 float(tol))
    return mixtures.copy_to_host()


def m_step(batch: DeviceBatch, topic_word: np.ndarray, mixtures: np.ndarray) -> np.ndarray:
    """KL-tEM's M-step sums (:func:`~streamtopics.kl_tem._m_step` into zeros), on the host."""
    topics = cuda.to_device(np.ascontiguousarray(topic_word, np.float64))
    gamma = cuda.to_device(np.ascontiguousarray(mixtures, np.float64))
    partial = cuda.device_array((max(batch.n_chunks, 1), topic_word.shape[1]), np.float64)
    _warps(_m_step_chunks, batch.n_chunks)(batch.chunk_word, batch.chunk_start, batch.chunk_end, batch.word_docs,
                                           batch.word_counts, topics, gamma, partial)
    out = cuda.device_array(topic_word.shape, np.float64)
    _threads(_chunk_sums, out.size)(batch.word_chunks, partial, topics, True, out)
    return out.copy_to_host()


class CollapsedShares:
    """:class:`~streamtopics.collapsed.CollapsedShares` on the device: the constructor places the
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
        _warps(_seed_shares, batch.n_docs)(batch.indptr, batch.indices, batch.counts, self.seed_topic_word,
                                            cuda.to_device(np.ascontiguousarray(mixtures, np.float64)),
                                            self.topic_ids, self.weights, self.doc_topic)
        self._sum_word_topic()

    def _sum_word_topic(self) -> None:
        b = self.batch
        _warps(_word_topic_chunks, b.n_chunks)(b.chunk_start, b.chunk_end, b.word_entries, b.counts, self.topic_ids,
                                               self.weights, self.partial)
        _threads(_chunk_sums, self.word_topic.size)(b.word_chunks, self.partial, self.word_topic, False,
                                                    self.word_topic)

    def _phi(self, smoothing: float, out) -> None:
        n_words, n_topics = self.word_topic.shape
        _blocks(_column_totals, n_topics)(self.word_topic, self.totals)
        _threads(_topic_word, n_words * n_topics)(self.word_topic, self.totals, float(smoothing),
                                                  self.seed_topic_word, out)

    def sweep(self, document_prior: float, smoothing: float, blocks: int) -> None:
        """One CVB0 sweep, ``blocks`` blocks of documents in turn, as the CPU's sweep."""
        b = self.batch
        edges = np.linspace(0, b.n_docs, min(blocks, b.n_docs) + 1).astype(np.int64)
        for first, end in zip(edges[:-1], edges[1:]):
            self._phi(smoothing, self.phi)
            _warps(_sweep, int(end - first))(b.indptr, b.indices, b.counts, int(first), int(end), self.phi,
                                              float(document_prior), self.topic_ids, self.weights, self.doc_topic)
            self._sum_word_topic()

    def topic_word(self, smoothing: float) -> np.ndarray:
        """``(n_wk + smoothing) / (n_k + V smoothing)`` on the host."""
        self._phi(smoothing, self.phi)
        return self.phi.copy_to_host()


class DeviceRefinementSteps:
    """:class:`~streamtopics.refinement.HostRefinementSteps` on the device: the fitted and the
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
                    smoothing: float) -> np.ndarray:
        if mixtures is None:
            uniform = starting_mixtures(self.fit.n_docs, start.shape[1])
            mixtures = infer_mixtures(self.fit, start, uniform, SEED_UPDATES, 1e-5)
        shares = CollapsedShares(self.fit, start, mixtures)
        for _ in range(sweeps):
            shares.sweep(document_prior, smoothing, SWEEP_BLOCKS)
        return shares.topic_word(smoothing)


# The kernels. A *warp* (32 threads) works on one document or word, each lane on the topics
# ``lane, lane + 32, ...`` (coalesced reads of a row, at most LANE_TOPICS each), sums over topics
# by a butterfly of shuffles (every lane ends with the same, bit-identical value, so the lanes
# take the same branches); where one thread per document did the work, a document's 100 topics
# ran one after another on 1 of 32 lanes, and the refinement was no faster than 16 CPU threads.

FULL_MASK = 0xFFFFFFFF
LANE_TOPICS = MAX_TOPICS // 32


@cuda.jit(device=True, inline=True)
def _warp_sum(value):
    for step in (16, 8, 4, 2, 1):
        value += cuda.shfl_xor_sync(FULL_MASK, value, step)
    return value


@cuda.jit(device=True, inline=True)
def _warp_max(value):
    for step in (16, 8, 4, 2, 1):
        value = max(value, cuda.shfl_xor_sync(FULL_MASK, value, step))
    return value


@cuda.jit(device=True, inline=True)
def _warp_and_lane():
    return cuda.grid(1) // 32, cuda.threadIdx.x % 32


@cuda.jit(cache=True)
def _infer(indptr, indices, counts, topic_word, mixtures, max_iter, tol):
    """A warp per document: :func:`~streamtopics.inference._fit_mixture`'s updates, in place."""
    d, lane = _warp_and_lane()
    if d >= indptr.size - 1:
        return
    start, end = indptr[d], indptr[d + 1]
    if end <= start:
        return
    k = topic_word.shape[1]
    slots = (k - lane + 31) // 32
    g = cuda.local.array(LANE_TOPICS, float64)
    new = cuda.local.array(LANE_TOPICS, float64)
    total = 0.0
    for p in range(start + lane, end, 32):
        total += counts[p]
    total = _warp_sum(total)
    for i in range(slots):
        g[i] = mixtures[d, lane + 32 * i]
    for _ in range(max_iter):
        for i in range(slots):
            new[i] = 0.0
        for p in range(start, end):
            w = indices[p]
            s = 0.0
            for i in range(slots):
                s += (topic_word[w, lane + 32 * i] + 1e-12) * g[i]
            scale = (counts[p] / total) / _warp_sum(s)
            for i in range(slots):
                new[i] += (topic_word[w, lane + 32 * i] + 1e-12) * scale
        change, norm = 0.0, 0.0
        for i in range(slots):
            value = g[i] * new[i]
            change = max(change, abs(value - g[i]))
            g[i] = value
            norm += value
        change, norm = _warp_max(change), _warp_sum(norm)
        for i in range(slots):
            g[i] /= norm
        if change < tol:
            break
    for i in range(slots):
        mixtures[d, lane + 32 * i] = g[i]


@cuda.jit(cache=True)
def _m_step_chunks(chunk_word, chunk_start, chunk_end, docs, counts, topic_word, gamma, partial):
    """A warp per chunk of word j's documents: ``sum_d gamma_dk H_dj / (A gamma_d)_j`` over them."""
    c, lane = _warp_and_lane()
    if c >= chunk_word.size:
        return
    j = chunk_word[c]
    slots = (topic_word.shape[1] - lane + 31) // 32
    total = cuda.local.array(LANE_TOPICS, float64)
    row = cuda.local.array(LANE_TOPICS, float64)
    for i in range(slots):
        total[i] = 0.0
        row[i] = topic_word[j, lane + 32 * i]
    for p in range(chunk_start[c], chunk_end[c]):
        d = docs[p]
        fhat = 0.0
        for i in range(slots):
            fhat += row[i] * gamma[d, lane + 32 * i]
        fhat = _warp_sum(fhat)
        if fhat <= 0.0:
            continue
        s = counts[p] / fhat
        for i in range(slots):
            total[i] += s * gamma[d, lane + 32 * i]
    for i in range(slots):
        partial[c, lane + 32 * i] = total[i]


@cuda.jit(cache=True)
def _chunk_sums(word_chunks, partial, row_scale, scaled, out):
    """A thread per cell (w, k): the sum of word w's chunks' partial sums, in order, times
    ``row_scale[w, k]`` when ``scaled`` (the M-step's ``A_jk``)."""
    cell = cuda.grid(1)
    n_words, n_topics = out.shape
    if cell >= n_words * n_topics:
        return
    w, a = cell // n_topics, cell % n_topics
    total = 0.0
    for c in range(word_chunks[w], word_chunks[w + 1]):
        total += partial[c, a]
    out[w, a] = row_scale[w, a] * total if scaled else total


@cuda.jit(device=True, inline=True)
def _offer(v, k, best, best_ids, top):
    """A lane's topics offered in increasing order: ``k`` enters the lane's kept list
    (descending) only above its last value, so of equal values the lower topic stays."""
    if v > best[top - 1]:
        i = top - 1
        while i > 0 and best[i - 1] < v:
            best[i] = best[i - 1]
            best_ids[i] = best_ids[i - 1]
            i -= 1
        best[i] = v
        best_ids[i] = k


@cuda.jit(device=True, inline=True)
def _keep_largest(best, best_ids, top, lane, kept, kept_ids):
    """The warp's ``top`` largest values (of equal values the lower topic, as on the CPU) from
    every lane's kept list, into ``kept`` and ``kept_ids`` on every lane: ``top`` rounds, each
    taking the best of the lanes' heads."""
    head = 0
    for t in range(top):
        mine = best[head] if head < top else -math.inf
        mine_id = best_ids[head] if head < top else (1 << 30) + lane
        v, v_id = mine, mine_id
        for step in (16, 8, 4, 2, 1):
            other = cuda.shfl_xor_sync(FULL_MASK, v, step)
            other_id = cuda.shfl_xor_sync(FULL_MASK, v_id, step)
            if other > v or (other == v and other_id < v_id):
                v, v_id = other, other_id
        kept[t], kept_ids[t] = v, v_id
        if v_id == mine_id:
            head += 1


@cuda.jit(device=True, inline=True)
def _share(kept, top, t):
    """Kept value ``t`` over the sum of the kept values (1/top when they sum to 0), in float32 as stored."""
    total = 0.0
    for u in range(top):
        total += max(kept[u], 0.0)
    return numba.float32(max(kept[t], 0.0) / total if total > 0 else 1.0 / top)


@cuda.jit(device=True, inline=True)
def _store_shares(ids, weights, e, count, kept, kept_ids, top, lane, held):
    """Row ``e`` of ``ids`` and ``weights`` from the warp's kept topics (lane 0 writes it), and
    the entry's ``count`` times each share added to the document's topic counts, by the lane
    holding that topic."""
    for t in range(top):
        share = _share(kept, top, t)
        if lane == 0:
            ids[e, t], weights[e, t] = kept_ids[t], share
        if kept_ids[t] % 32 == lane:
            held[kept_ids[t] // 32] += count * share


@cuda.jit(cache=True)
def _seed_shares(indptr, indices, counts, topic_word, mixtures, ids, weights, doc_topic):
    """A warp per document: shares ``∝ A_wk theta_dk`` (largest kept), the document's topic counts."""
    d, lane = _warp_and_lane()
    if d >= indptr.size - 1:
        return
    k, top = topic_word.shape[1], ids.shape[1]
    slots = (k - lane + 31) // 32
    theta = cuda.local.array(LANE_TOPICS, float64)
    held = cuda.local.array(LANE_TOPICS, float64)
    best = cuda.local.array(TOP_TOPICS, float64)
    best_ids = cuda.local.array(TOP_TOPICS, int64)
    kept = cuda.local.array(TOP_TOPICS, float64)
    kept_ids = cuda.local.array(TOP_TOPICS, int64)
    for i in range(slots):
        theta[i] = mixtures[d, lane + 32 * i]
        held[i] = 0.0
    for e in range(indptr[d], indptr[d + 1]):
        w = indices[e]
        for t in range(top):
            best[t], best_ids[t] = -1.0, k
        for i in range(slots):
            _offer(topic_word[w, lane + 32 * i] * theta[i], lane + 32 * i, best, best_ids, top)
        _keep_largest(best, best_ids, top, lane, kept, kept_ids)
        _store_shares(ids, weights, e, counts[e], kept, kept_ids, top, lane, held)
    for i in range(slots):
        doc_topic[d, lane + 32 * i] = held[i]


@cuda.jit(cache=True)
def _sweep(indptr, indices, counts, first, end, phi, document_prior, ids, weights, doc_topic):
    """A warp per document of ``first:end``: :func:`~streamtopics.collapsed._sweep`'s update."""
    d, lane = _warp_and_lane()
    d += first
    if d >= end:
        return
    k, top = phi.shape[1], ids.shape[1]
    slots = (k - lane + 31) // 32
    held = cuda.local.array(LANE_TOPICS, float64)
    best = cuda.local.array(TOP_TOPICS, float64)
    best_ids = cuda.local.array(TOP_TOPICS, int64)
    kept = cuda.local.array(TOP_TOPICS, float64)
    kept_ids = cuda.local.array(TOP_TOPICS, int64)
    for i in range(slots):
        held[i] = doc_topic[d, lane + 32 * i]
    for e in range(indptr[d], indptr[d + 1]):
        c, w = counts[e], indices[e]
        for t in range(top):
            a = ids[e, t]
            if a % 32 == lane:
                held[a // 32] -= c * weights[e, t]
        for t in range(top):
            best[t], best_ids[t] = -1.0, k
        for i in range(slots):
            _offer(phi[w, lane + 32 * i] * (max(held[i], 0.0) + document_prior), lane + 32 * i, best, best_ids, top)
        _keep_largest(best, best_ids, top, lane, kept, kept_ids)
        cuda.syncwarp()  # every lane has read row e's old shares before lane 0 overwrites them
        _store_shares(ids, weights, e, c, kept, kept_ids, top, lane, held)
    for i in range(slots):
        doc_topic[d, lane + 32 * i] = held[i]


@cuda.jit(cache=True)
def _word_topic_chunks(chunk_start, chunk_end, entries, counts, ids, weights, partial):
    """A warp per chunk of a word's entries: ``sum_e c_e s_e,k`` over them, in entry order, each
    lane summing its topics."""
    c, lane = _warp_and_lane()
    if c >= chunk_start.size:
        return
    slots = (partial.shape[1] - lane + 31) // 32
    total = cuda.local.array(LANE_TOPICS, float64)
    for i in range(slots):
        total[i] = 0.0
    for q in range(chunk_start[c], chunk_end[c]):
        e = entries[q]
        for t in range(ids.shape[1]):
            a = ids[e, t]
            if a % 32 == lane:
                total[a // 32] += counts[e] * weights[e, t]
    for i in range(slots):
        partial[c, lane + 32 * i] = total[i]


@cuda.jit(cache=True)
def _column_totals(word_topic, totals):
    """A block per topic: ``n_k``, each thread's stride of words, then a tree in shared memory."""
    a, tid = cuda.blockIdx.x, cuda.threadIdx.x
    partial = cuda.shared.array(THREADS, float64)
    s = 0.0
    for w in range(tid, word_topic.shape[0], THREADS):
        s += word_topic[w, a]
    partial[tid] = s
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if tid < step:
            partial[tid] += partial[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        totals[a] = partial[0]


@cuda.jit(cache=True)
def _topic_word(word_topic, totals, smoothing, seed_topic_word, out):
    """A thread per cell: ``(n_wk + smoothing) / (n_k + V smoothing)``, the seed's column where a
    topic holds nothing."""
    cell = cuda.grid(1)
    n_words, n_topics = word_topic.shape
    if cell >= n_words * n_topics:
        return
    w, a = cell // n_topics, cell % n_topics
    if totals[a] > 0:
        out[w, a] = (word_topic[w, a] + smoothing) / (totals[a] + n_words * smoothing)
    else:
        out[w, a] = seed_topic_word[w, a]
