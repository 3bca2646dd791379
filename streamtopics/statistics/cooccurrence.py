"""Running word co-occurrence sums (Arora et al. 2013, supplement "generating Q").

For every document with n_d >= 2 tokens,
``Q_d = (H_d H_d^T - diag(H_d)) / (n_d (n_d - 1))`` (entries sum to exactly 1); the engine keeps
``Q_sum = sum_d Q_d`` in float64 together with the number of contributing documents M, the row
sums of ``Q_sum`` (which give p(w)), word counts and document frequencies.

``Q_sum`` is symmetric, so only its upper triangle is stored, packed row by row: row ``i`` holds
columns ``i..V-1`` starting at ``i*V - i*(i-1)/2``. That halves both memory (900 MB instead of
1.8 GB at V = 15,000) and ingest work. Readers never see the packing: :meth:`rows` returns full
rows and :meth:`matmul` multiplies by the full symmetric matrix.

Ingestion processes a batch word by word: a word's row is updated for every document of the batch
that contains it while that row is in cache, and rows are split over threads, so threads never
write the same memory. Each cell receives its additions in document order whatever the batch
sizes, so sums are bit-identical however a stream is batched.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..text.documents import DocumentBatch
from .forgetting import DecayClock
from .prefetch import prefetch

_ROW_BLOCK = 512  # rows unpacked at a time by matmul: 512 x V doubles of scratch


@njit(cache=True, inline="always")
def _row_offset(i, n_words):
    """Position of cell (i, i) in the packed upper triangle."""
    return i * n_words - (i * (i - 1)) // 2


@njit(cache=True, nogil=True)
def word_run_offsets(indices, n_words):
    """Where each word's run starts when entries are counting-sorted by word id (``n_words + 1``
    offsets, the last one the number of entries)."""
    offsets = np.zeros(n_words + 1, np.int64)
    for w in indices:
        offsets[w + 1] += 1
    for w in range(n_words):
        offsets[w + 1] += offsets[w]
    return offsets


@njit(cache=True, nogil=True)
def group_entries_by_word(indices, n_words):
    """Counting sort of batch entries by word id (stable, so document order is kept).

    Returns the entry positions in word order and, for each distinct word present, the start of
    its run (one extra end marker)."""
    per_word = word_run_offsets(indices, n_words)
    starts = per_word[:-1].copy()
    order = np.empty(indices.size, np.int64)
    for e in range(indices.size):
        w = indices[e]
        order[starts[w]] = e
        starts[w] += 1
    n_groups = 0
    for w in range(n_words):
        if per_word[w + 1] > per_word[w]:
            n_groups += 1
    group_starts = np.empty(n_groups + 1, np.int64)
    g = 0
    for w in range(n_words):
        if per_word[w + 1] > per_word[w]:
            group_starts[g] = per_word[w]
            g += 1
    group_starts[n_groups] = indices.size
    return order, group_starts


_PREFETCH_AHEAD = 4  # entries of a row's group loaded ahead: 2, 4, 8 and 16 measured alike (+25 %)


@njit(cache=True, nogil=True, parallel=True)
def _accumulate_batch(q, word_mass, n_words, indptr, indices, counts, order, group_starts, n_chunks, weights):
    """Add the batch's Q_d (upper triangle) and row sums, document ``d``'s share multiplied by
    ``weights[d]`` (ones for exact sums: multiplying by 1.0 is exact, so those are bit-identical
    to unweighted sums; the lazily scaled increments of exponential forgetting otherwise).
    Groups (rows) are dealt round-robin to ``n_chunks`` chunks so frequent (heavy) words spread
    evenly over threads.

    Each entry's factors are computed once, beside the entry (``scale``, ``share``, and the end
    of its document's run, -1 for a document without pairs), so that a row's loop reads only
    memory at and after the entry, which is prefetched ``_PREFETCH_AHEAD`` entries ahead: each
    entry of a row's group lies in another document, a cache miss that the long inner loop of the
    previous entry would otherwise not overlap. A row's diagonal cell and row sum are summed in
    registers in the same order as in memory (bit-identical)."""
    n_docs = indptr.size - 1
    scale = np.empty(indices.size)
    share = np.empty(indices.size)
    run_end = np.empty(indices.size, np.int64)
    for d in prange(n_docs):
        n = 0.0
        for e in range(indptr[d], indptr[d + 1]):
            n += counts[e]
        for e in range(indptr[d], indptr[d + 1]):
            scale[e] = weights[d] * counts[e] / (n * (n - 1.0))
            share[e] = weights[d] * counts[e] / n
            run_end[e] = indptr[d + 1] if n >= 2.0 else -1
    n_groups = group_starts.size - 1
    for chunk in prange(n_chunks):
        for g in range(chunk, n_groups, n_chunks):
            w = np.int64(indices[order[group_starts[g]]])
            base = _row_offset(w, n_words) - w
            mass = word_mass[w]
            diagonal = q[base + w]
            last = group_starts[g + 1]
            for t in range(group_starts[g], last):
                if t + _PREFETCH_AHEAD < last:
                    ahead = order[t + _PREFETCH_AHEAD]
                    prefetch(run_end, ahead)
                    prefetch(scale, ahead)
                    prefetch(share, ahead)
                    prefetch(counts, ahead)
                    prefetch(counts, ahead + 8)
                    prefetch(indices, ahead + 1)
                e = order[t]
                end = run_end[e]
                if end < 0:
                    continue
                f = scale[e]
                mass += share[e]
                diagonal += f * (counts[e] - 1.0)
                # unsigned positions: numba then skips the negative-index wrap-around test on
                # every access of this innermost loop (1.25x single-threaded: `git show
                # 8e056d1:BENCHMARKS.md`, "Ingest kernel: prefetched entries, unsigned inner loop")
                for p in range(np.uint64(e + 1), np.uint64(end)):
                    q[np.uint64(base + indices[p])] += f * counts[p]
            word_mass[w] = mass
            q[base + w] = diagonal


@njit(cache=True, nogil=True, parallel=True)
def _gather_rows(q, n_words, rows):
    """Full rows of the symmetric matrix stored as a packed upper triangle."""
    out = np.empty((rows.size, n_words))
    for r in prange(rows.size):
        i = np.int64(rows[r])
        for j in range(i):
            out[r, j] = q[_row_offset(j, n_words) + i - j]
        start = _row_offset(i, n_words) - i
        for j in range(i, n_words):
            out[r, j] = q[start + j]
    return out


_PROJECTED_TILE = 64  # candidate rows projected together: each row of P is then applied to 64 values at once


@njit(cache=True, nogil=True, parallel=True)
def _projected_normalised_rows(q, n_words, rows, divisors, indptr, indices, data, dimension):
    """``(Q[rows] / divisors[:, None]) @ P`` for a sparse ``P`` (CSR: ``indptr``, ``indices``,
    ``data``; V x ``dimension``) straight from the packing, no V-wide row formed: a tile of
    :data:`_PROJECTED_TILE` rows at a time, word by word, each of P's entries in word j's row
    added to the tile's outputs at once (contiguous, vectorised). Each output cell adds its terms
    in word order, as the product of the gathered rows with ``P`` does (scipy's), so the result
    is the same to the bit."""
    out = np.empty((rows.size, dimension))
    tile = _PROJECTED_TILE
    for first in prange((rows.size + tile - 1) // tile):
        r0 = first * tile
        r1 = min(r0 + tile, rows.size)
        width = r1 - r0
        ids = rows[r0:r1].astype(np.int64)
        starts = np.empty(width, np.int64)
        for t in range(width):
            starts[t] = _row_offset(ids[t], n_words) - ids[t]
        acc = np.zeros((dimension, width))  # transposed: a row of P updates contiguous cells
        values = np.empty(width)
        for j in range(n_words):
            lower = _row_offset(j, n_words) - j
            nonzero = False
            for t in range(width):
                i = ids[t]
                value = q[lower + i] if j < i else q[starts[t] + j]
                values[t] = value / divisors[r0 + t]
                nonzero |= value != 0.0
            if nonzero:
                for e in range(indptr[j], indptr[j + 1]):
                    column, weight = indices[e], data[e]
                    for t in range(width):
                        acc[column, t] += values[t] * weight
        for t in range(width):
            for c in range(dimension):
                out[r0 + t, c] = acc[c, t]
    return out


@njit(cache=True, nogil=True)
def _upper_rows(q, n_words, r0, r1, upper):
    """``upper[i - r0, j - r0] = Q[i, j]`` for rows r0..r1 and j >= i, zero for j < i: each row
    is one contiguous run of the packing. One thread: after a parallel kernel numba's OpenMP
    workers spin-wait for the next one, and the BLAS products that follow each block then shared
    a core with a spinning worker (V = 15,000, k = 101, Intel Xeon VM, 2 cores: ``matmul`` 0.55 s
    with this loop on two threads, 0.40 s on one; unpacking on a helper thread beside the products,
    0.42 s)."""
    for i in range(r0, r1):
        start = _row_offset(i, n_words) - i
        for j in range(r0, i):
            upper[i - r0, j - r0] = 0.0
        for j in range(i, n_words):
            upper[i - r0, j - r0] = q[start + j]


class RunningSums:
    """What the exact sums and the large-vocabulary sketch (:mod:`~streamtopics.statistics.sketch`) share:
    the per-word sums beside the pair statistics, documents in and out (sliding window), and
    lazy exponential forgetting. A subclass keeps its pair statistics and says how a batch goes
    into them (``_accumulate``, with per-document weights) and which arrays forgetting scales
    (``_arrays``)."""

    n_words: int
    half_life: float | None
    decay: DecayClock | None

    def _start_per_word_sums(self, half_life: float | None, half_life_unit: str) -> None:
        self.word_mass = np.zeros(self.n_words)  # row sums of Q_sum: sum_d H_d[w] / n_d
        self.word_counts = np.zeros(self.n_words)  # sum_d H_d[w]
        self.n_docs = 0  # M: documents that contributed (n_d >= 2)
        self.half_life = None
        self.decay = None
        if half_life is None:
            self.document_frequency = np.zeros(self.n_words, np.int64)
        else:
            self._start_forgetting(DecayClock(half_life, half_life_unit))

    # ------------------------------------ forgetting (docs/design.md, "Forgetting, windows, open vocabularies")
    # With ``half_life`` h, every sum is the exponentially weighted sum ``sum_d 2^(-(T - t_d) / h)
    # Q_d``, T now and t_d the time of document d (its arrival index, or its stream time): the
    # latest document weighs 1, one h older weighs 1/2. Multiplying V^2 numbers per document
    # would make ingestion O(V^2), so it is done lazily (:class:`~streamtopics.statistics.forgetting.DecayClock`):
    # each new document is added with weight ``2^((t_d - epoch) / h)``, readers get the true
    # sums through :meth:`view` (which settles the stored sums onto the current time: O(V^2),
    # done by refresh, which costs far more anyway). Document frequencies become decayed (float)
    # document frequencies and ``effective_documents`` (the sum of the weights, tending to
    # h / ln 2 documents) replaces M for readers.
    def _start_forgetting(self, decay: DecayClock) -> None:
        self.decay = decay
        self.half_life = decay.half_life
        self.document_frequency = np.zeros(self.n_words)
        self._weight_sum = 0.0  # stored (scaled) sum of document weights

    def _per_word_state(self) -> dict:
        """The per-word sums and the forgetting clock as a state file holds them (the pair
        statistics are the subclass's)."""
        state = {"word_mass": self.word_mass, "word_counts": self.word_counts,
                 "document_frequency": self.document_frequency, "n_docs": np.int64(self.n_docs)}
        if self.half_life is not None:
            state.update({"weight_sum": np.float64(self._weight_sum), **self.decay.state_dict()})
        return state

    def _load_per_word_state(self, state: dict) -> None:
        """Restore what :meth:`_per_word_state` saved."""
        self.word_mass = np.array(state["word_mass"], dtype=np.float64)
        self.word_counts = np.array(state["word_counts"], dtype=np.float64)
        self.n_docs = int(state["n_docs"])
        self.half_life = None
        self.decay = None
        if "half_life" in state:
            self._start_forgetting(DecayClock.from_state_dict(
                {"clock": self.n_docs, **state}))  # files before stream-time half-lives had no clock
            self.document_frequency = np.array(state["document_frequency"], dtype=np.float64)
            self._weight_sum = float(state["weight_sum"])
        else:
            self.document_frequency = np.array(state["document_frequency"], dtype=np.int64)

    @property
    def forgetting(self) -> bool:
        return self.half_life is not None

    @property
    def effective_documents(self) -> float:
        """M for readers: the documents absorbed, or their decayed weight with forgetting on."""
        if self.half_life is None:
            return float(self.n_docs)
        return self._weight_sum * self.decay.scale()

    def _rescale(self, factor: float) -> None:
        for array in self._arrays():
            array *= factor
        self._weight_sum *= factor

    def settle(self) -> None:
        """Divide the lazily scaled sums by their scale so that the stored numbers are the true
        decayed sums (scale 1). A no-op without forgetting."""
        if self.decay is not None:
            self.decay.settle(self._rescale)

    def _update_forgetting(self, batch: DocumentBatch, stream_times) -> None:
        weights = self.decay.weights(self.decay.times(len(batch), stream_times), self._rescale)
        self._accumulate(batch, weights)
        entry_weight = np.repeat(weights, np.diff(batch.indptr))
        self.word_counts += np.bincount(batch.indices, weights=batch.counts * entry_weight, minlength=self.n_words)
        self.document_frequency += np.bincount(batch.indices, weights=entry_weight, minlength=self.n_words)
        self._weight_sum += float(weights.sum())
        self.n_docs += len(batch)

    def update(self, batch: DocumentBatch, stream_times=None) -> None:
        """Absorb a batch. Documents with fewer than 2 tokens carry no word pair and are
        ignored here entirely (the model rejects them before, with a reason). ``stream_times``
        (one per document, seconds; NaN for unknown) date the documents when the half-life is
        in stream time."""
        if len(batch) == 0:
            return
        kept = batch.forming_pairs()
        if not kept.all():
            batch = batch.select(np.flatnonzero(kept))
            stream_times = None if stream_times is None else np.asarray(stream_times)[kept]
            if len(batch) == 0:
                return
        if self.half_life is not None:
            self._update_forgetting(batch, stream_times)
            return
        self._accumulate(batch, np.ones(len(batch)))
        self.word_counts += np.bincount(batch.indices, weights=batch.counts, minlength=self.n_words)
        self.document_frequency += np.bincount(batch.indices, minlength=self.n_words)
        self.n_docs += len(batch)

    def subtract(self, batch: DocumentBatch) -> None:
        """Remove documents added before (a sliding window's leaving documents): the same kernel
        with weight -1. Exact sums only (no forgetting); ``n_docs`` keeps counting arrivals."""
        if self.half_life is not None:
            raise ValueError("a sliding window and forgetting do not combine")
        kept = batch.forming_pairs()
        if not kept.all():
            batch = batch.select(np.flatnonzero(kept))
        if len(batch) == 0:
            return
        self._accumulate(batch, np.full(len(batch), -1.0))
        self.word_counts -= np.bincount(batch.indices, weights=batch.counts, minlength=self.n_words)
        self.document_frequency -= np.bincount(batch.indices, minlength=self.n_words)


class CooccurrenceStats(RunningSums):
    """Exact, mergeable running co-occurrence sums over a fixed vocabulary of ``n_words``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtopics.text.documents import DocumentBatch
    >>> stats = CooccurrenceStats(3)
    >>> batch = DocumentBatch(np.array([0, 2]), np.array([0, 2], np.int32),
    ...                       np.array([1.0, 2.0]), np.array([7], np.uint64))
    >>> stats.update(batch)
    >>> stats.to_dense().round(3).tolist()
    [[0.0, 0.0, 0.333], [0.0, 0.0, 0.0], [0.333, 0.0, 0.333]]
    >>> float(stats.to_dense().sum()), stats.n_docs
    (1.0, 1)
    """

    def __init__(self, n_words: int, half_life: float | None = None, half_life_unit: str = "documents"):
        self.n_words = int(n_words)
        self.packed = np.zeros(self.n_words * (self.n_words + 1) // 2)
        self._start_per_word_sums(half_life, half_life_unit)

    def _arrays(self) -> tuple:
        return (self.packed, self.word_mass, self.word_counts, self.document_frequency)

    def view(self) -> "CooccurrenceStats":
        """The sums as readers (anchor search, recovery) must see them: ``self`` without
        forgetting; with it, the settled sums (shared, not copied) whose ``n_docs`` is the
        effective number of documents."""
        if self.half_life is None:
            return self
        self.settle()
        out = CooccurrenceStats.__new__(CooccurrenceStats)
        out.n_words, out.half_life, out.decay = self.n_words, None, None
        out.packed, out.word_mass, out.word_counts = self.packed, self.word_mass, self.word_counts
        out.document_frequency = self.document_frequency
        out.n_docs = self._weight_sum
        return out

    def copy(self) -> "CooccurrenceStats":
        """An independent copy (one memcpy of the packed triangle): a consistent view of the sums
        that a refresh in another thread can read while ingestion goes on."""
        return CooccurrenceStats.from_state_dict(self.state_dict())  # which copies every array

    def _accumulate(self, batch: DocumentBatch, weights: np.ndarray) -> None:
        """Run the ingest kernel over one batch with per-document weights."""
        order, group_starts = group_entries_by_word(batch.indices, self.n_words)
        n_chunks = max(64, 4 * numba.get_num_threads())
        _accumulate_batch(
            self.packed, self.word_mass, self.n_words, batch.indptr, batch.indices,
            batch.counts, order, group_starts, n_chunks, weights,
        )

    def merge(self, other: "CooccurrenceStats") -> "CooccurrenceStats":
        """Add another instance's sums into this one (disjoint sub-streams -> their union)."""
        if other.n_words != self.n_words:
            raise ValueError(f"cannot merge statistics over {other.n_words} words into {self.n_words}")
        if self.half_life != other.half_life or (self.decay and self.decay.unit) != (other.decay and other.decay.unit):
            raise ValueError("cannot merge statistics with different forgetting (half_life)")
        if self.half_life is not None:
            # both sub-streams are taken to end now: their decayed sums add, at scale 1
            self.decay.settle_for_merge(other.decay, self._rescale, other._rescale)
            self._weight_sum += other._weight_sum
            self.n_docs += other.n_docs
            for mine, theirs in ((self.packed, other.packed), (self.word_mass, other.word_mass),
                                 (self.word_counts, other.word_counts),
                                 (self.document_frequency, other.document_frequency)):
                mine += theirs
            return self
        self.packed += other.packed
        self.word_mass += other.word_mass
        self.word_counts += other.word_counts
        self.document_frequency += other.document_frequency
        self.n_docs += other.n_docs
        return self

    def grow(self, n_words: int) -> None:
        """Add zero rows and columns for new words at the end (open vocabulary: a repack of the
        triangle, O(V^2)); the sums of the existing words are unchanged."""
        from ..text.open_vocabulary import grow_packed

        if n_words < self.n_words:
            raise ValueError("the statistics can only grow")
        if n_words == self.n_words:
            return
        extra = n_words - self.n_words
        self.packed = grow_packed(self.packed, self.n_words, n_words)
        self.word_mass = np.concatenate([self.word_mass, np.zeros(extra)])
        self.word_counts = np.concatenate([self.word_counts, np.zeros(extra)])
        self.document_frequency = np.concatenate(
            [self.document_frequency, np.zeros(extra, self.document_frequency.dtype)])
        self.n_words = int(n_words)

    def clear_word(self, word: int) -> None:
        """Forget word ``word`` entirely (open vocabulary: a retired word's slot is reused by a new
        one): its row and column become zero and every other word's ``word_mass`` loses the
        column's entries, so row sums stay equal to ``word_mass`` over the words kept. O(V)."""
        column = self.rows([word])[0]
        self.word_mass -= column
        np.maximum(self.word_mass, 0.0, out=self.word_mass)  # rounding residue of words only seen with it
        before = np.arange(word)
        self.packed[(before * self.n_words - (before * (before - 1)) // 2) + (word - before)] = 0.0
        start = word * self.n_words - (word * (word - 1)) // 2
        self.packed[start:start + self.n_words - word] = 0.0
        self.word_mass[word] = self.word_counts[word] = self.document_frequency[word] = 0

    def rows(self, ids) -> np.ndarray:
        """Full rows of Q_sum for the given word ids (len(ids) x V)."""
        return _gather_rows(self.packed, self.n_words, np.asarray(ids, dtype=np.int64))

    def normalised_projected_rows(self, ids, projection) -> np.ndarray:
        """The Qbar rows of ``ids`` (their rows divided by their masses; a word of no mass keeps its
        zero row) times the sparse ``projection`` (V x d), in one parallel pass over the packing:
        the same numbers as gathering the rows and multiplying, in a third of the time (2,000
        candidates at V = 15,000, d = 1,000: 0.38 s that way)."""
        ids = np.asarray(ids, dtype=np.int64)
        mass = self.word_mass[ids]
        projection = projection.tocsr()
        return _projected_normalised_rows(self.packed, self.n_words, ids, np.where(mass > 0, mass, 1.0),
                                          projection.indptr.astype(np.int64), projection.indices.astype(np.int64),
                                          np.asarray(projection.data, dtype=np.float64), projection.shape[1])

    def matmul(self, right: np.ndarray, single: bool = False) -> np.ndarray:
        """``Q_sum @ right`` for a V x k matrix. Q = U + U^T - diag with U the stored upper
        triangle, so each block of packed rows is unpacked once (contiguous copies, no
        transposed reads) and used by two products: ``U_block @ right`` for its own rows and
        ``U_block^T @ right_block`` (diagonal removed) for the rows below. Scratch memory is
        one ``_ROW_BLOCK`` x V block.

        ``single``: the blocks and ``right`` are rounded to float32 and multiplied in float32
        (the sums stay float64, the blocks' products are added in float64): 1.4-1.6 times as
        fast at V = 15,000, k = 101, within 5e-7 of the float64 product relative to its largest
        entry (``git show 8e056d1:BENCHMARKS.md``, "What the defaults cost")."""
        dtype = np.float32 if single else np.float64
        right = np.ascontiguousarray(right, dtype=dtype)
        out = np.zeros((self.n_words, right.shape[1]))
        scratch = np.empty(min(_ROW_BLOCK, self.n_words) * self.n_words, dtype)
        for r0 in range(0, self.n_words, _ROW_BLOCK):
            r1 = min(r0 + _ROW_BLOCK, self.n_words)
            upper = scratch[: (r1 - r0) * (self.n_words - r0)].reshape(r1 - r0, self.n_words - r0)
            _upper_rows(self.packed, self.n_words, r0, r1, upper)
            out[r0:r1] += upper @ right[r0:]
            diagonal = np.arange(r1 - r0)
            upper[diagonal, diagonal] = 0.0
            out[r0:] += upper.T @ right[r0:r1]
        return out

    def to_dense(self) -> np.ndarray:
        """The full V x V matrix Q_sum (for tests and small vocabularies)."""
        return self.rows(np.arange(self.n_words))

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.packed, self.word_mass, self.word_counts, self.document_frequency))

    def state_dict(self) -> dict:
        return {"packed": self.packed, **self._per_word_state()}

    @classmethod
    def from_state_dict(cls, state: dict) -> "CooccurrenceStats":
        stats = cls.__new__(cls)
        stats.n_words = int(state["word_mass"].size)
        stats.packed = np.array(state["packed"], dtype=np.float64)
        stats._load_per_word_state(state)
        if stats.packed.size != stats.n_words * (stats.n_words + 1) // 2:
            raise ValueError("packed co-occurrence sums do not match the vocabulary size")
        return stats


class DenseCooccurrence:
    """A full Q_sum matrix behind the same reading interface as :class:`CooccurrenceStats`.

    Used for batch computations (a corpus's Q computed at once), population matrices of
    synthetic models, and tests.
    """

    def view(self) -> "DenseCooccurrence":
        return self

    def __init__(self, q_sum: np.ndarray, n_docs: int = 1, document_frequency=None):
        self.matrix = np.asarray(q_sum, dtype=np.float64)
        self.n_words = self.matrix.shape[0]
        self.n_docs = int(n_docs)
        self.word_mass = self.matrix.sum(axis=1)
        if document_frequency is None:
            document_frequency = np.full(self.n_words, self.n_docs, dtype=np.int64)
        self.document_frequency = np.asarray(document_frequency)

    def rows(self, ids) -> np.ndarray:
        return self.matrix[np.asarray(ids, dtype=np.int64)]

    def matmul(self, right: np.ndarray, single: bool = False) -> np.ndarray:
        if single:  # float32 products, as the packed sums give them (CooccurrenceStats.matmul)
            return (self.matrix.astype(np.float32) @ np.asarray(right, dtype=np.float32)).astype(np.float64)
        return self.matrix @ right
