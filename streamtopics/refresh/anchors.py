"""Anchor-word selection: FastAnchorWords (Arora et al. 2013, Algorithm 4).

Anchors are the vertices of the convex hull of the row-normalised co-occurrence rows (Qbar). The
greedy search picks the row farthest from the origin, then repeatedly the row farthest from the
span of those picked so far (Gram-Schmidt), and a clean-up pass re-picks each anchor as the row
farthest from the span of the other K - 1.

Distances are tracked through coordinates in an orthonormal basis of the current span rather
than by deflating every row, so each greedy step and each clean-up step costs one pass over the
candidate rows (O(c D)) plus O(c K) bookkeeping.

Noise is the enemy: the Qbar row of a word seen in few documents is a noisy point far from the
hull, and farthest-point search loves such points. Only words with enough document frequency
are candidates; :func:`default_min_document_frequency` makes that threshold grow with the
stream.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse


FLOOR_FRACTION, FLOOR_CAP = 0.02, 500


def default_min_document_frequency(n_docs: int) -> int:
    """Candidate threshold in documents: ``max(5, min(sqrt(M), M / 20), min(0.02 M, 500))``.

    Growing like sqrt(M) lets rarer words (often the best anchors) qualify as the stream grows,
    while the absolute support of every candidate, and so the precision of its row, keeps rising.
    The second floor (2 % of the documents, at most 500) keeps the young stream's candidates to
    words seen often enough that their rows are not noise: on streams drawn from Gibbs-fitted
    topics it cut the matched L1 at 20k documents from 0.79 to 0.49 and changed nothing at 100k
    (commit c65a363's message; the Gibbs-truth streams: BENCHMARKS.md, "Topic quality against
    gensim, scikit-learn and tomotopy").
    """
    m = max(n_docs, 1)
    return int(max(5, min(np.sqrt(m), m / 20), min(FLOOR_FRACTION * m, FLOOR_CAP)))


def default_max_candidates(n_topics: int) -> int:
    """Candidate cap: the ``max(1000, 20 K)`` most frequent eligible words.

    The farthest-point search takes any extreme row, and among a few thousand words enough have
    odd co-occurrence rows (uuencoded junk, a name quoted in one thread) to take anchors from real
    topics; keeping the most frequent thousand (twenty per topic past 50 topics) leaves those
    out. On streams drawn from Gibbs-fitted topics (BENCHMARKS.md, "Topic quality against gensim,
    scikit-learn and tomotopy") it cut the matched L1 at 100k documents from 0.82 to 0.57 (20
    Newsgroups, K = 50) and from 0.59 to 0.44 (Reuters, K = 40) against a cap of 3,000; a fixed
    1,000 lost at K = 100 (0.20 -> 0.31), hence the 20 per topic.
    """
    return max(1000, 20 * int(n_topics))


def candidate_words(document_frequency: np.ndarray, min_df: int, max_candidates: int | None) -> np.ndarray:
    """Words with ``document_frequency >= min_df``, the ``max_candidates`` most frequent if
    there are more (ties by word id), returned sorted by id."""
    eligible = np.flatnonzero(document_frequency >= min_df)
    if max_candidates is not None and eligible.size > max_candidates:
        order = np.lexsort((eligible, -document_frequency[eligible]))
        eligible = np.sort(eligible[order[:max_candidates]])
    return eligible


def random_projection(n_features: int, dimension: int, seed: int) -> sparse.csr_array:
    """A very sparse random projection (Li, Hastie & Church 2006), n_features x dimension.

    Entries are ``+-sqrt(s / dimension)`` with probability ``1 / (2 s)`` each and 0 otherwise,
    ``s = sqrt(n_features)``: norms and inner products are kept in expectation as with a
    Gaussian matrix, at about ``1/s`` of the multiplications (projecting 3,000 candidate rows of
    15,000 words to 1,000 dimensions costs ~0.4 GFLOP instead of 90). Deterministic in
    (n_features, dimension, seed).
    """
    rng = np.random.default_rng([seed, n_features, dimension])
    s = np.sqrt(n_features)
    nnz = rng.binomial(n_features * dimension, 1.0 / s)
    cells = rng.choice(n_features * dimension, size=nnz, replace=False)
    values = np.where(rng.random(nnz) < 0.5, -1.0, 1.0) * np.sqrt(s / dimension)
    matrix = sparse.coo_array((values, (cells // dimension, cells % dimension)), shape=(n_features, dimension))
    return matrix.tocsr()


def _reflector(u: np.ndarray) -> np.ndarray:
    """An orthogonal (Householder) matrix whose last column is the unit vector ``u``: its other
    columns are an orthonormal basis of the complement of u."""
    v = u.copy()
    v[-1] -= 1.0 if u[-1] <= 0 else -1.0
    norm = v @ v
    reflector = np.eye(u.size) - (2.0 / norm) * np.outer(v, v) if norm > 1e-30 else np.eye(u.size)
    return reflector if u[-1] <= 0 else -reflector


def _orthonormal_complement(vectors: np.ndarray) -> np.ndarray:
    """A unit vector orthogonal to the rows of ``vectors`` ((K - 1) x K), from a complete QR."""
    q, _ = np.linalg.qr(vectors.T, mode="complete")
    return q[:, -1]


class DependentRowsError(ValueError):
    """The candidate rows span fewer dimensions than the anchors asked for."""


def fast_anchor_words(rows: np.ndarray, n_anchors: int, cleanup: bool = True, keep=None,
                      stickiness: float = 0.0, resolution: float = 0.0) -> np.ndarray:
    """Positions (into ``rows``) of ``n_anchors`` extreme rows.

    Parameters
    ----------
    rows
        Candidate points, one per row (c x D): row-normalised co-occurrence rows, possibly
        randomly projected.
    n_anchors
        K, the number of anchors.
    cleanup
        Run the re-selection pass of Algorithm 4 (each anchor replaced by the point farthest from
        the span of the other K - 1).
    keep, stickiness
        Positions of the previous refresh's anchors (sticky anchors): the greedy pass starts
        from them, and the re-selection pass replaces one only by a point at least
        ``1 + stickiness`` times as far from the span of the other anchors. A topic whose
        anchor is still (nearly) extreme keeps it, so its identity holds across refreshes; a new
        vertex that is clearly farther still displaces it. ``stickiness=0`` with ``keep`` finds
        the same kind of local optimum as without.
    resolution
        Rows nearer the span of the picks than this share of the longest row's length are in it:
        their distance is the rows' own rounding (float32 products: about 1e-6). When every row
        is, :class:`DependentRowsError`; picking on would follow rounding, with a basis no longer
        orthogonal, and the re-selection pass then named one row for several anchors.

    Examples
    --------
    >>> import numpy as np
    >>> vertices = np.eye(3)
    >>> mixtures = np.array([[.5, .5, 0], [.2, .3, .5], [0, .6, .4]])
    >>> sorted(fast_anchor_words(np.vstack([mixtures, vertices]), 3).tolist())
    [3, 4, 5]
    """
    rows = np.asarray(rows, dtype=np.float64)
    n_points = rows.shape[0]
    if n_anchors > n_points:
        raise ValueError(f"{n_anchors} anchors requested from only {n_points} candidate words")
    squared_norms = np.einsum("ij,ij->i", rows, rows)
    basis = np.zeros((n_anchors, rows.shape[1]))
    coords = np.zeros((n_points, n_anchors))  # coordinates of every row in `basis`
    residual = squared_norms.copy()  # squared distance of every row from span(basis)
    anchors = np.empty(n_anchors, np.int64)
    sticky = [] if keep is None else [int(p) for p in dict.fromkeys(np.asarray(keep, np.int64).tolist())]
    floor = resolution**2 * float(squared_norms.max(initial=0.0))  # a squared residual at most this is in the span
    for k in range(n_anchors):
        pick = int(np.argmax(residual))
        if residual[pick] <= floor:
            raise DependentRowsError(f"only {k} linearly independent candidate rows; cannot pick {n_anchors} anchors")
        while sticky:  # a previous anchor first, unless it lies in the span already
            first = sticky.pop(0)
            if residual[first] > max(1e-6 * residual[pick], floor):
                pick = first
                break
        anchors[k] = pick
        direction = rows[pick] - coords[pick, :k] @ basis[:k]
        norm = np.linalg.norm(direction)
        if norm <= 1e-12 * max(1.0, np.sqrt(squared_norms[pick])):
            raise DependentRowsError(f"only {k} linearly independent candidate rows; cannot pick {n_anchors} anchors")
        basis[k] = direction / norm
        coords[:, k] = rows @ basis[k]
        residual = np.maximum(residual - coords[:, k] ** 2, 0.0)
    if not cleanup:
        return anchors
    previous = set() if keep is None else set(np.asarray(keep, np.int64).tolist())
    margin = (1.0 + stickiness) ** 2  # on squared distances
    for k in range(n_anchors):
        others = np.delete(np.arange(n_anchors), k)
        # Within span(basis), the span of the other anchors misses one direction u; a row's squared
        # distance from span(others) is its residual plus its squared coordinate along u.
        u = _orthonormal_complement(coords[anchors[others]]) if n_anchors > 1 else np.ones(1)
        along_u = coords @ u
        distance = residual + along_u**2
        pick = int(np.argmax(distance))
        if pick == anchors[k] or (anchors[k] in previous and distance[pick] <= margin * distance[anchors[k]]):
            continue
        anchors[k] = pick
        # New basis: span(others) (K - 1 directions rotated out of the old basis) + the new point.
        keep = _reflector(u)[:, : n_anchors - 1]
        old_basis = basis
        kept_basis = keep.T @ old_basis
        kept_coords = coords @ keep
        direction = rows[pick] - kept_coords[pick] @ kept_basis
        norm = np.linalg.norm(direction)
        new_direction = direction / norm
        basis = np.vstack([kept_basis, new_direction])
        coords = np.column_stack([kept_coords, rows @ new_direction])
        residual = np.maximum(squared_norms - np.einsum("ij,ij->i", coords, coords), 0.0)
    return anchors
