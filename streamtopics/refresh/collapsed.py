"""Sparse CVB0: LDA's zero-order collapsed variational updates over the reservoir, seeded by the
recovered topics (docs/design.md, "Refinement"; Asuncion, Welling, Smyth & Teh 2009).

Why not only KL-tEM: KL-tEM climbs the likelihood of a mixture of multinomials, and on short
documents that likelihood's maximum lies farther from the truth than the anchor seed (Gibbs-truth
stream, Debian K = 50: L1 0.286 after one EM step, 0.401 after 20, on all 100,000 documents).
CVB0 keeps LDA's Dirichlet priors and, above all, leaves each entry's own share out of its
document's topic counts when it updates that share, so a word cannot vote for the topic it alone
put in its document; from the same seed it settles near batch Gibbs (``git show
8e056d1:BENCHMARKS.md``, "CVB0 from the anchor seed").

Each entry (a distinct word of a document) holds its expected topic assignment, its *shares*,
truncated to its :data:`TOP_TOPICS` largest (topic ids and float32 weights, ``nnz x TOP_TOPICS``
instead of ``nnz x K``: 24 bytes per entry whatever K, for the length of a refresh). The shares
must persist between sweeps: recomputing them each sweep from the documents' topic counts alone
(a fixed point per entry, no storage) drifted away from the truth on Debian K = 50, alpha 0.03
(L1 0.278 after one sweep, 0.315 after 30, against 0.256 with stored shares). An update of entry (d, w) with count c:

    n_d -= c s_e;  s_e,k  ∝  phi_wk (n_dk + alpha)  over its largest TOP_TOPICS k;  n_d += c s_e

with ``phi = (n_wk + beta) / (n_k + V beta)``. A sweep takes the documents in :data:`SWEEP_BLOCKS`
consecutive blocks: the documents of a block are updated in parallel against one phi (Jacobi),
and phi is brought up to date after each block (Gauss-Seidel across blocks; within a document,
each entry sees its predecessors' shares). The topic-word counts move by each block's changes,
in entry order, and are summed afresh once a sweep: the result does not depend on the number of
threads. Blocks reach in 4 sweeps what one phi per sweep reached in 5 (Reuters K = 50, alpha
0.1, 100k documents: 0.231 after 5 sweeps with one block, 0.228 after 4 and 0.224 after 5 with 8;
over the quality protocol's grid, 5 sweeps of 8 blocks gave lower L1 in 42 of 48 cells and equal
in 6), for about a quarter more time per sweep (``git show 8e056d1:BENCHMARKS.md``, "CVB0 in
blocks, and prefetched rows").

Kept topics per entry, after KL-tEM, 10 sweeps, on the quality protocol's captured
100k-document reservoirs (matched L1, 1 / 2 / 4 / 6 topics): Reuters K = 50, alpha 0.1: 0.285 /
0.248 / 0.225 / 0.220; Debian K = 50, alpha 0.03: 0.290 / 0.266 / 0.269 / 0.271; 20 Newsgroups
K = 50, alpha 0.1: 0.405 / 0.367 / 0.344 / 0.338. From the anchor seed alone the dense serial
CVB0 reached 0.253 on that Debian reservoir, 4 kept topics 0.256 and 8 0.263.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..text.documents import DocumentBatch
from ..inference import infer_mixtures
from ..statistics.prefetch import ROWS_AHEAD, prefetch, prefetch_row

TOP_TOPICS = 4  # topics kept per entry (see the module docstring for what was measured)
SWEEP_BLOCKS = 8  # blocks of documents per sweep, phi brought up to date after each (module docstring)
SEED_UPDATES = 10  # multiplicative updates fitting the documents' mixtures to the seed, for the first shares
LOG_FLOOR = 1e-9  # probability floor when scoring: a word no topic holds costs log(1e-9)
ENTRIES_AHEAD = 16  # the n_wk cells an entry updates are prefetched this many entries ahead (_update_word_topic)


class CollapsedShares:
    """The shares of every entry of a batch, its documents' topic counts, and the topic-word counts.

    >>> import numpy as np
    >>> from streamtopics.text.documents import DocumentBatch
    >>> topics = np.array([[0.5, 0.0], [0.5, 0.0], [0.0, 0.5], [0.0, 0.5]])
    >>> batch = DocumentBatch.from_pairs([(np.array([0, 1]), np.array([3.0, 2.0])),
    ...                                   (np.array([2, 3]), np.array([1.0, 4.0]))])
    >>> shares = CollapsedShares.seeded(batch, topics)
    >>> shares.sweep(document_prior=0.1, smoothing=0.01)
    >>> np.round(shares.topic_word(0.01), 2)
    array([[0.6, 0. ],
           [0.4, 0. ],
           [0. , 0.2],
           [0. , 0.8]])
    """

    def __init__(self, batch: DocumentBatch, topic_ids: np.ndarray, weights: np.ndarray, doc_topic: np.ndarray,
                 n_words: int, seed_topic_word: np.ndarray, placed: int | None = None):
        """``placed``: how many of the batch's first documents hold shares (all by default; the
        others' rows of ``topic_ids`` and ``weights`` are still to be filled by :meth:`place_rest`)."""
        self.batch = batch
        self.topic_ids, self.weights, self.doc_topic = topic_ids, weights, doc_topic
        self.seed_topic_word = seed_topic_word
        self.held_from = doc_topic.shape[1]  # columns from this one on keep the seed's (:meth:`hold`)
        self.placed = len(batch) if placed is None else placed
        self.word_topic = np.zeros((n_words, doc_topic.shape[1]))
        self._owners: dict[int, np.ndarray] = {}  # by number of threads (:meth:`_word_owners`)
        self._add_word_topic(slice(0, batch.indptr[self.placed]))

    @classmethod
    def seeded(cls, batch: DocumentBatch, topic_word: np.ndarray, mixtures: np.ndarray | None = None,
               top: int = TOP_TOPICS) -> "CollapsedShares":
        """Shares from the seed topics: each entry split over the topics by ``A_wk theta_dk``, with
        theta the documents' ``mixtures`` (None: fitted to the seed by :data:`SEED_UPDATES` updates;
        the refinement passes KL-tEM's, which saves that fit)."""
        n_topics = topic_word.shape[1]
        top = min(top, n_topics)
        ids = np.empty((batch.indices.size, top), np.int16 if n_topics < 2**15 else np.int32)
        weights = np.empty((batch.indices.size, top), np.float32)
        shares = cls(batch, ids, weights, np.zeros((len(batch), n_topics)), topic_word.shape[0],
                     np.ascontiguousarray(topic_word, dtype=np.float64), placed=0)
        shares.place_rest(topic_word, mixtures)
        return shares

    @classmethod
    def carried(cls, batch: DocumentBatch, topic_ids: np.ndarray, weights: np.ndarray, n_topics: int,
                seed_topic_word: np.ndarray, placed: int | None = None) -> "CollapsedShares":
        """Shares kept from an earlier refresh (:mod:`~streamtopics.refresh.carried`): the documents'
        topic counts are summed afresh from them, in entry order, so a resumed run has the same.
        ``placed``: only the first documents' shares are kept ones (``topic_ids`` and ``weights``
        have rows for every entry); :meth:`place_rest` places the others'."""
        placed = len(batch) if placed is None else placed
        doc_topic = np.zeros((len(batch), n_topics))
        _document_topics(batch.indptr[:placed + 1], batch.counts, topic_ids, weights, doc_topic)
        return cls(batch, topic_ids, weights, doc_topic, seed_topic_word.shape[0], seed_topic_word, placed)

    def place_rest(self, topic_word: np.ndarray, mixtures: np.ndarray | None = None) -> None:
        """The first shares of the documents that hold none yet, from ``topic_word`` as
        :meth:`seeded` places them (``mixtures``: theirs, one row each), added to the counts in
        entry order (the same sums as adding them with the others afresh)."""
        topic_word = np.ascontiguousarray(topic_word, dtype=np.float64)
        batch, first = self.batch, self.placed
        lo = batch.indptr[first]
        rest = DocumentBatch(batch.indptr[first:] - lo, batch.indices[lo:], batch.counts[lo:], batch.keys[first:])
        if mixtures is None:
            mixtures = infer_mixtures(rest, topic_word, None, max_iter=SEED_UPDATES, tol=1e-5, single=True)
        _seed_shares(batch.indptr[first:], batch.indices, batch.counts, topic_word, mixtures, self.topic_ids,
                     self.weights, self.doc_topic[first:])
        self.placed = len(batch)
        self._add_word_topic(slice(lo, None))

    def relabel(self, column_of: np.ndarray) -> None:
        """Topic k becomes topic ``column_of[k]`` (a permutation) in the shares placed: the entries'
        topic ids, and the columns of the documents' and the words' topic counts, which so hold what
        summing them afresh under the new ids would (each cell's terms, in the same order)."""
        _relabel(self.topic_ids[:self.batch.indptr[self.placed]], column_of.astype(self.topic_ids.dtype))
        inverse = np.argsort(column_of)
        self.doc_topic = np.ascontiguousarray(self.doc_topic[:, inverse])
        self.word_topic = np.ascontiguousarray(self.word_topic[:, inverse])

    def hold(self, first: int, columns: np.ndarray) -> None:
        """Hold columns ``first`` onwards at those of ``columns`` (V x the columns): their phi is
        no longer estimated from the shares (the background, whose distribution the moments give)."""
        self.seed_topic_word = self.seed_topic_word.copy()
        self.seed_topic_word[:, first:] = columns[:, first:]
        self.held_from = first

    def log_likelihood(self, document_prior: float, smoothing: float) -> float:
        """The fitted documents' log-likelihood per token under the shares' own estimates: phi as
        :meth:`topic_word`, each document's mixture its topic counts plus ``document_prior``,
        normalised. It ordered a carried and a restarted refinement as their distance to the truth
        did in 86 % of the pairs measured (:mod:`~streamtopics.refresh.carried`)."""
        theta = self.doc_topic + document_prior
        theta /= theta.sum(axis=1, keepdims=True)
        total, tokens = _log_likelihood(self.batch.indptr, self.batch.indices, self.batch.counts,
                                        self.topic_word(smoothing), theta)
        return total / max(tokens, 1.0)

    def topic_word(self, smoothing: float) -> np.ndarray:
        """``(n_wk + smoothing) / (n_k + V smoothing)``; a topic no entry holds keeps its seed column."""
        out = np.empty_like(self.word_topic)
        _topic_word(self.word_topic, float(smoothing), self.seed_topic_word, self.held_from, out)
        return out

    def sweep(self, document_prior: float, smoothing: float, blocks: int = SWEEP_BLOCKS, first: int = 0) -> None:
        """One CVB0 sweep over the entries of documents ``first`` onwards (all by default),
        ``blocks`` blocks of documents in turn, each against the topic-word counts its
        predecessors left. A sweep over all documents then sums the counts afresh (no rounding
        carried from sweep to sweep); one over the last documents only (a carried refresh's new
        ones) moves them by its last block's changes too, since summing every entry afresh cost
        as much as its own updates."""
        batch = self.batch
        if first >= len(batch):
            return
        edges = np.linspace(first, len(batch), min(blocks, len(batch) - first) + 1).astype(np.int64)
        phi = np.empty_like(self.word_topic)
        for start, end in zip(edges[:-1], edges[1:]):
            lo, hi = batch.indptr[start], batch.indptr[end]
            moved = end < len(batch) or first > 0  # a whole sweep's last block goes into the sum below instead
            if moved:
                ids_before, weights_before = self.topic_ids[lo:hi].copy(), self.weights[lo:hi].copy()
            _topic_word(self.word_topic, float(smoothing), self.seed_topic_word, self.held_from, phi)
            _sweep(batch.indptr[start:end + 1], batch.indices, batch.counts, phi,
                   float(document_prior), self.topic_ids, self.weights, self.doc_topic[start:end])
            if moved:
                self._add_word_topic(slice(lo, hi), before=(ids_before, weights_before))
        if first == 0:
            self.word_topic[:] = 0.0
            self._add_word_topic(slice(None))

    def _add_word_topic(self, entries: slice, before: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """``n_wk += c_e s_e,k`` over the ``entries``; with ``before`` (their ids and weights
        copied before a block's update) their previous shares are taken out first: ``n_wk``
        moved."""
        batch = self.batch
        ids, weights = self.topic_ids[entries], self.weights[entries]
        ids_before, weights_before = (ids, weights) if before is None else before
        _update_word_topic(batch.indices[entries], batch.counts[entries], ids, weights, self.word_topic,
                           ids_before, weights_before, before is not None, *self._word_owners())

    def _word_owners(self) -> tuple[np.ndarray, int]:
        """Which thread updates each word's row of ``n_wk`` (contiguous ranges of words holding
        about equal numbers of entries, computed once per number of threads), and the threads."""
        parts = numba.get_num_threads()
        if parts not in self._owners:
            per_word = np.bincount(self.batch.indices, minlength=self.word_topic.shape[0]).astype(np.float64)
            before = np.cumsum(per_word) - per_word / 2
            self._owners[parts] = np.minimum(before * parts // max(per_word.sum(), 1.0), parts - 1).astype(np.int32)
        return self._owners[parts], parts


@njit(cache=True, nogil=True, inline="always")
def _offer(v, k, best, best_ids):
    """Put topic ``k`` with value ``v`` into the kept list ``best`` (descending; of equal values the
    lower topic first), pushing its last out."""
    i = best.size - 1
    while i > 0 and (best[i - 1] < v or (best[i - 1] == v and best_ids[i - 1] > k)):
        best[i], best_ids[i] = best[i - 1], best_ids[i - 1]
        i -= 1
    best[i], best_ids[i] = v, k


@njit(cache=True, nogil=True, inline="always")
def _lower_bound_of_largest(values, top):
    """A value that the ``top``-th largest of ``values`` is not below: the smallest of the maxima
    of ``top`` interleaved groups (``top`` distinct entries, each at least it; -inf if ``values``
    has fewer than ``top``, which lets every value through). Branch-free, so the scan after it
    meets few values worth a comparison (the first shares' scan, which has no
    previous shares to start from: about 1.1 times as fast at K = 101)."""
    smallest = np.inf
    for g in range(top):
        largest = -np.inf
        for k in range(g, values.size, top):
            largest = max(largest, values[k])
        smallest = min(smallest, largest)
    return smallest


@njit(cache=True, nogil=True, inline="always")
def _keep_largest(values, ids, weights, e, best, best_ids, candidates, warm):
    """Entry ``e``'s shares: the largest ``best.size`` of ``values`` (of equal values the lower
    topic), normalised to sum to 1, into row ``e`` of ``ids`` and ``weights`` (``best``,
    ``best_ids``, ``candidates``: scratch buffers of the document, so that no entry allocates).

    A compare-and-branch per topic cannot be vectorised and was most of a sweep's time, so the
    topics are first narrowed down branch-free. With ``warm``, the topics row ``e`` holds are
    offered first (the order of offering does not change what is kept): they are mostly still
    the largest, and when a count of the values at least the smallest of them finds only them, no
    other topic can enter and nothing more is done. Otherwise only the topics whose values reach
    a floor are offered, in order: the smallest kept value (``warm``) or a lower bound of the
    ``best.size``-th largest (:func:`_lower_bound_of_largest`); none below it could be kept. Both
    exact (``git show 8e056d1:BENCHMARKS.md``, "CVB0 in blocks, and prefetched rows", its
    "Skipping the scan when nothing can enter")."""
    top = best.size
    best[:] = -1.0
    best_ids[:] = values.size
    if warm:
        for t in range(top):
            _offer(values[ids[e, t]], ids[e, t], best, best_ids)
        floor, floor_id = best[top - 1], best_ids[top - 1]
        # only the (distinct) topics offered reach the floor: the usual case, so a vectorised count
        # first, the slower gather below only when it fails
        if _count_at_least(values, floor) == top:
            _normalise(ids, weights, e, best, best_ids)
            return
    else:
        floor, floor_id = _lower_bound_of_largest(values, top), values.size
    bound = floor
    for i in range(_gather_at_least(values, floor, candidates)):
        k = candidates[i]
        v = values[k]
        if v > floor or (v == floor and k < floor_id):
            held = False
            for t in range(top):
                held = held or best_ids[t] == k
            if not held:
                _offer(v, k, best, best_ids)
                if best[top - 1] >= bound:
                    floor, floor_id = best[top - 1], best_ids[top - 1]
    _normalise(ids, weights, e, best, best_ids)


@njit(cache=True, nogil=True, inline="always")
def _gather_at_least(values, floor, candidates):
    """The topics whose values are at least ``floor``, in order, into the front of
    ``candidates``; returns how many (branch-free: every topic is written, the count decides
    which stay)."""
    found = 0
    for k in range(values.size):
        candidates[found] = k
        found += values[k] >= floor
    return found


@njit(cache=True, nogil=True, inline="always")
def _count_at_least(values, floor):
    """How many of ``values`` are at least ``floor`` (branch-free: the compiler vectorises it)."""
    count = 0
    for k in range(values.size):
        count += values[k] >= floor
    return count


@njit(cache=True, nogil=True, inline="always")
def _normalise(ids, weights, e, best, best_ids):
    """Row ``e`` of ``ids`` and ``weights``: the kept topics, their values normalised to sum to 1."""
    top = best.size
    total = 0.0
    for t in range(top):
        total += max(best[t], 0.0)
    for t in range(top):
        ids[e, t] = best_ids[t]
        weights[e, t] = max(best[t], 0.0) / total if total > 0 else 1.0 / top


@njit(cache=True, nogil=True, parallel=True)
def _seed_shares(indptr, indices, counts, topic_word, mixtures, ids, weights, doc_topic):
    """Every entry's shares ``∝ A_wk theta_dk`` (largest kept) and the documents' topic counts."""
    n_topics, top = topic_word.shape[1], ids.shape[1]
    flat = topic_word.reshape(-1)
    for d in prange(indptr.size - 1):
        values, best, best_ids = np.empty(n_topics), np.empty(top), np.empty(top, np.int64)
        candidates = np.empty(n_topics, np.int64)
        for e in range(indptr[d], indptr[d + 1]):
            if e + ROWS_AHEAD < indices.size:
                prefetch_row(flat, indices[e + ROWS_AHEAD], n_topics)
            w = indices[e]
            for k in range(n_topics):
                values[k] = topic_word[w, k] * mixtures[d, k]
            _keep_largest(values, ids, weights, e, best, best_ids, candidates, False)
            for t in range(top):
                doc_topic[d, ids[e, t]] += counts[e] * weights[e, t]


@njit(cache=True, nogil=True)
def _log_likelihood(indptr, indices, counts, topic_word, gamma):
    """``sum_d sum_j H_dj log max((A gamma_d)_j, LOG_FLOOR)`` and the number of tokens, in one
    pass in document order (no V x K or nnz x K temporaries; the same sum every run)."""
    total, tokens = 0.0, 0.0
    for d in range(indptr.size - 1):
        for p in range(indptr[d], indptr[d + 1]):
            j = indices[p]
            mix = 0.0
            for a in range(topic_word.shape[1]):
                mix += topic_word[j, a] * gamma[d, a]
            total += counts[p] * np.log(max(mix, LOG_FLOOR))
            tokens += counts[p]
    return total, tokens


@njit(cache=True, nogil=True)
def _relabel(ids, new_id):
    """``ids <- new_id[ids]``, in place (one pass; fancy indexing made int64 temporaries 8 bytes per
    kept topic per entry)."""
    flat = ids.reshape(-1)
    for i in range(flat.size):
        flat[i] = new_id[flat[i]]


@njit(cache=True, nogil=True, parallel=True)
def _document_topics(indptr, counts, ids, weights, doc_topic):
    """``n_dk = sum_e c_e s_e,k`` over each document's entries, in entry order."""
    for d in prange(indptr.size - 1):
        for e in range(indptr[d], indptr[d + 1]):
            for t in range(ids.shape[1]):
                doc_topic[d, ids[e, t]] += counts[e] * weights[e, t]


@njit(cache=True, nogil=True, parallel=True)
def _sweep(indptr, indices, counts, phi, document_prior, ids, weights, doc_topic):
    """One CVB0 update of every entry of the documents ``indptr`` delimits (one block of a sweep;
    ``doc_topic`` holds their rows), documents in parallel (see the module docstring). Every
    topic is a candidate: keeping to the document's active topics and the word's most probable
    ones gives the same shares, but documents of 60 distinct words hold 30 of 50 topics, and the
    indirection made the sweep 1.6 times as slow (Reuters K = 50)."""
    n_topics, top = phi.shape[1], ids.shape[1]
    flat = phi.reshape(-1)
    for d in prange(indptr.size - 1):
        values, best, best_ids = np.empty(n_topics), np.empty(top), np.empty(top, np.int64)
        candidates = np.empty(n_topics, np.int64)
        counts_d = doc_topic[d]
        for e in range(indptr[d], indptr[d + 1]):
            if e + ROWS_AHEAD < indices.size:
                prefetch_row(flat, indices[e + ROWS_AHEAD], n_topics)
            c, w = counts[e], indices[e]
            for t in range(top):
                counts_d[ids[e, t]] -= c * weights[e, t]
            for k in range(n_topics):
                values[k] = phi[w, k] * (max(counts_d[k], 0.0) + document_prior)
            _keep_largest(values, ids, weights, e, best, best_ids, candidates, True)
            for t in range(top):
                counts_d[ids[e, t]] += c * weights[e, t]


@njit(cache=True, nogil=True, parallel=True)
def _topic_word(word_topic, smoothing, seed_topic_word, held_from, out):
    """``out = (n_wk + smoothing) / (n_k + V smoothing)``; a topic no entry holds, and every column
    from ``held_from`` on, takes its seed column. The column sums in one thread, words in order (the same sums on any number of
    threads); then every row on its own, on all threads, a branch-free division over the row
    (vectorised) and the seed copied into the empty topics after it. A sweep's 8 calls took
    0.25-0.3 s at V = 100,000, K = 101 with one thread and a branch per cell."""
    n_words, n_topics = word_topic.shape
    totals = np.zeros(n_topics)
    for w in range(n_words):
        for k in range(n_topics):
            totals[k] += word_topic[w, k]
    denominators = totals + n_words * smoothing
    empty = np.flatnonzero((totals <= 0) | (np.arange(n_topics) >= held_from))
    for w in prange(n_words):
        for k in range(n_topics):
            out[w, k] = (word_topic[w, k] + smoothing) / denominators[k]
        for k in empty:
            out[w, k] = seed_topic_word[w, k]


@njit(cache=True, nogil=True, parallel=True)
def _update_word_topic(indices, counts, ids, weights, word_topic, ids_before, weights_before, moving, owners, parts):
    """``n_wk += c_e s_e,k`` over the entries given; with ``moving`` each entry's previous shares
    (``ids_before``, ``weights_before``) are taken out first. Part p of ``parts`` reads every
    entry in order and updates only the rows of the words with ``owners[w] == p``: a cell gets its
    changes in entry order, the same sums as one serial pass whatever the split, and each thread's
    reads stay sequential. At K = 101 and 4.2 million entries a pass takes 0.042 s on 2 threads
    against 0.087 s serial; at K = 21 and V = 4,829 (the Reuters replay of docs/replay.md, whose
    counts fit in cache) the same as serial. The cells an entry updates (its own and, moving, its
    previous topics' in its word's row) are scattered over n_wk: each thread prefetches them for
    its entry :data:`ENTRIES_AHEAD` ahead, which made a pass 1.5-2 times as fast at K = 101,
    V = 15,000 on an AMD EPYC, where a pass had taken 0.12 s (``git show 8e056d1:BENCHMARKS.md``,
    "Prefetched topic-word cells"). One kernel for adding and moving: each parallel kernel costs a
    first run about half a second to compile."""
    flat = word_topic.reshape(-1)
    n_topics = word_topic.shape[1]
    for part in prange(parts):
        for e in range(indices.size):
            ahead = e + ENTRIES_AHEAD
            if ahead < indices.size and owners[indices[ahead]] == part:
                row = indices[ahead] * n_topics
                for t in range(ids.shape[1]):
                    prefetch(flat, row + ids[ahead, t])
                    if moving:
                        prefetch(flat, row + ids_before[ahead, t])
            w = indices[e]
            if owners[w] != part:
                continue
            for t in range(ids.shape[1]):
                if moving:
                    word_topic[w, ids_before[e, t]] -= counts[e] * weights_before[e, t]
                word_topic[w, ids[e, t]] += counts[e] * weights[e, t]
