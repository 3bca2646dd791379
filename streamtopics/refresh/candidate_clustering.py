"""Clustering of the trackers' candidate words into one anchor group per topic.

Ding et al.'s novel-word clustering (section 4.3 of the ICML paper, 4.2 of the arXiv version):
candidates whose row-normalised co-occurrence rows are nearly equal belong to the same topic.
:func:`rp_anchor_groups` chains the tracker's candidates, their rows and this clustering into
the ``rp`` anchor selector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from ..statistics.trackers import RandomProjectionTracker

__all__ = ["cluster_candidates", "default_cluster_threshold", "group_separation", "rp_anchor_groups"]

def _sq_distances(rows: np.ndarray) -> np.ndarray:
    C = rows @ rows.T
    diag = np.diag(C).copy()
    D = diag[:, None] - 2.0 * C + diag[None, :]
    D = 0.5 * (D + D.T)
    np.maximum(D, 0.0, out=D)
    np.fill_diagonal(D, 0.0)
    return D


def _single_linkage_heights(D: np.ndarray) -> np.ndarray:
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    return np.sort(linkage(squareform(D, checks=False), method="single")[:, 2])


def default_cluster_threshold(rows, n_clusters: int) -> float:
    """Default linking threshold of :func:`cluster_candidates`: d / 2, Ding et al.'s rule.

    Ding et al. link two novel words when D_ij < d / 2, d a lower bound on the distance between
    novel words of different topics (same-topic distances tend to 0, cross-topic ones stay
    above d).  d is not known; it is estimated as the smallest distance between two of the
    n_clusters single-linkage clusters (the height of the merge that would leave n_clusters - 1
    groups).  So the components at d / 2 are exactly n_clusters iff the candidates fall into
    n_clusters groups with a factor-2 gap between the largest within-group link and the
    smallest between-group distance; otherwise there are more components and
    :func:`cluster_candidates` falls back to average linkage.  Returns 0.0 when there are no more
    candidates than clusters and inf for a single cluster.  The rule is scale-free (invariant
    to scaling or randomly projecting the rows) and needs no noise model.  A fixed fraction of
    the squared row norms does not work: on synthetic corpora whose topics share most words
    the cross-topic distances are 0.5-20% of the median squared norm (measured).
    """
    rows = np.asarray(rows, dtype=np.float64)
    c = rows.shape[0]
    n_clusters = int(n_clusters)
    if n_clusters <= 1:
        return float("inf")
    if c <= n_clusters:
        return 0.0
    h = _single_linkage_heights(_sq_distances(rows))
    return 0.5 * float(h[c - n_clusters])


def group_separation(rows, n_clusters: int) -> float:
    """How well the rows fall into ``n_clusters`` groups: the least squared distance between two
    of the ``n_clusters`` single-linkage groups over the largest link inside one (the heights of
    the merge that would leave ``n_clusters - 1`` groups and of the last merge before it). Rows
    with no group structure give about 1 (a topic model's candidates on real text 1.00-1.03, on
    Gibbs-truth streams up to 1.08); Ding et al.'s clean separation is 2 or more (then
    :func:`default_cluster_threshold` links exactly ``n_clusters`` components). 0 when there are
    no more rows than groups, or one group."""
    rows = np.asarray(rows, dtype=np.float64)
    c, n_clusters = rows.shape[0], int(n_clusters)
    if n_clusters <= 1 or c <= n_clusters:
        return 0.0
    heights = _single_linkage_heights(_sq_distances(rows))
    inside = float(heights[c - n_clusters - 1])
    return float(heights[c - n_clusters]) / inside if inside > 0 else float("inf")


def _relabel_first_seen(labels: np.ndarray) -> np.ndarray:
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inv].astype(np.int64)


def cluster_candidates(rows, n_clusters: int, threshold: float | None = None) -> np.ndarray:
    """Cluster candidate words whose (row-normalised co-occurrence) rows are nearly equal.

    rows: (c, D) array, one row per candidate (possibly randomly projected).  With
    C = rows @ rows.T and D_ij = C_ii - 2 C_ij + C_jj (squared Euclidean distance), pairs with
    D_ij < threshold are linked and the connected components are the clusters (Ding et al.).
    threshold defaults to :func:`default_cluster_threshold` (Ding's d / 2 with d estimated from
    the data; pass a number to override).
    If the number of components differs from n_clusters, falls back to average-linkage
    agglomerative clustering on D cut into exactly n_clusters groups.

    Returns int64 labels in 0..n_clusters-1, numbered in order of first appearance; every label
    is used when c >= n_clusters.  When c < n_clusters each candidate is its own cluster
    (labels 0..c-1).
    """
    from scipy.cluster.hierarchy import cut_tree, linkage
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import squareform

    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError("rows must be a 2-d array (candidates x dimensions)")
    c = rows.shape[0]
    n_clusters = int(n_clusters)
    if n_clusters < 1:
        raise ValueError("n_clusters must be >= 1")
    if c == 0:
        return np.empty(0, dtype=np.int64)
    if c <= n_clusters:
        return np.arange(c, dtype=np.int64)
    if n_clusters == 1:
        return np.zeros(c, dtype=np.int64)
    if not np.all(np.isfinite(rows)):
        raise ValueError("rows must be finite")
    D = _sq_distances(rows)
    if threshold is None:
        threshold = 0.5 * float(_single_linkage_heights(D)[c - n_clusters])
    adj = csr_matrix(D < float(threshold))
    n_comp, labels = connected_components(adj, directed=False)
    if n_comp != n_clusters:
        Z = linkage(squareform(D, checks=False), method="average")
        labels = cut_tree(Z, n_clusters=n_clusters).reshape(-1)
    return _relabel_first_seen(np.asarray(labels))


def rp_anchor_groups(
    tracker: RandomProjectionTracker,
    min_support,
    n_topics: int,
    get_rows: Callable[[np.ndarray], np.ndarray],
    *,
    threshold: float | None = None,
    weighting: str = "snr",
    min_separation: float = 0.0,
) -> list[np.ndarray]:
    """The ``rp`` anchor selector: candidates -> rows -> clusters -> one word group per topic.

    ``get_rows(candidate_ids)`` (supplied by the model) returns the candidates' row-normalised
    co-occurrence rows (c x D, possibly randomly projected).  Returns a list of n_topics int64
    arrays (fewer, min(n_topics, c), when there are fewer candidates than topics: the caller
    must then complete the anchor set another way, e.g. with FastAnchorWords), each holding the
    member words of a group, the strongest vertex first: most directions won (see
    ``candidates(return_wins=True)``), then most frequent (largest S_i), then smaller id.  A
    group can hold a mixed word that got in by noise (it won one or two directions), which is why
    frequency alone is not the ordering.  Groups are ordered by their first member's wins, then
    frequency.  The model then uses either the representative (first) word's row or the group's
    averaged row as the anchor row; the average is the more noise-resilient choice (Ding et
    al.), best taken over the members close to the representative (a stray mixed word would
    pull it towards the interior of the hull). With ``min_separation`` > 0: no groups (``[]``)
    unless the candidates' :func:`group_separation` reaches it.
    """
    cand, wins = tracker.candidates(min_support, weighting=weighting, return_wins=True)
    if cand.size == 0:
        return []
    rows = np.asarray(get_rows(cand), dtype=np.float64)
    if rows.shape[0] != cand.size:
        raise ValueError(f"get_rows returned {rows.shape[0]} rows for {cand.size} candidates")
    if min_separation > 0 and group_separation(rows, n_topics) < min_separation:
        return []
    labels = cluster_candidates(rows, n_topics, threshold=threshold)
    freq = tracker.S[cand]
    groups = []
    for lab in range(int(labels.max()) + 1):
        sel = labels == lab
        order = np.lexsort((cand[sel], -freq[sel], -wins[sel]))
        groups.append((int(wins[sel][order[0]]), cand[sel][order].astype(np.int64)))
    groups.sort(key=lambda wg: (-wg[0], -float(tracker.S[wg[1][0]]), int(wg[1][0])))
    return [g for _, g in groups]
