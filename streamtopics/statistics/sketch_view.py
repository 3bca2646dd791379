"""The low-rank view a refresh reads over sketched co-occurrence sums (:mod:`~streamtopics.statistics.sketch`).

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
"""

from __future__ import annotations

import threading

import numpy as np

#: Make the view's rows sum to the exact ``word_mass`` (LowRankView._row_sum_terms). Off: on the
#: 42k-word Gibbs-truth streams (two seeds, s = 200 and 400) it raised the matched L1 on average
#: (0.390 without, 0.413 with; BENCHMARKS.md, "Tried and not adopted"); the rows' sums are within a
#: few per cent of the mass without it.
ROW_SUMS = False
_CROSS_ROWS = 16384  # rows of a float32 Omega cast to float64 at once when the view is factorised


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

    def projected_rows(self, ids, projection) -> np.ndarray:
        """``rows(ids) @ projection`` (``projection``: V x k, dense or scipy sparse) without the
        full rows: ``U[ids] diag(lambda) (U^T projection)`` and the diagonal's (and row sums')
        corrections, O(nnz(projection) r + len(ids) r k) instead of O(len(ids) V r). The anchor
        search's raw candidate rows at V = 100,000 (2,000 candidates, a sparse projection to
        1,000 dimensions) through full rows took 4 products of 512 x r x V."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        basis, values, correction = self.factors()
        reduced = _dense(projection.T @ basis).T  # r x k
        at_ids = _dense(projection[ids])  # each row's own diagonal cell, projected
        out = (basis[ids] * values) @ reduced
        out += correction[ids][:, None] * at_ids
        terms = self._shared.get("row_sums")
        if terms is not None:
            shortfall, unigram, total, diagonal = terms
            out += (shortfall[ids][:, None] * _dense(projection.T @ unigram)[None, :]
                    + unigram[ids][:, None] * _dense(projection.T @ (shortfall - total * unigram))[None, :])
            out -= diagonal[ids][:, None] * at_ids
        return out

    def normalised_projected_rows(self, ids, projection) -> np.ndarray:
        """The Qbar rows of ``ids`` (divided by their masses; a word of no mass keeps its zero row)
        times ``projection``: :meth:`projected_rows`, then divided (the anchor search's raw rows)."""
        mass = self.word_mass[ids]
        rows = self.projected_rows(ids, projection)
        rows /= np.where(mass > 0, mass, 1.0)[:, None]
        return rows

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


def _dense(product) -> np.ndarray:
    """A product with a scipy sparse matrix as a float64 ndarray."""
    return np.asarray(product.toarray() if hasattr(product, "toarray") else product, dtype=np.float64)
