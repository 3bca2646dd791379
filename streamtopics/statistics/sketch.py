"""Sketched co-occurrence statistics for large vocabularies (issue 17, item 1).

The exact sums (:class:`~streamtopics.statistics.cooccurrence.CooccurrenceStats`) take V(V+1)/2 float64:
40 GB at V = 100,000. This module keeps instead a *linear sketch* whose memory is linear in V,
and turns it into a low-rank view of the sums at refresh time (Halko, Martinsson & Tropp 2011,
section 5.5, single-pass approximation of a symmetric matrix; Tropp, Yurtsever, Udell & Cevher
2017).

What is kept
------------
Write ``Q_sum = P - diag(c)`` with ``P = sum_d H_d H_d^T / (n_d (n_d - 1))`` and
``c_w = sum_d H_d[w] / (n_d (n_d - 1))``. The state is

    Y = P Omega          (V x s, float64)

where ``Omega`` is a V x s Gaussian test matrix whose row for word ``w`` is a deterministic
function of ``(seed, w, generation[w])`` (a counter-based generator: it is regenerated, never
saved, and grows with an open vocabulary), its numbers rounded to float32 and held so
(:data:`OMEGA_DTYPE`), plus exact O(V) vectors: ``c``, the diagonal of
``Q_sum``, ``word_mass`` (row sums), word counts, document frequencies, and the document count.
``Q_sum Omega = Y - diag(c) Omega`` follows exactly.

Per document, ``P_d Omega`` has row ``w`` equal to ``H_d[w] z_d / (n_d (n_d - 1))`` with
``z_d = sum_v H_d[v] Omega[v]``: the ingest kernel computes ``z_d`` for every document of a
block of documents, then adds the block to Y word by word (each row of Y touched once per block,
as the exact kernel touches each row of Q once per batch). Y is linear in the documents, so it
is order- and batch-independent (each row receives its additions in document order whatever the
batching: bit-identical), mergeable (sum), exactly resumable, decays with forgetting by the same
lazy scaling as the exact sums, and a sliding window subtracts leaving documents with weight -1.

The view
--------
At refresh, ``Q_sum`` is read through a low-rank view of its sketch (:mod:`~streamtopics.statistics.sketch_view`).

Retiring a word (open vocabulary) zeroes its row of Y and its exact numbers, and gives its slot a
new test row (``generation[w] += 1``). Its *column* was added to every other row of Y as
``P[:, w] Omega_old[w]`` and cannot be recovered from Y: that leftover stays, along a direction
no current word has. It is bounded by the retired word's (small: retirement needs a faded word)
co-occurrence mass and decays with the forgetting that retirement requires; ``word_mass`` of
the other words keeps that word's share too (the exact sums remove it).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .cooccurrence import RunningSums, group_entries_by_word
from ..text.documents import DocumentBatch
from .sketch_view import LowRankView

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_DOC_BLOCK = 512  # documents whose z vectors are in cache at once (512 x s float64)
#: The test matrix's numbers: Gaussians rounded to float32, a test matrix as good as any other
#: random one, held in half the memory (160 MB at V = 100,000, s = 400). Both phases of the
#: ingest kernel read a row of it per entry, and at V = 100,000 the rare words' rows come from
#: memory: 1.16 times as many documents/s on a 2-core AMD EPYC (`git show 8e056d1:BENCHMARKS.md`,
#: "V = 100,000, K = 100, NYT-shaped documents: ingest, refresh, peak RSS"). The products stay
#: float64. States saved before it say nothing of the dtype and keep float64, the matrix their Y
#: was summed with.
OMEGA_DTYPE = np.float32


def default_sketch_size(n_topics: int) -> int:
    """s, the sketch's columns: ``max(200, 4 K)`` (BENCHMARKS.md, "Large vocabularies")."""
    return max(200, 4 * int(n_topics))


def default_sketch_rank(n_topics: int, sketch_size: int) -> int:
    """r, the rank of the view: ``max(K + 20, s / 4)`` (at most s - 1). The least-squares core
    needs r well below s: on synthetic streams r = s / 4 beat r = s / 2."""
    return min(int(sketch_size) - 1, max(int(n_topics) + 20, int(sketch_size) // 4))


@njit(cache=True, inline="always")
def _splitmix(x):
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True, parallel=True)
def _test_rows(seed, words, generations, width, out):
    """``out[i]`` = the Gaussian test row of word ``words[i]`` (Box-Muller on a counter-based
    hash of seed, word, generation and column): the same numbers on every machine, in any order."""
    for i in prange(words.size):
        w = np.uint64(words[i])
        key = _splitmix(_splitmix(np.uint64(seed) ^ (w * _MIX1)) ^ (np.uint64(generations[i]) * _MIX2))
        for j in range(0, width, 2):
            a = _splitmix(key + np.uint64(j))
            b = _splitmix(key ^ (np.uint64(j + 1) * _GOLDEN))
            u1 = (np.float64(a >> np.uint64(11)) + 1.0) * (1.0 / 9007199254740992.0)  # (0, 1]
            u2 = np.float64(b >> np.uint64(11)) * (1.0 / 9007199254740992.0)
            radius = np.sqrt(-2.0 * np.log(u1))
            out[i, j] = radius * np.cos(2.0 * np.pi * u2)
            if j + 1 < width:
                out[i, j + 1] = radius * np.sin(2.0 * np.pi * u2)


def gaussian_rows(seed: int, n_words: int, width: int, generations=None, words=None, dtype=np.float64) -> np.ndarray:
    """Rows ``words`` (default all) of the V x ``width`` Gaussian test matrix, its numbers
    rounded to ``dtype``."""
    words = np.arange(n_words, dtype=np.int64) if words is None else np.asarray(words, dtype=np.int64)
    generations = (np.zeros(words.size, np.int64) if generations is None
                   else np.asarray(generations, dtype=np.int64)[words])
    out = np.empty((words.size, int(width)), dtype=dtype)
    _test_rows(np.int64(seed), words, generations, int(width), out)
    return out


@njit(cache=True, nogil=True, parallel=True)
def _sketch_batch(y, omega, diagonal, linear, word_mass, indptr, indices, counts, order, group_starts, n_chunks, weights):
    """Add ``weights[d] P_d Omega`` of the batch's documents to ``y``, their exact diagonal of
    Q to ``diagonal`` and their row sums to ``word_mass``. ``z_d`` is computed per document (its
    own order of entries: the same whatever the batching), scaled by ``weights[d] / (n (n - 1))``;
    then each word's row takes ``H_d[w] z_d`` from the batch's documents in document order."""
    n_docs = indptr.size - 1
    width = omega.shape[1]
    z = np.zeros((n_docs, width))
    doc_length = np.zeros(n_docs)
    entry_doc = np.empty(indices.size, np.int64)
    for d in prange(n_docs):
        n = 0.0
        for e in range(indptr[d], indptr[d + 1]):
            entry_doc[e] = d
            n += counts[e]
        doc_length[d] = n
        if n < 2.0:
            continue
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            c = counts[e]
            for j in range(width):
                z[d, j] += c * omega[w, j]
        f = weights[d] / (n * (n - 1.0))
        for j in range(width):
            z[d, j] *= f
    n_groups = group_starts.size - 1
    for chunk in prange(n_chunks):
        for g in range(chunk, n_groups, n_chunks):
            w = np.int64(indices[order[group_starts[g]]])
            for t in range(group_starts[g], group_starts[g + 1]):
                e = order[t]
                d = entry_doc[e]
                n = doc_length[d]
                if n < 2.0:
                    continue
                c = counts[e]
                word_mass[w] += weights[d] * c / n
                diagonal[w] += weights[d] * c * (c - 1.0) / (n * (n - 1.0))
                linear[w] += weights[d] * c / (n * (n - 1.0))
                for j in range(width):
                    y[w, j] += c * z[d, j]


class SketchedCooccurrence(RunningSums):
    """Linear sketch ``Y = P Omega`` of the co-occurrence sums plus their exact O(V) parts, behind
    the interface of :class:`~streamtopics.statistics.cooccurrence.CooccurrenceStats` (see the module
    docstring). ``sketch_size`` s columns, ``rank`` r kept by the view (below s; default s / 4),
    ``seed`` of Omega.

    Examples
    --------
    >>> stats = SketchedCooccurrence(3, sketch_size=4, rank=3)
    >>> batch = DocumentBatch(np.array([0, 2]), np.array([0, 2], np.int32),
    ...                       np.array([1.0, 2.0]), np.array([7], np.uint64))
    >>> stats.update(batch)
    >>> stats.view().rows([2]).round(3).tolist()
    [[0.333, 0.0, 0.333]]
    """

    kind = "sketch"

    def __init__(self, n_words: int, sketch_size: int = 300, rank: int | None = None, seed: int = 0,
                 half_life: float | None = None, half_life_unit: str = "documents"):
        self.n_words = int(n_words)
        self.sketch_size = int(sketch_size)
        if self.sketch_size < 2:
            raise ValueError("sketch_size must be at least 2")
        # r < s: the view's least-squares core has s equations per r unknowns (r = s / 4 by default)
        self.rank = max(1, self.sketch_size // 4) if rank is None else max(1, min(int(rank), self.sketch_size - 1))
        self.seed = int(seed)
        self.omega_dtype = np.dtype(OMEGA_DTYPE)
        self.generations = np.zeros(self.n_words, np.int64)  # a slot's test row changes when its word does
        self.sketch = np.zeros((self.n_words, self.sketch_size))
        self.diagonal = np.zeros(self.n_words)  # exact diagonal of Q_sum
        self.linear = np.zeros(self.n_words)  # c: P = Q_sum + diag(c)
        self._omega: np.ndarray | None = None
        self._view: LowRankView | None = None  # the last view, while nothing changed since
        self._start_per_word_sums(half_life, half_life_unit)

    # ------------------------------------------------------------------ the test matrix
    @property
    def omega(self) -> np.ndarray:
        """The V x s test matrix, generated on first use and kept (not saved)."""
        if self._omega is None or self._omega.shape[0] != self.n_words:
            self._omega = self._test_rows()
        return self._omega

    def _test_rows(self, words=None) -> np.ndarray:
        """Rows ``words`` (default all) of the test matrix, in its dtype."""
        return gaussian_rows(self.seed, self.n_words, self.sketch_size, self.generations, words, self.omega_dtype)

    # ------------------------------------------------------------------ forgetting (RunningSums)
    def _arrays(self):
        return (self.sketch, self.diagonal, self.linear, self.word_mass, self.word_counts, self.document_frequency)

    def _rescale(self, factor: float) -> None:
        self._view = None
        super()._rescale(factor)

    # ------------------------------------------------------------------ documents in
    def _accumulate(self, batch: DocumentBatch, weights: np.ndarray) -> None:
        self._view = None
        omega = self.omega
        n_chunks = max(64, 4 * numba.get_num_threads())
        for start in range(0, len(batch), _DOC_BLOCK):
            part = batch if len(batch) <= _DOC_BLOCK else batch.select(np.arange(start, min(start + _DOC_BLOCK, len(batch))))
            order, group_starts = group_entries_by_word(part.indices, self.n_words)
            _sketch_batch(self.sketch, omega, self.diagonal, self.linear, self.word_mass, part.indptr, part.indices,
                          part.counts, order, group_starts, n_chunks,
                          np.ascontiguousarray(weights[start:start + len(part)], dtype=np.float64))

    def merge(self, other: "SketchedCooccurrence") -> "SketchedCooccurrence":
        """Add another sketch of a disjoint sub-stream: same words, seed, size and test rows."""
        if not isinstance(other, SketchedCooccurrence):
            raise ValueError("cannot merge exact co-occurrence sums into a sketch (cooccurrence='exact' vs 'sketch')")
        if other.n_words != self.n_words:
            raise ValueError(f"cannot merge statistics over {other.n_words} words into {self.n_words}")
        if (other.seed, other.sketch_size, other.omega_dtype) != (self.seed, self.sketch_size, self.omega_dtype):
            raise ValueError(f"cannot merge sketches with different test matrices (seed, sketch_size, dtype): "
                             f"{(other.seed, other.sketch_size, str(other.omega_dtype))} into "
                             f"{(self.seed, self.sketch_size, str(self.omega_dtype))}")
        if not np.array_equal(other.generations, self.generations):
            raise ValueError("cannot merge sketches whose vocabulary slots were reassigned differently")
        if self.half_life != other.half_life or (self.decay and self.decay.unit) != (other.decay and other.decay.unit):
            raise ValueError("cannot merge statistics with different forgetting (half_life)")
        self._view = None
        if self.half_life is not None:
            self.decay.settle_for_merge(other.decay, self._rescale, other._rescale)
            self._weight_sum += other._weight_sum
        for mine, theirs in zip(self._arrays(), other._arrays()):
            mine += theirs
        self.n_docs += other.n_docs
        return self

    def grow(self, n_words: int) -> None:
        """Zero rows for new words at the end (and their test rows): O(V s)."""
        if n_words < self.n_words:
            raise ValueError("the statistics can only grow")
        extra = int(n_words) - self.n_words
        if extra == 0:
            return
        self._view = None
        self.sketch = np.vstack([self.sketch, np.zeros((extra, self.sketch_size))])
        self.generations = np.concatenate([self.generations, np.zeros(extra, np.int64)])
        for name in ("diagonal", "linear", "word_mass", "word_counts"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra)]))
        self.document_frequency = np.concatenate(
            [self.document_frequency, np.zeros(extra, self.document_frequency.dtype)])
        if self._omega is not None:
            self._omega = np.vstack([self._omega, self._test_rows(np.arange(self.n_words, n_words))])
        self.n_words = int(n_words)

    def clear_word(self, word: int) -> None:
        """Forget word ``word`` (its slot goes to a new word): its row of Y and its exact numbers
        become zero and the slot gets a new test row. Its column's share in the other rows of Y
        and in their ``word_mass`` stays (see the module docstring: not recoverable from Y)."""
        word = int(word)
        self._view = None
        self.sketch[word] = 0.0
        self.diagonal[word] = self.linear[word] = self.word_mass[word] = self.word_counts[word] = 0.0
        self.document_frequency[word] = 0
        self.generations[word] += 1
        if self._omega is not None:
            self._omega[word] = self._test_rows([word])[0]

    # ------------------------------------------------------------------ readers
    def view(self) -> "LowRankView":
        """The low-rank view the refresh reads (settled first with forgetting). The factorisation
        is computed lazily, on the view's first row or product, so that a background refresh
        does it in its own thread."""
        self.settle()
        if self._view is None:
            n_docs = self.n_docs if self.half_life is None else self._weight_sum
            # Q Omega = P Omega - diag(c) Omega, in one V x s array (each costs 0.2-0.5 s of page faults
            # at V = 100,000, s = 400)
            sketch_q = np.multiply(self.linear[:, None], self.omega)
            np.subtract(self.sketch, sketch_q, out=sketch_q)
            self._view = LowRankView(sketch_q, self.omega, self.diagonal, self.word_mass, self.word_counts,
                                     self.document_frequency, n_docs, self.rank)
        return self._view

    def copy(self) -> "SketchedCooccurrence":
        """An independent copy (a consistent state that a background refresh reads while
        ingestion goes on), with its cached test matrix copied too (``clear_word`` rewrites rows
        of the live one in place)."""
        out = SketchedCooccurrence.from_state_dict({k: np.array(v, copy=True) for k, v in self.state_dict().items()})
        if self._omega is not None:
            out._omega = self._omega.copy()
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the state (what is saved): Y and the O(V) vectors."""
        return sum(a.nbytes for a in (*self._arrays(), self.generations))

    @property
    def memory_bytes(self) -> int:
        """Bytes held while ingesting: the state plus the cached test matrix."""
        return self.nbytes + (0 if self._omega is None else self._omega.nbytes)

    def state_dict(self) -> dict:
        return {
            "kind": np.str_("sketch"),
            "sketch": self.sketch,
            "diagonal": self.diagonal,
            "linear": self.linear,
            "generations": self.generations,
            "sketch_seed": np.int64(self.seed),
            "sketch_rank": np.int64(self.rank),
            "sketch_omega_dtype": np.str_(self.omega_dtype.name),
            **self._per_word_state(),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> "SketchedCooccurrence":
        stats = cls.__new__(cls)
        stats.sketch = np.array(state["sketch"], dtype=np.float64)
        stats.n_words, stats.sketch_size = stats.sketch.shape
        stats.rank = int(state["sketch_rank"])
        stats.seed = int(state["sketch_seed"])
        # states saved before the test matrix was float32 have no dtype: their Y used float64
        stats.omega_dtype = np.dtype(str(state.get("sketch_omega_dtype", "float64")))
        if stats.omega_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"sketch state: test matrix dtype {stats.omega_dtype} is not float32 or float64")
        stats.generations = np.array(state["generations"], dtype=np.int64)
        stats.diagonal = np.array(state["diagonal"], dtype=np.float64)
        stats.linear = np.array(state["linear"], dtype=np.float64)
        stats._omega = None
        stats._view = None
        stats._load_per_word_state(state)
        for name in ("generations", "diagonal", "linear", "word_mass", "word_counts", "document_frequency"):
            if getattr(stats, name).shape != (stats.n_words,):
                raise ValueError(f"sketch state: {name} does not match the vocabulary size")
        return stats
