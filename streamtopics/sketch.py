"""Sketched co-occurrence statistics for large vocabularies (issue 17, item 1).

The exact sums (:class:`~streamtopics.cooccurrence.CooccurrenceStats`) take V(V+1)/2 float64:
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
At refresh, ``Q_sum`` (indefinite: sampling noise and the ``-diag`` term) is approximated from
its sketch ``Y_Q = Q_sum Omega`` by the single-pass method for symmetric matrices: ``B`` = the
top r left singular vectors of ``Y_Q``, the r x r core ``C`` solving ``C (B^T Omega) = B^T Y_Q``
in least squares, ``C = W diag(lambda) W^T``, ``U = B W``. :class:`LowRankView` serves the
reading interface of the refresh (``rows``, ``matmul``, ``word_mass``, ...) from ``U``,
``lambda``: off-diagonal entries from ``U diag(lambda) U^T``, diagonal entries exact. A row costs
O(V r), ``matmul`` of a V x k matrix O(V r k). (A Nystrom approximation of the PSD ``P``, Tropp
et al. 2017 Algorithm 3, was tried first: P's large diagonal ``c`` is full rank and leaked into
the off-diagonal entries, doubling the topics' L1 error on synthetic streams; BENCHMARKS.md, "Tried
and not adopted".)

Retiring a word (open vocabulary) zeroes its row of Y and its exact numbers, and gives its slot a
new test row (``generation[w] += 1``). Its *column* was added to every other row of Y as
``P[:, w] Omega_old[w]`` and cannot be recovered from Y: that leftover stays, along a direction
no current word has. It is bounded by the retired word's (small: retirement needs a faded word)
co-occurrence mass and decays with the forgetting that retirement requires; ``word_mass`` of
the other words keeps that word's share too (the exact sums remove it).
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba import njit, prange

from .cooccurrence import RunningSums, group_entries_by_word
from .documents import DocumentBatch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_DOC_BLOCK = 512  # documents whose z vectors are in cache at once (512 x s float64)
#: Make the view's rows sum to the exact ``word_mass`` (LowRankView._row_sum_terms). Off: on the
#: 42k-word Gibbs-truth streams (two seeds, s = 200 and 400) it raised the matched L1 on average
#: (0.390 without, 0.413 with; BENCHMARKS.md, "Tried and not adopted"); the rows' sums are within a
#: few per cent of the mass without it.
ROW_SUMS = False
#: The test matrix's numbers: Gaussians rounded to float32, a test matrix as good as any other
#: random one, held in half the memory (160 MB at V = 100,000, s = 400). Both phases of the
#: ingest kernel read a row of it per entry, and at V = 100,000 the rare words' rows come from
#: memory: 1.16 times as many documents/s on a 2-core AMD EPYC (`git show 8e056d1:BENCHMARKS.md`,
#: "V = 100,000, K = 100, NYT-shaped documents: ingest, refresh, peak RSS"). The products stay
#: float64. States saved before it say nothing of the dtype and keep float64, the matrix their Y
#: was summed with.
OMEGA_DTYPE = np.float32
_CROSS_ROWS = 16384  # rows of a float32 Omega cast to float64 at once when the view is factorised


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
    the interface of :class:`~streamtopics.cooccurrence.CooccurrenceStats` (see the module
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


def low_rank(sketch: np.ndarray, omega: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``U`` (V x r, orthonormal columns) and ``lambda`` (r, signed, largest magnitude first)
    with ``U diag(lambda) U^T`` a rank-r approximation of a symmetric (possibly indefinite)
    matrix A from its single-pass sketch ``Y = A Omega`` (Halko, Martinsson & Tropp 2011,
    section 5.5): ``B`` = the top r left singular vectors of Y (a basis of A's dominant range),
    the core ``C`` solving ``C (B^T Omega) = B^T Y`` in least squares (r < s equations per
    column, so the solve is well conditioned), symmetrised, and its eigendecomposition
    ``C = W diag(lambda) W^T``; ``U = B W``.

    Y's SVD goes through its s x s Gram matrix: two V x s x s products and one V x s x r, no
    V x s factorisation; squaring Y loses only the singular values below ~1e-8 of the largest,
    far below the kept rank's."""
    norm = float(np.linalg.norm(sketch))
    if norm == 0.0:
        return np.zeros((sketch.shape[0], 0)), np.zeros(0)
    gram = sketch.T @ sketch
    cross = np.zeros((sketch.shape[1], omega.shape[1]))  # Y^T Omega, float64, in row chunks:
    for start in range(0, sketch.shape[0], _CROSS_ROWS):  # no V x s float64 copy of a float32 Omega
        rows = slice(start, start + _CROSS_ROWS)
        cross += sketch[rows].T @ omega[rows].astype(np.float64, copy=False)
    values, vectors = np.linalg.eigh((gram + gram.T) / 2)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    rank = min(int(rank), int(np.count_nonzero(values > values[0] * 1e-12)))
    singular = np.sqrt(values[:rank])
    right = vectors[:, :rank]
    # B = Y right / singular;  B^T Y = singular right^T;  B^T Omega = (right / singular)^T Y^T Omega
    b_y = singular[:, None] * right.T
    b_omega = (right / singular).T @ cross
    core = np.linalg.lstsq(b_omega.T, b_y.T, rcond=None)[0].T  # C b_omega = b_y
    core = (core + core.T) / 2
    eigenvalues, rotation = np.linalg.eigh(core)
    order = np.argsort(-np.abs(eigenvalues), kind="stable")
    eigenvalues, rotation = eigenvalues[order], rotation[:, order]
    basis = sketch @ ((right / singular) @ rotation)
    return basis, eigenvalues


class LowRankView:
    """The reading interface of the refresh over a sketch: off-diagonal entries of ``Q_sum`` from
    its low-rank approximation ``U diag(lambda) U^T``, the diagonal exact. Factorised on first
    use (:func:`low_rank`); shallow copies (``copy.copy``, as the model's active view makes)
    share the factorisation."""

    def __init__(self, sketch, omega, diagonal, word_mass, word_counts, document_frequency, n_docs, rank):
        self.diagonal = diagonal
        self.word_mass, self.word_counts = word_mass, word_counts
        self.document_frequency = document_frequency
        self.n_docs = n_docs
        self.n_words = sketch.shape[0]
        self.rank = rank
        self.half_life, self.decay = None, None
        self._shared = {"sketch": sketch, "omega": omega, "factors": None, "lock": threading.Lock()}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_shared"] = {k: v for k, v in self._shared.items() if k != "lock"}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._shared["lock"] = threading.Lock()

    def factors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``U``, ``lambda`` and the diagonal correction ``diag(Q_sum) - diag(U lambda U^T)``."""
        shared = self._shared
        with shared["lock"]:
            if shared["factors"] is None:
                basis, values = low_rank(shared["sketch"], shared["omega"], self.rank)
                low_rank_diagonal = np.einsum("ij,ij,j->i", basis, basis, values)
                correction = self.diagonal - low_rank_diagonal
                shared["factors"] = (basis, values, correction)
                shared["row_sums"] = self._row_sum_terms(basis, values, correction) if ROW_SUMS else None
                shared["sketch"] = shared["omega"] = None  # the view needs the factors only
            return shared["factors"]

    def _row_sum_terms(self, basis, values, correction):
        """The symmetric correction ``e p^T + p e^T - (1^T e) p p^T`` off the diagonal, which
        makes every row sum equal ``word_mass`` (known exactly: ``Q_sum 1 = word_mass``) up to
        the correction's own diagonal (``2 e_i p_i - (1^T e) p_i^2``, left out so that the
        diagonal stays exact: 0.3% of the most frequent word's mass, far less for the others):
        ``e`` is the row sums' shortfall, ``p`` the unigram distribution. A word's missing mass is
        spread over its partners in proportion to their frequency (the co-occurrence of an
        uninformative word) instead of leaving its normalised row off the simplex."""
        mass = np.asarray(self.word_mass, dtype=np.float64)
        sums = basis @ (values * basis.sum(axis=0)) + correction
        shortfall = mass - sums
        total = mass.sum()
        unigram = mass / total if total > 0 else np.zeros_like(mass)
        total_shortfall = float(shortfall.sum())
        return shortfall, unigram, total_shortfall, 2.0 * shortfall * unigram - total_shortfall * unigram ** 2

    def _add_row_sum_terms(self, out, ids, columns) -> None:
        terms = self._shared.get("row_sums")
        if terms is None:
            return
        shortfall, unigram, total, diagonal = terms
        p_rows = unigram[ids][:, None]
        if columns is None:
            out += shortfall[ids][:, None] * unigram[None, :] + p_rows * (shortfall - total * unigram)[None, :]
            out[np.arange(ids.size), ids] -= diagonal[ids]
        else:
            out += shortfall[ids][:, None] * unigram[columns][None, :] + p_rows * (
                shortfall[columns] - total * unigram[columns])[None, :]
            out[np.arange(ids.size), np.arange(ids.size)] -= diagonal[ids]

    def rows(self, ids) -> np.ndarray:
        """Full rows of the approximated ``Q_sum`` (len(ids) x V): O(len(ids) V r)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        basis, values, correction = self.factors()
        out = (basis[ids] * values) @ basis.T
        out[np.arange(ids.size), ids] += correction[ids]
        self._add_row_sum_terms(out, ids, None)
        return out

    def block(self, ids) -> np.ndarray:
        """``Q_sum[ids][:, ids]`` without the full rows: O(len(ids)^2 r) instead of
        O(len(ids) V r): the rectification's candidate block (2,000 candidates at V = 100,000
        through full rows cost 4 products of 512 x r x V, 1.8 s; this 0.02 s)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        basis, values, correction = self.factors()
        part = basis[ids]
        out = (part * values) @ part.T
        out[np.arange(ids.size), np.arange(ids.size)] += correction[ids]
        self._add_row_sum_terms(out, ids, ids)
        return out

    def matmul(self, right: np.ndarray, single: bool = False) -> np.ndarray:
        """``Q_sum @ right`` through the factors: O(V r k) in float64 (``single`` is accepted for
        the interface; the low-rank products are cheap enough without it)."""
        basis, values, correction = self.factors()
        right = np.asarray(right, dtype=np.float64)
        out = basis @ (values[:, None] * (basis.T @ right))
        out += correction[:, None] * right
        terms = self._shared.get("row_sums")
        if terms is not None:
            shortfall, unigram, total, diagonal = terms
            p_right = unigram @ right
            out += shortfall[:, None] * p_right[None, :] + unigram[:, None] * (shortfall @ right - total * p_right)[None, :]
            out -= diagonal[:, None] * right
        return out

    def to_dense(self) -> np.ndarray:
        return self.rows(np.arange(self.n_words))

    @property
    def nbytes(self) -> int:
        factors = self._shared["factors"]
        return 0 if factors is None else sum(a.nbytes for a in factors)
