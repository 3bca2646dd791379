"""The CUDA kernels of the device refinement (:mod:`~streamtopics.refresh.gpu` launches them).

A *warp* (32 threads) works on one document or word, each lane on the topics ``lane, lane + 32,
...`` (coalesced reads of a row, at most :data:`LANE_TOPICS` each), sums over topics by a
butterfly of shuffles (every lane ends with the same, bit-identical value, so the lanes take the
same branches); where one thread per document did the work, a document's 100 topics ran one after
another on 1 of 32 lanes, and the refinement was no faster than 16 CPU threads. Each kernel does
what its CPU counterpart's loop body does (:mod:`~streamtopics.inference`,
:mod:`~streamtopics.refresh.kl_tem`, :mod:`~streamtopics.refresh.collapsed`). Compiled on first launch and cached
on disk (``cache=True``).
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda, float64, int64

from .collapsed import TOP_TOPICS
from .device import DEVICE_MAX_COLUMNS as MAX_TOPICS

if not hasattr(np, "row_stack"):
    # numba-cuda (0.30.4, the newest in 2026-11) registers an overload of np.row_stack when its
    # first kernel compiles; numpy 2.5 removed that alias of np.vstack, and every compile failed
    # with AttributeError (seen on an H200 with numpy 2.5.2). The alias restored, as it was.
    np.row_stack = np.vstack

THREADS = 128  # threads per block of every launch
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
def infer(indptr, indices, counts, topic_word, mixtures, max_iter, tol):
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
def m_step_chunks(chunk_word, chunk_start, chunk_end, docs, counts, topic_word, gamma, partial):
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
def chunk_sums(word_chunks, partial, row_scale, scaled, out):
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
def seed_shares(indptr, indices, counts, topic_word, mixtures, ids, weights, doc_topic):
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
def sweep(indptr, indices, counts, first, end, phi, document_prior, ids, weights, doc_topic):
    """A warp per document of ``first:end``: :func:`~streamtopics.refresh.collapsed._sweep`'s update."""
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
def word_topic_chunks(chunk_start, chunk_end, entries, counts, ids, weights, partial):
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
def column_totals(word_topic, totals):
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
def topic_word(word_topic, totals, smoothing, seed_topic_word, out):
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
