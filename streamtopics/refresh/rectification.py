"""Rectification of the anchor candidates' co-occurrence block (Lee, Bindel & Mimno 2015).

Under the topic model the word co-occurrence matrix is ``A R A^T``: positive semi-definite of
rank K, non-negative, its entries summing to one. The empirical sums are none of these: sampling
noise gives them full rank and negative eigenvalues, and the extreme rows FastAnchorWords looks
for are then partly noise. On streams drawn from Gibbs-fitted topics the anchor set flipped
between refreshes of a stationary stream (the matched L1 jumping 0.20 -> 0.41 -> 0.20 and topics
dying and being born again); after rectification the same stream kept its anchors and its L1.

Rectification alternates projections onto the three sets (their intersection holds the true
matrix): the best rank-K PSD approximation, the affine set of matrices summing to one, the
non-negative orthant. Here it works on the candidates' block only (the words anchors are chosen
from, at most a few thousand), and the rank-K part comes from a few steps of subspace iteration
started from the previous step's subspace, so a step costs a few products of the block with a
K-column matrix instead of an eigendecomposition.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..statistics.cooccurrence import CooccurrenceStats

OVERSAMPLING = 10  # extra subspace columns: the K-th eigenvector converges as fast as the rest
FIRST_POWER_STEPS = 6  # subspace iteration steps from the random start
POWER_STEPS = 2  # steps per later projection, warm from the previous one
SINGLE = True  # the block's products and projections in float32 (rectify): 1.8 times as fast, the same anchors.
# Keep the small solves on numpy's LAPACK: scipy.linalg.solve_triangular here (scipy's own OpenBLAS and its thread pool
# next to numpy's) doubled the anchors phase of the warm refresh on 2 cores and made later phases 2-3 times slower
# under load (`git show 8e056d1:BENCHMARKS.md`, "A faster warm refresh")

#: The rectified rows tell directions apart down to this share of the longest row's length (their float32 products
#: leave about 1e-6 of it as rounding; FastAnchorWords' ``resolution``). A block with fewer than K positive
#: eigenvalues among those kept spans fewer directions: Zipf-shaped topics without anchor words at V = 15,000, K = 100
#: kept about 70, and the picks after them, along rounding, named one word for several topics (70-96 distinct anchors
#: of 100) and left a singular Gram matrix that failed every word's warm start (the solve 3 s instead of 0.3).
RESOLUTION = 1e-5


def candidate_block(view, candidates: np.ndarray, chunk: int = 512) -> np.ndarray:
    """The co-occurrence sums among ``candidates`` (a square block, symmetric).

    From the packed streaming sums (:class:`~streamtopics.statistics.cooccurrence.CooccurrenceStats`) the
    block is read straight out of the upper triangle: each candidate's cells with the candidates
    after it lie in its own contiguous run of the packing, and the cells before it are the mirror
    image. Gathering full rows instead reads the lower half of every row one packed row apart
    (a cache miss per cell): 0.33 s against 0.03 s for 2,000 candidates at V = 15,000 (the same
    numbers, bit for bit). A view that serves blocks itself (the large-vocabulary mode's
    :class:`~streamtopics.statistics.sketch.LowRankView`: from its factors, without V-wide rows) gives it;
    other views (dense matrices) give a chunk of full rows at a time, so that at most ``chunk``
    rows of V exist at once."""
    candidates = np.asarray(candidates, dtype=np.int64)
    if hasattr(view, "block"):
        return np.asarray(view.block(candidates), dtype=np.float64)
    packed = getattr(view, "packed", None)
    if isinstance(view, CooccurrenceStats) and packed is not None and candidates.size:
        order = np.argsort(candidates, kind="stable")
        block = _packed_block(packed, view.n_words, candidates[order])
        if np.any(order != np.arange(order.size)):
            inverse = np.empty_like(order)
            inverse[order] = np.arange(order.size)
            block = block[np.ix_(inverse, inverse)]
        return block
    return np.vstack([view.rows(candidates[s : s + chunk])[:, candidates]
                      for s in range(0, candidates.size, chunk)])


@njit(cache=True, nogil=True, parallel=True)
def _packed_block(packed, n_words, ids):
    """``Q[ids][:, ids]`` from the packed upper triangle, ``ids`` ascending: row r's cells from
    column r on are read from word ids[r]'s run of the packing and mirrored (each thread writes
    its row r and column r below the diagonal; no two threads write the same cell)."""
    m = ids.size
    out = np.empty((m, m))
    for r in prange(m):
        i = ids[r]
        start = i * n_words - (i * (i - 1)) // 2 - i  # cell (i, j >= i) is packed[start + j]
        for c in range(r, m):
            value = packed[start + ids[c]]
            out[r, c] = value
            out[c, r] = value
    return out


def rectify(block: np.ndarray, rank: int, iterations: int, seed: int = 0, single: bool | None = None) -> np.ndarray:
    """``iterations`` rounds of alternating projection of ``block`` (scaled to sum to one) onto
    the rank-``rank`` PSD, sum-one and non-negative matrices; returns the last iterate
    (non-negative, summing to one up to the last clip). ``single`` (default :data:`SINGLE`): the
    products with the block and the block's projections in float32 (the scaling, the small
    orthonormalisations and eigenproblems stay float64), returned as float64.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> topics = rng.dirichlet(np.full(30, 0.1), 3).T          # 30 words, 3 topics
    >>> clean = topics @ np.diag([0.5, 0.3, 0.2]) @ topics.T
    >>> noisy = clean + rng.normal(0, 2e-4, clean.shape)
    >>> noisy = (noisy + noisy.T) / 2
    >>> fixed = rectify(noisy, 3, 20)
    >>> bool(fixed.min() >= 0) and round(float(fixed.sum()), 3) == 1.0
    True
    >>> bool(np.abs(fixed - clean).sum() < np.abs(noisy / noisy.sum() - clean).sum())
    True
    """
    matrix = np.array(block, dtype=np.float64)
    matrix = (matrix + matrix.T) / 2
    total = matrix.sum()
    if iterations <= 0 or total <= 0:
        return matrix
    matrix /= total
    single = SINGLE if single is None else single
    dtype = np.float32 if single else np.float64
    matrix = matrix.astype(dtype, copy=False)
    n = matrix.shape[0]
    rank = min(rank, n)
    width = min(n, rank + OVERSAMPLING)
    basis = _orthonormal(np.random.default_rng(seed).standard_normal((n, width))).astype(dtype)
    for step in range(iterations):
        for _ in range(FIRST_POWER_STEPS if step == 0 else POWER_STEPS):
            basis = _orthonormal((matrix @ basis).astype(np.float64)).astype(dtype)
        values, vectors = np.linalg.eigh((basis.T @ matrix @ basis).astype(np.float64))  # Rayleigh-Ritz, ascending
        order = np.argsort(values)[::-1]
        basis = basis @ vectors[:, order].astype(dtype)
        top, values = basis[:, :rank], np.maximum(values[order[:rank]], 0.0).astype(dtype)
        matrix = (top * values) @ top.T                       # rank-K PSD
        matrix += dtype((1.0 - matrix.sum(dtype=np.float64)) / (n * n))  # entries sum to one
        np.maximum(matrix, 0.0, out=matrix)                   # non-negative
    return matrix.astype(np.float64, copy=False)


def _orthonormal(columns: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the columns' span: Cholesky QR twice (two products and two small
    factorisations, several times faster than Householder QR for a tall, thin matrix), or
    Householder QR when the columns are too close to dependent for it. The triangular factor is
    inverted (it is small) and applied as one matrix product: LAPACK's solve with the 2,000 rows
    as right-hand sides took three times as long (19 against 6 ms at 2,000 x 110, one thread),
    40 % of a V = 15,000, K = 100 rectification."""
    try:
        for _ in range(2):
            factor = np.linalg.cholesky(columns.T @ columns)
            columns = columns @ np.linalg.inv(factor).T
        return columns
    except np.linalg.LinAlgError:
        return np.linalg.qr(columns)[0]


def rectified_rows(view, candidates: np.ndarray, rank: int, iterations: int, seed: int = 0) -> np.ndarray:
    """The candidates' rows of their rectified block, each scaled to sum to one (the conditional
    distributions FastAnchorWords compares); a row left all zero stays zero."""
    matrix = rectify(candidate_block(view, candidates), rank, iterations, seed)
    sums = matrix.sum(axis=1, keepdims=True)
    return matrix / np.where(sums > 0, sums, 1.0)


RETRY_GROWTH = 2.0  # after a fallback, the rectification is tried again once the documents seen have grown this much
RETRY_REFRESHES = 8  # or once this many refreshes have skipped it: a long stream (a window, forgetting) may drift


class RectificationSchedule:
    """Whether a refresh's anchor search rectifies the candidates' block, from how the last try went.

    A rectified block that keeps fewer than K directions sends the search to the raw rows after the
    rectification has been paid for: on Zipf-shaped topics without anchor words (V = 15,000, K =
    100, ``benchmarks/default_costs.py``) it did so at every refresh, 0.7 s of a 3.8 s warm refresh
    (the rectification and a FastAnchorWords pass). The shortfall is the topics' shape, not a young
    stream's noise, so after a refresh whose every rectified search fell back the searches go to the
    raw rows directly until the documents seen have grown :data:`RETRY_GROWTH`-fold or
    :data:`RETRY_REFRESHES` refreshes have skipped it; one that rectifies clears the memory. Where
    rectification works (real text, Gibbs-fitted truths) every refresh rectifies, as before. Part
    of the refresh state (checkpoint and lineage), so resumed and scaled-out runs search as the
    sequential one.

    Examples
    --------
    >>> schedule = RectificationSchedule()
    >>> schedule.steps(5, 10_000)
    5
    >>> schedule.record(10_000, tried=True, fell_back=True)
    >>> schedule.steps(5, 15_000), schedule.steps(5, 20_000)
    (0, 5)
    >>> for _ in range(RETRY_REFRESHES):
    ...     schedule.record(15_000, tried=False, fell_back=False)
    >>> schedule.steps(5, 15_000)
    5
    """

    def __init__(self):
        self.fell_back_at: int | None = None
        self.skipped = 0

    def steps(self, configured: int, n_docs: int) -> int:
        """The rectification steps this refresh: ``configured`` (``anchor_rectification``), or 0
        while a fallback is remembered and neither retry is due."""
        if (self.fell_back_at is not None and n_docs < RETRY_GROWTH * self.fell_back_at
                and self.skipped < RETRY_REFRESHES):
            return 0
        return configured

    def record(self, n_docs: int, tried: bool, fell_back: bool) -> None:
        """How the refresh at ``n_docs`` documents went: not ``tried`` (skipped), or tried and every
        rectified search ``fell_back``, or not."""
        if not tried:
            if self.fell_back_at is not None:
                self.skipped += 1
        else:
            self.fell_back_at, self.skipped = (int(n_docs) if fell_back else None), 0

    def state(self) -> dict:
        """The memory, for the checkpoint."""
        return {"fell_back_at": self.fell_back_at, "skipped": self.skipped}

    def load_state(self, state: dict | None) -> None:
        """Take up what :meth:`state` wrote (None: a checkpoint from before the schedule, which always rectified)."""
        at = None if state is None else state["fell_back_at"]
        self.fell_back_at = None if at is None else int(at)
        self.skipped = 0 if state is None else int(state.get("skipped", 0))
