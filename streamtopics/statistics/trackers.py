"""Random-projection extreme-point trackers (Ding et al. 2013, RP novel-word detection).

docs/design.md, "Anchor words" (random-projection trackers).  Let X be the V x M matrix whose
column d is H_d / n_d.  Ding et al. find the novel (anchor) words as the extreme points of the
rows of X row-normalised (Xtilde_i = X_i / sum(X_i)): projected on a random direction g in R^M,
the maximum and the minimum are attained at novel words.  In a stream the direction grows one
coordinate per document, so the tracker keeps for every word i

    S_i = sum_d H_d[i] / n_d              (shape V)
    P_i = sum_d (H_d[i] / n_d) * g_d      (shape V x P, g_d ~ N(0, I_P))

and the projections of the normalised rows are P_i / S_i; plus two scalars per word (T_i, U_i,
see :class:`RandomProjectionTracker`) that measure how much of a row is sampling noise.  Cost
per document: O(u_d * P) for u_d distinct words.  g_d comes from
:func:`~streamtopics.statistics.directions.document_directions` (a pure function of seed and document key),
so the sums stay exact and mergeable across replays, resumes and consumers.  The candidates are
clustered into anchor groups by :mod:`streamtopics.refresh.candidate_clustering`.

Public API
----------
``RandomProjectionTracker(n_words, n_projections, seed, half_life=None)``  running sums; update /
    subtract (sliding window) / merge / grow / clear_word (open vocabulary) / state_dict /
    from_state_dict / nbytes / candidates / projections / signal_fraction / signal_z /
    pooled_signal_z.  With ``half_life`` the sums forget exponentially, lazily, with the same
    clock as the co-occurrence sums (:class:`~streamtopics.statistics.forgetting.DecayClock`).
``n_projections_for_topics(K)``                      P for ~0.95 anchor recall with K topics

Deviation from the paper, measured (``benchmarks/tracker_recall.py``): ranking by the plain
projection P_i / S_i finds almost no anchors on synthetic separable corpora with 100-token
documents -- the sampling noise of a word's row does not average out as documents accumulate
(noise and signal both shrink like 1/M), so the extremes are the noisiest words.
``candidates`` therefore ranks by a noise-shrunk projection by default ("snr"); "raw" gives the
paper's ranking.  The support mask must be a relative threshold (document frequency >= a
fraction of the documents seen), for the same reason.
"""

from __future__ import annotations

import numba
import numpy as np

from .directions import document_directions
from .forgetting import MAX_EXPONENT, DecayClock
from .tracker_kernels import accumulate, balanced_chunks, group_by_word

__all__ = ["DEFAULT_N_PROJECTIONS", "RandomProjectionTracker", "n_projections_for_topics"]

#: Default number of random directions P.  Chosen from ``benchmarks/tracker_recall.py``; see the
#: docstring of :class:`RandomProjectionTracker` for the measured table.
DEFAULT_N_PROJECTIONS = 512

# Format version of state_dict(); bump when the layout changes.
_STATE_VERSION = 3  # 3: the noise sums of signal_z; 2: weight_sq and the decay clock (1 had neither: read as exact
# sums)

# Documents per internal block in update(): bounds the temporary (block x P) direction matrix.
# Splitting a batch into blocks does not change any sum (per-word summation is in stream order).
_DOC_BLOCK = 2048

# Projections pooled_signal_z compares words in: any P of the Gaussian directions are themselves a random projection,
# and the nearest neighbours need far fewer than the extremes do (swimmer seeds 0-23: 128 finds what all 512 find).
NEIGHBOUR_DIMENSIONS = 128


def n_projections_for_topics(n_topics: int) -> int:
    """P for >= ~0.95 anchor recall with n_topics topics: the power of two >= 10 K, in [64, 4096].

    From the measurements in the :class:`RandomProjectionTracker` docstring (recall >= 0.95
    at P ~ 10 K for K = 20, 50, 100).
    """
    want = 10 * max(1, int(n_topics))
    return int(min(4096, max(64, 1 << (want - 1).bit_length())))


class RandomProjectionTracker:
    """Running sums of Ding et al.'s random-projection novel-word detector, per word i:

        S_i = sum_d H_d[i] / n_d                              (V)
        P_i = sum_d (H_d[i] / n_d) g_d                         (V x P)
        T_i = sum_d (H_d[i] / n_d)^2                           (V)
        U_i = sum_{d: n_d >= 2} H_d[i] (H_d[i] - 1) / (n_d (n_d - 1))   (V)

    ``update`` adds a CSR batch in O(sum_d u_d * P); ``candidates`` returns, for every direction,
    the words with the largest and the smallest projection of their normalised row.  Memory is
    V * (P + 3) float64, whatever the number of documents (property 5).  Sums are bit-identical
    whatever the batch split and the thread count (each word's sums are accumulated in stream
    order), equal up to float rounding whatever the document order (property 1), mergeable by
    addition (property 3) and round-trip exactly through ``state_dict`` (property 4).

    Signal-to-noise weighting (default of ``candidates``).  The projection z_i = P_i / S_i of a
    word's normalised row is signal + sampling noise.  With ~100-token documents the noise of an
    ordinary word (variance ~ 1 / its occurrences) exceeds the spread of the anchors' signal
    (~ 1 / M), and both shrink like 1 / M, so the plain argmax/argmin of Ding et al. ("raw")
    returns the noisiest words, not the anchors, however many documents are seen (recall
    0.00-0.22 in the table below).  T_i gives the squared norm of the word's row, U_i an
    unbiased estimate of its noise-free part (the diagonal correction of Q, applied per word),
    so f_i (:meth:`signal_fraction`) is the share of the variance of the centred projection
    z_i - center that is signal, and f_i (z_i - center) its least-squares estimate without
    noise.  Ranking by that ("snr") costs three scalars per word and finds the anchors.
    Shrinking towards the centre (the corpus-average row), not towards 0, keeps frequent,
    central words out of the candidates.  Rare words have noisy f_i: keep the support mask.

    Default P = 512 (``DEFAULT_N_PROJECTIONS``), measured with ``benchmarks/tracker_recall.py``
    (separable synthetic corpora, 100-token documents, Dirichlet(0.1) proportions, support =
    document frequency >= 0.5% of the documents; recall of the K true anchors among the
    candidates with the "snr" ranking, mean of 3 corpora; last column the "raw" ranking):

        model      V    K      M   P=32    64   128   256   512  1024 | raw@512
        ding    2000   20  20000   0.90  0.98  1.00  1.00  1.00  1.00 |  0.22
        zipf    2000   20  20000   0.92  1.00  1.00  1.00  1.00  1.00 |  0.00
        sparse  2000   20  20000   0.53  0.73  0.82  0.97  1.00  1.00 |  0.00
        ding    5000   50  40000   0.69  0.81  0.91  0.97  0.99  0.99 |  0.04
        zipf    5000   50  40000   0.64  0.80  0.91  0.95  0.99  0.99 |  0.00
        sparse  5000   50  40000   0.63  0.78  0.85  0.96  0.99  1.00 |  0.00
        zipf   10000  100  80000   0.44  0.61  0.76  0.83  0.90  0.95 |  0.00
        sparse 10000  100  80000   0.41  0.60  0.73  0.86  0.94  0.95 |  0.00

    ("ding": other words spread over all topics; "zipf": the same with a Zipf tail of rare
    words; "sparse": sparse topics, many near-anchors.)  The "snr" candidate set holds about K
    words (2-10 K with many near-anchors); "raw" returns hundreds of noisy words.  Recall >= 0.95
    needs P ~ 10 K: 512 covers K <= 50; pass ``n_projections_for_topics(K)`` for more topics.
    Cost of the default: V * 515 * 8 bytes (62 MB at V = 15,000), and the update runs at
    ~65,000 documents/s on 2 cores (~38,000 on one) for V = 15,000 and 200 distinct words per
    document -- an order of magnitude faster than the co-occurrence kernel.
    """

    def __init__(self, n_words: int, n_projections: int = DEFAULT_N_PROJECTIONS, seed: int = 0,
                 half_life: float | None = None, half_life_unit: str = "documents"):
        n_words = int(n_words)
        n_projections = int(n_projections)
        if n_words < 0:
            raise ValueError("n_words must be >= 0")
        if n_projections < 1:
            raise ValueError("n_projections must be >= 1")
        self.seed = int(seed)
        self.n_projections = n_projections
        self.n_docs = 0  # documents with n_d > 0 absorbed (minus those removed by subtract)
        self.S = np.zeros(n_words, dtype=np.float64)
        self.T = np.zeros(n_words, dtype=np.float64)
        self.U = np.zeros(n_words, dtype=np.float64)
        self.P = np.zeros((n_words, n_projections), dtype=np.float64)
        self.weight_sq = 0.0  # sum_d w_d^2 over the documents counted (n_docs without forgetting)
        # (A, B) of signal_z: sum_d w_d^4 2 / (n_d - 1)^2 and sum_d w_d^4 4 n_d / (n_d - 1)^2 over the documents of
        # n_d >= 2 tokens; None for a state written before they were kept
        self.noise_sums: np.ndarray | None = np.zeros(2)
        self.decay = None if half_life is None else DecayClock(half_life, half_life_unit)

    _ARRAYS = ("S", "T", "U", "P")

    # -- basic properties ---------------------------------------------------------------------
    @property
    def n_words(self) -> int:
        return int(self.S.shape[0])

    @property
    def nbytes(self) -> int:
        return int(sum(getattr(self, a).nbytes for a in self._ARRAYS))

    def __repr__(self) -> str:
        return (
            f"RandomProjectionTracker(n_words={self.n_words}, n_projections={self.n_projections}, "
            f"seed={self.seed}, n_docs={self.n_docs})"
        )

    # -- ingestion ----------------------------------------------------------------------------
    def update(self, indptr, indices, counts, keys, stream_times=None) -> int:
        """Add a CSR batch of documents; returns the number of documents absorbed (n_d > 0).

        indptr int64 (B+1), indices int32 word ids (unique within a document), counts float64
        > 0 (token counts), keys uint64 (B) hashes of the documents' keys.  With forgetting, a
        document weighs ``2^(-(T - t_d) / half_life)`` in S and P (its square in T and U), t_d
        its arrival index or its ``stream_times`` entry (as in the co-occurrence sums).  Raises
        ValueError on malformed input (the ingestion layer filters bad documents before this
        point); nothing is added when it raises.  Releases the GIL inside the kernels.
        """
        indptr, indices, counts, keys = self._checked(indptr, indices, counts, keys)
        B = indptr.shape[0] - 1
        if B == 0:
            return 0
        weights = None
        if self.decay is not None:
            # the noise sums take the weights' fourth power: 2^(4 x 128) stays far from overflow
            weights = self.decay.weights(self.decay.times(B, stream_times), self._rescale, MAX_EXPONENT / 2)
        used = self._add(indptr, indices, counts, keys, weights, 1.0)
        self.n_docs += used
        return used

    def subtract(self, indptr, indices, counts, keys) -> int:
        """Remove documents added before (a sliding window's leaving documents; exact sums
        only): the same kernel with the entries negated.  Returns the documents removed."""
        if self.decay is not None:
            raise ValueError("a sliding window and forgetting do not combine")
        indptr, indices, counts, keys = self._checked(indptr, indices, counts, keys)
        if indptr.shape[0] == 1:
            return 0
        used = self._add(indptr, indices, counts, keys, None, -1.0)
        self.n_docs -= used
        return used

    def _checked(self, indptr, indices, counts, keys):
        indptr = np.ascontiguousarray(indptr, dtype=np.int64).reshape(-1)
        indices = np.ascontiguousarray(indices, dtype=np.int32).reshape(-1)
        counts = np.ascontiguousarray(counts, dtype=np.float64).reshape(-1)
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        B = indptr.shape[0] - 1
        if B < 0:
            raise ValueError("indptr must have at least one element")
        if keys.shape[0] != B:
            raise ValueError(f"keys has {keys.shape[0]} entries, expected {B}")
        if B == 0:
            return indptr, indices, counts, keys
        if indices.shape[0] != counts.shape[0]:
            raise ValueError("indices and counts differ in length")
        if np.any(np.diff(indptr) < 0) or indptr[0] < 0 or indptr[-1] > indices.shape[0]:
            raise ValueError("indptr must be non-decreasing and within indices")
        lo, hi = int(indptr[0]), int(indptr[-1])
        if hi > lo:
            iv = indices[lo:hi]
            if int(iv.min()) < 0 or int(iv.max()) >= self.n_words:
                raise ValueError(f"word id out of range [0, {self.n_words}); call grow() first")
            cv = counts[lo:hi]
            if not np.all(np.isfinite(cv)) or np.any(cv <= 0.0):
                raise ValueError("counts must be finite and > 0")
        return indptr, indices, counts, keys

    def _add(self, indptr, indices, counts, keys, weights, sign: float) -> int:
        """Run the kernel over a checked batch, block by block: entries times ``sign`` and the
        documents' ``weights`` (None: 1; T and U take the squares)."""
        used = 0
        n_chunks = max(1, 8 * numba.get_num_threads())
        B = indptr.shape[0] - 1
        for b0 in range(0, B, _DOC_BLOCK):
            b1 = min(B, b0 + _DOC_BLOCK)
            ip = indptr[b0 : b1 + 1]
            if ip[-1] == ip[0]:
                continue
            words, wstart, ent_doc, ent_w, ent_u, n_used = group_by_word(
                ip, indices, counts, self.n_words
            )
            if weights is not None:
                w = weights[b0:b1]
                ent_w *= w[ent_doc]
                ent_u *= (w * w)[ent_doc]
                self.weight_sq += float(np.sum((w * w)[np.diff(ip) > 0]))
            else:
                self.weight_sq += sign * int(n_used)
            if sign != 1.0:
                ent_w *= sign
                ent_u *= sign
            self._add_noise_sums(ip, counts, None if weights is None else weights[b0:b1], sign)
            G = document_directions(keys[b0:b1], self.n_projections, self.seed)
            bounds = balanced_chunks(wstart, min(n_chunks, max(1, words.shape[0])))
            accumulate(
                self.S, self.T, self.U, self.P, G, words, wstart, ent_doc, ent_w, ent_u, bounds, sign
            )
            used += int(n_used)
        return used

    def _add_noise_sums(self, ip, counts, weights, sign: float) -> None:
        """Add one block's documents (``weights``: theirs, None: 1) to :attr:`noise_sums`, one
        document after another in stream order (``np.add.accumulate`` is sequential), so that the
        sums do not depend on how the stream was split into batches."""
        if self.noise_sums is None:
            return
        tokens = np.concatenate(([0.0], np.cumsum(counts[ip[0] : ip[-1]])))
        n = tokens[ip[1:] - ip[0]] - tokens[ip[:-1] - ip[0]]
        kept = n >= 2.0
        n = n[kept]
        scale = np.full(n.size, sign) if weights is None else sign * weights[kept] ** 4
        for column, term in enumerate((2.0 / (n - 1.0) ** 2, 4.0 * n / (n - 1.0) ** 2)):
            terms = np.concatenate(([self.noise_sums[column]], scale * term))
            self.noise_sums[column] = np.add.accumulate(terms)[-1]

    def _rescale(self, factor: float) -> None:
        """Multiply the stored sums by the decay ``factor`` (its square for the squared sums)."""
        self.S *= factor
        self.P *= factor
        for a in ("T", "U"):
            getattr(self, a)[...] *= factor * factor
        self.weight_sq *= factor * factor
        if self.noise_sums is not None:
            self.noise_sums *= factor ** 4

    def clear_word(self, word: int) -> None:
        """Forget one word (an open vocabulary gives its slot to another word): zero sums."""
        for a in self._ARRAYS:
            getattr(self, a)[word] = 0.0

    def merge(self, other: "RandomProjectionTracker") -> "RandomProjectionTracker":
        """Add another tracker's sums (a disjoint sub-stream) into this one; returns self."""
        if not isinstance(other, RandomProjectionTracker):
            raise TypeError("can only merge a RandomProjectionTracker")
        if other.seed != self.seed:
            raise ValueError(f"seed differs ({self.seed} vs {other.seed})")
        if other.n_projections != self.n_projections:
            raise ValueError(
                f"n_projections differs ({self.n_projections} vs {other.n_projections})"
            )
        if other.n_words != self.n_words:
            raise ValueError(
                f"n_words differs ({self.n_words} vs {other.n_words}); grow() the smaller first"
            )
        if (self.decay is None) != (other.decay is None):
            raise ValueError("cannot merge a forgetting tracker with an exact one")
        if self.decay is not None:
            self.decay.settle_for_merge(other.decay, self._rescale, other._rescale)
        for a in self._ARRAYS:
            np.add(getattr(self, a), getattr(other, a), out=getattr(self, a))
        self.n_docs += other.n_docs
        self.weight_sq += other.weight_sq
        self.noise_sums = (None if self.noise_sums is None or other.noise_sums is None
                           else self.noise_sums + other.noise_sums)
        return self

    def grow(self, n_words: int) -> None:
        """Enlarge the vocabulary to n_words; new words start with zero sums."""
        n_words = int(n_words)
        if n_words < self.n_words:
            raise ValueError(f"cannot shrink from {self.n_words} to {n_words} words")
        if n_words == self.n_words:
            return
        for a in self._ARRAYS:
            old = getattr(self, a)
            new = np.zeros((n_words,) + old.shape[1:], dtype=np.float64)
            new[: old.shape[0]] = old
            setattr(self, a, new)

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Copy of the state: numpy arrays and ints only (for the checkpoint writer)."""
        d = {
            "version": _STATE_VERSION,
            "seed": self.seed,
            "n_projections": self.n_projections,
            "n_docs": self.n_docs,
            "weight_sq": np.array(self.weight_sq),
        }
        if self.noise_sums is not None:
            d["noise_sums"] = self.noise_sums.copy()
        if self.decay is not None:
            d.update({k: np.array(v) for k, v in self.decay.state_dict().items()})
        for a in self._ARRAYS:
            d[a] = getattr(self, a).copy()
        return d

    @classmethod
    def from_state_dict(cls, d: dict) -> "RandomProjectionTracker":
        """Inverse of :meth:`state_dict` (bit-exact)."""
        version = int(d.get("version", _STATE_VERSION))
        if version not in (1, 2, _STATE_VERSION):
            raise ValueError(f"unsupported tracker state version {version}")
        n_projections = int(d["n_projections"])
        t = cls(0, n_projections=n_projections, seed=int(d["seed"]))
        S = np.array(d["S"], dtype=np.float64, copy=True).reshape(-1)
        V = S.shape[0]
        for a in cls._ARRAYS:
            arr = np.ascontiguousarray(np.array(d[a], dtype=np.float64, copy=True))
            want = (V, n_projections) if a == "P" else (V,)
            if arr.shape != want:
                raise ValueError(f"{a} has shape {arr.shape}, expected {want}")
            setattr(t, a, arr)
        t.n_docs = int(d["n_docs"])
        t.weight_sq = float(d.get("weight_sq", t.n_docs))
        noise = d.get("noise_sums")  # absent before version 3: signal_z is then None for good
        t.noise_sums = None if noise is None else np.array(noise, dtype=np.float64, copy=True).reshape(2)
        if "half_life" in d:
            t.decay = DecayClock.from_state_dict(d)
        return t

    # -- readout ------------------------------------------------------------------------------
    def center(self) -> np.ndarray:
        """Projection of the corpus-average normalised row, sum_i P_i / sum_i S_i (P,).

        Every document column of X sums to 1, so the average row is uniform over the documents
        and this is the mean direction sum_d g_d / M.
        """
        tot = float(self.S.sum())
        if tot <= 0.0:
            return np.zeros(self.n_projections)
        return self.P.sum(axis=0) / tot

    def signal_fraction(self) -> np.ndarray:
        """f_i: estimated noise-free share of the variance of word i's centred projection (V).

        With M = sum_i S_i (documents) and the corpus-average row at 1/M per document,
        ||row_i - average||^2 = (T_i - S_i^2/M) / S_i^2 (observed) and (U_i - S_i^2/M) / S_i^2
        (its unbiased noise-free part), so f_i = clip((U_i - S_i^2/M) / (T_i - S_i^2/M), 0, 1).
        With forgetting the documents weigh w_d, the average row is proportional to w and
        S_i^2/M becomes S_i^2 sum_d w_d^2 / M^2 (M = sum_d w_d); every term scales alike, so the
        lazily scaled sums give the true f.
        """
        tot = float(self.S.sum())
        if tot <= 0.0:
            return np.zeros(self.n_words)
        s2 = self._average_part(tot)
        num = self.U - s2
        den = self.T - s2
        ok = den > 0.0
        f = np.zeros(self.n_words)
        f[ok] = num[ok] / den[ok]
        return np.clip(f, 0.0, 1.0)

    def _average_part(self, tot: float) -> np.ndarray:
        """S_i^2 / M, the share of T_i and U_i that the corpus-average row accounts for (with
        forgetting S_i^2 sum_d w_d^2 / M^2); ``tot`` is M = sum_i S_i."""
        return self.S * self.S / tot if self.decay is None else self.S * self.S * (self.weight_sq / (tot * tot))

    def signal_z(self) -> np.ndarray | None:
        """z_i: how many standard errors of sampling noise word i's row stands out from the
        corpus-average row (V); None for a tracker restored from a state without its noise sums.

        Were the row the average (the word spread over the documents as the corpus is), each
        count would be H_d ~ Poisson(n_d p_i), p_i = S_i / M, and the numerator of
        :meth:`signal_fraction`, U_i - S_i^2/M, would be 0 up to noise of variance
        ``sum_d w_d^4 (2 p^2 + 4 n_d p^3) / (n_d - 1)^2 = p^2 A + p^3 B`` (Var H(H-1) = 2 lam^2 + 4 lam^3
        for Poisson lam; A, B are :attr:`noise_sums`). z_i is that numerator over its noise: a row
        whose z is small could be the average row plus noise, however extreme its projections.
        """
        parts = self._signal_parts()
        if parts is None:
            return None
        numerator, variance = parts
        z = np.zeros(self.n_words)
        ok = variance > 0.0
        z[ok] = numerator[ok] / np.sqrt(variance[ok])
        return z

    def pooled_signal_z(self, allowed: np.ndarray, neighbours: int = 3, asked: np.ndarray | None = None
                        ) -> np.ndarray | None:
        """:meth:`signal_z` of each ``asked`` word (mask, V; default ``allowed``) pooled with its
        ``neighbours`` nearest ``allowed`` words: their numerators summed over the root of their
        summed noise variances (0 for the other words; None without noise sums).

        A topic's anchor words share one row (a swimmer limb's seven pixels), so their signals add
        while their noises add in quadrature: a topic none of whose words stands out alone still
        does together, and a rare word whose row is noise has noise for neighbours. The neighbours
        are the nearest in the noise-shrunk projections (:meth:`projections`, "snr"), where a
        noisy row lies near the average and a topic's words lie together. Cost: one asked-by-allowed
        distance matrix in :data:`NEIGHBOUR_DIMENSIONS` of the projections, 1,024 rows at a time.
        """
        parts = self._signal_parts()
        if parts is None:
            return None
        numerator, variance = parts
        allowed = np.asarray(allowed, dtype=bool).reshape(-1)
        asked = allowed if asked is None else np.asarray(asked, dtype=bool).reshape(-1)
        if allowed.shape[0] != self.n_words or asked.shape[0] != self.n_words:
            raise ValueError(f"allowed and asked need {self.n_words} entries")
        words = np.flatnonzero(allowed & (self.S > 0.0))
        queries = np.flatnonzero(asked & allowed & (self.S > 0.0))
        pooled = np.zeros(self.n_words)
        if queries.size == 0:
            return pooled
        rows = np.ascontiguousarray(self.projections(words, weighting="snr")[:, :NEIGHBOUR_DIMENSIONS])
        squared = np.einsum("ij,ij->i", rows, rows)
        at = np.searchsorted(words, queries)
        m = min(int(neighbours), words.size - 1)
        for start in range(0, queries.size, 1024):
            block = at[start:start + 1024]
            distance = squared[block, None] - 2.0 * (rows[block] @ rows.T) + squared[None, :]
            distance[np.arange(block.size), block] = -np.inf  # the word itself is always in its pool
            pool = words[np.argpartition(distance, m, axis=1)[:, : m + 1]]
            spread = variance[pool].sum(axis=1)
            pooled[queries[start:start + 1024]] = np.where(spread > 0.0, numerator[pool].sum(axis=1)
                                                           / np.sqrt(np.maximum(spread, 1e-300)), 0.0)
        return pooled

    def _signal_parts(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(U_i - S_i^2/M, its noise variance p^2 A + p^3 B) per word for :meth:`signal_z`; None
        without noise sums (both 0 before any document)."""
        if self.noise_sums is None:
            return None
        tot = float(self.S.sum())
        if tot <= 0.0:
            return np.zeros(self.n_words), np.zeros(self.n_words)
        p = self.S / tot
        return self.U - self._average_part(tot), p * p * self.noise_sums[0] + p * p * p * self.noise_sums[1]

    def projections(self, words=None, weighting: str = "snr") -> np.ndarray:
        """Projections of the normalised rows of the given words (all by default), (n, P).

        weighting "raw": z_i = P_i / S_i (Ding et al.); "snr": f_i (z_i - center), the
        least-squares estimate of the noise-free centred projection (see the class docstring).
        Rows with S_i == 0 are NaN.
        """
        if weighting not in ("raw", "snr"):
            raise ValueError("weighting must be 'raw' or 'snr'")
        if words is None:
            words = np.arange(self.n_words)
        words = np.asarray(words, dtype=np.int64)
        scale = self.S[words]
        pos = scale > 0.0
        inv = np.full(words.shape[0], np.nan)
        inv[pos] = 1.0 / scale[pos]
        z = self.P[words] * inv[:, None]
        if weighting == "snr":
            z -= self.center()[None, :]
            z *= self.signal_fraction()[words][:, None]
        return z

    def candidates(self, min_support=None, weighting: str = "snr", return_wins: bool = False):
        """Sorted unique word ids that attain the max or the min projection of some direction.

        min_support: boolean mask (V,) of the words allowed (e.g. document frequency >= a
        fraction of the documents seen); None allows every word seen.  Words with S_i == 0 are
        never candidates.  weighting: "snr" (default) or "raw", see :meth:`projections`; "snr"
        ranks as "raw" where no allowed word has a signal estimate (no document repeats a word).
        Returns at most 2 P ids (int64), an empty array if no word qualifies; with
        return_wins=True also, per candidate, in how many of the 2 P extremes it won (true
        vertices win many directions, words that got in by noise one or two).
        """
        if min_support is None:
            mask = self.S > 0.0
        else:
            mask = np.asarray(min_support, dtype=bool).reshape(-1)
            if mask.shape[0] != self.n_words:
                raise ValueError(
                    f"min_support has {mask.shape[0]} entries, expected {self.n_words}"
                )
            mask = mask & (self.S > 0.0)
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            empty = np.empty(0, dtype=np.int64)
            return (empty, empty.copy()) if return_wins else empty
        if weighting == "snr" and not np.any(self.signal_fraction()[idx] > 0.0):
            weighting = "raw"  # no word repeats in any document (sets of words): no noise estimate, every
            # shrunk projection would be 0; the rows are then exact, and Ding et al.'s own ranking holds
        proj = self.projections(idx, weighting=weighting)
        hits = np.concatenate([idx[np.argmax(proj, axis=0)], idx[np.argmin(proj, axis=0)]])
        ids, wins = np.unique(hits, return_counts=True)
        ids = ids.astype(np.int64)
        return (ids, wins.astype(np.int64)) if return_wins else ids
