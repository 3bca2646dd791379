"""Tests of the trackers, their directions and candidate clustering against numpy references."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from streamtopics.refresh.candidate_clustering import (
    cluster_candidates,
    default_cluster_threshold,
    group_separation,
    rp_anchor_groups,
)
from streamtopics.statistics.directions import document_directions
from streamtopics.statistics.trackers import (
    DEFAULT_N_PROJECTIONS,
    NEIGHBOUR_DIMENSIONS,
    RandomProjectionTracker,
    n_projections_for_topics,
)

# ----------------------------------------------------------------------------------------------
# helpers: random CSR batches, a small separable corpus, numpy references
# ----------------------------------------------------------------------------------------------


def random_batch(rng, B, V, max_len=30, empty_every=0):
    """CSR batch with sorted unique word ids and integer counts in 1..4."""
    indptr = [0]
    ind, cnt = [], []
    for d in range(B):
        L = 0 if (empty_every and d % empty_every == 0) else int(rng.integers(1, max_len))
        w = np.sort(rng.choice(V, size=min(L, V), replace=False))
        ind.append(w)
        cnt.append(rng.integers(1, 5, size=w.size).astype(np.float64))
        indptr.append(indptr[-1] + w.size)
    return (
        np.array(indptr, dtype=np.int64),
        np.concatenate(ind).astype(np.int32),
        np.concatenate(cnt),
    )


def sub_batch(indptr, indices, counts, docs):
    """CSR of the documents `docs` (in that order)."""
    ip = [0]
    ind, cnt = [], []
    for d in docs:
        a, b = indptr[d], indptr[d + 1]
        ind.append(indices[a:b])
        cnt.append(counts[a:b])
        ip.append(ip[-1] + b - a)
    return np.array(ip, dtype=np.int64), np.concatenate(ind), np.concatenate(cnt)


def dense(indptr, indices, counts, V):
    X = np.zeros((indptr.size - 1, V))
    for d in range(indptr.size - 1):
        X[d, indices[indptr[d] : indptr[d + 1]]] = counts[indptr[d] : indptr[d + 1]]
    return X


def reference_sums(indptr, indices, counts, keys, V, P, seed):
    """S, T, U, P by plain numpy: rows of H / n_d, times the directions."""
    H = dense(indptr, indices, counts, V)
    n = H.sum(1)
    keep = n > 0
    H, n, keys = H[keep], n[keep], keys[keep]
    Xn = H / n[:, None]
    G = document_directions(keys, P, seed)
    big = n >= 2
    Uc = np.zeros_like(H)
    Uc[big] = H[big] * (H[big] - 1.0) / (n[big] * (n[big] - 1.0))[:, None]
    return Xn.sum(0), (Xn**2).sum(0), Uc.sum(0), Xn.T @ G


def reference_noise_sums(indptr, indices, counts, V, weights=None):
    """(A, B) of signal_z by plain numpy: sum_d w_d^4 2 / (n_d - 1)^2 and sum_d w_d^4 4 n_d / (n_d - 1)^2
    over the documents of at least 2 tokens."""
    n = dense(indptr, indices, counts, V).sum(1)
    w4 = np.ones_like(n) if weights is None else weights ** 4
    big = n >= 2
    return np.array([(w4[big] * 2.0 / (n[big] - 1.0) ** 2).sum(), (w4[big] * 4.0 * n[big] / (n[big] - 1.0) ** 2).sum()])


def reference_signal_z(S, U, w2, noise):
    """z_i of signal_z from reference sums: (U_i - S_i^2 w2 / M^2) / sqrt(p^2 A + p^3 B), p = S_i / M."""
    M = S.sum()
    p = S / M
    return (U - S * S * w2 / M**2) / np.sqrt(p * p * noise[0] + p**3 * noise[1])


_M64 = (1 << 64) - 1


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def reference_direction(seed, key, P):
    """The generator's specification with libm log/cos/sin (independent implementation)."""
    c = _mix(key ^ _mix((seed & _M64) ^ 0x5851F42D4C957F2D))
    out = []
    for _ in range((P + 1) // 2):
        c = (c + 0x9E3779B97F4A7C15) & _M64
        x1 = _mix(c)
        c = (c + 0x9E3779B97F4A7C15) & _M64
        x2 = _mix(c)
        u1 = ((x1 >> 11) + 1) * 2.0**-53
        u2 = (x2 >> 11) * 2.0**-53
        r = math.sqrt(-2.0 * math.log(u1))
        out += [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    return np.array(out[:P])


def separable_corpus(seed, V=400, K=10, M=6000, n_tokens=100):
    """Separable model: topic k's anchor (mass 0.03-0.05) appears only in topic k; the other
    words' weights over topics are uniform on the simplex (Ding et al. 6.1); Dirichlet(0.1)
    proportions; multinomial documents.  Returns (A, anchors, indptr, indices, counts, keys)."""
    rng = np.random.default_rng(seed)
    anchors = rng.choice(V, size=K, replace=False)
    rest = np.setdiff1d(np.arange(V), anchors)
    Bm = rng.dirichlet(np.ones(K), size=rest.size)
    Bm /= Bm.sum(0)
    a = rng.uniform(0.03, 0.05, size=K)
    A = np.zeros((V, K))
    A[rest] = Bm * (1.0 - a)
    A[anchors, np.arange(K)] = a
    assert np.allclose(A.sum(0), 1.0)
    theta = rng.dirichlet(np.full(K, 0.1), size=M)
    # token topics, then token words, all vectorised
    ct = np.cumsum(theta, axis=1)
    z = (rng.random((M, n_tokens))[:, :, None] > ct[:, None, :]).sum(-1).clip(0, K - 1)
    cdf = np.cumsum(A, axis=0)
    w = np.empty_like(z)
    for k in range(K):
        sel = z == k
        w[sel] = np.searchsorted(cdf[:, k], rng.random(sel.sum()) * cdf[-1, k], side="right")
    w = np.minimum(w, V - 1)
    flat = (np.arange(M)[:, None] * V + w).ravel()
    code, counts = np.unique(flat, return_counts=True)  # sorted by doc, then word
    docs, words = np.divmod(code, V)
    indptr = np.zeros(M + 1, dtype=np.int64)
    np.cumsum(np.bincount(docs, minlength=M), out=indptr[1:])
    keys = rng.integers(0, 2**63, size=M, dtype=np.uint64)
    return A, anchors, indptr, words.astype(np.int32), counts.astype(np.float64), keys


def qbar_rows(indptr, indices, counts, V):
    """Row-normalised co-occurrence Qbar (docs/design.md, "Co-occurrence sums"), dense numpy."""
    H = dense(indptr, indices, counts, V)
    n = H.sum(1)
    H, n = H[n >= 2], n[n >= 2]
    Q = (H / (n * (n - 1))[:, None]).T @ H
    Q -= np.diag((H / (n * (n - 1))[:, None]).sum(0))
    return Q / np.maximum(Q.sum(1, keepdims=True), 1e-300)


@pytest.fixture(scope="module")
def corpus():
    return separable_corpus(3)


# ----------------------------------------------------------------------------------------------
# document_directions
# ----------------------------------------------------------------------------------------------


def test_directions_match_specification():
    keys = np.array([0, 1, 5, 123456789, 2**63 + 7, 2**64 - 1], dtype=np.uint64)
    G = document_directions(keys, 33, seed=11)
    for k, g in zip(keys, G):
        np.testing.assert_allclose(g, reference_direction(11, int(k), 33), rtol=0, atol=1e-13)
    # negative seeds are taken mod 2**64
    np.testing.assert_array_equal(
        document_directions(keys, 8, seed=-1), document_directions(keys, 8, seed=2**64 - 1)
    )


def test_directions_deterministic_whatever_batch():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**64 - 1, size=500, dtype=np.uint64)
    G = document_directions(keys, 16, seed=7)
    perm = rng.permutation(500)
    np.testing.assert_array_equal(document_directions(keys[perm], 16, seed=7), G[perm])
    np.testing.assert_array_equal(document_directions(keys[123:124], 16, seed=7), G[123:124])
    # a shorter direction is a prefix of a longer one
    np.testing.assert_array_equal(document_directions(keys, 5, seed=7), G[:, :5])
    # the seed matters
    assert not np.allclose(document_directions(keys, 16, seed=8), G)
    # equal keys, equal vectors; different keys, different vectors
    np.testing.assert_array_equal(G[0], document_directions(keys[[0, 0]], 16, seed=7)[1])
    assert np.abs(G[0] - G[1]).max() > 0.1


def test_directions_are_standard_normal():
    keys = np.arange(20000, dtype=np.uint64)  # consecutive keys: the worst case for a weak mixer
    G = document_directions(keys, 64, seed=0)
    assert G.shape == (20000, 64) and G.dtype == np.float64
    assert abs(G.mean()) < 0.005  # sd of the mean: 1/sqrt(1.28e6) ~ 0.0009
    assert abs(G.var() - 1.0) < 0.01
    assert abs((np.abs(G) > 2.0).mean() - 0.0455) < 0.002
    assert abs((G**4).mean() - 3.0) < 0.05
    # columns and neighbouring keys uncorrelated
    C = np.corrcoef(G, rowvar=False)
    assert np.abs(C - np.eye(64)).max() < 0.04  # sd ~ 0.007
    assert abs(np.corrcoef(G[:-1].ravel(), G[1:].ravel())[0, 1]) < 0.005
    # per-column means and variances
    assert np.abs(G.mean(0)).max() < 0.04
    assert np.abs(G.var(0) - 1.0).max() < 0.06


# ----------------------------------------------------------------------------------------------
# sums, order, merge, resume
# ----------------------------------------------------------------------------------------------


def test_sums_equal_numpy_reference():
    rng = np.random.default_rng(1)
    V, P, B = 120, 24, 300
    indptr, indices, counts = random_batch(rng, B, V, empty_every=37)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    tr = RandomProjectionTracker(V, n_projections=P, seed=5)
    used = tr.update(indptr, indices, counts, keys)
    assert used == tr.n_docs == B - len(range(0, B, 37))
    S, T, U, Pm = reference_sums(indptr, indices, counts, keys, V, P, 5)
    np.testing.assert_allclose(tr.S, S, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tr.T, T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tr.U, U, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tr.P, Pm, rtol=1e-10, atol=1e-12)
    assert tr.S.sum() == pytest.approx(tr.n_docs)
    noise = reference_noise_sums(indptr, indices, counts, V)
    np.testing.assert_allclose(tr.noise_sums, noise, rtol=1e-12)
    seen = S > 0
    np.testing.assert_allclose(tr.signal_z()[seen], reference_signal_z(S, U, tr.n_docs, noise)[seen], rtol=1e-9, atol=1e-9)
    # the sums are not trivially zero
    assert np.abs(tr.P).max() > 1.0


def test_pooled_signal_z_equals_numpy_reference():
    # each allowed word's noise pooled with its 3 nearest allowed words in the first
    # NEIGHBOUR_DIMENSIONS snr projections, against reference sums, a brute-force neighbour search and a plain loop
    rng = np.random.default_rng(4)
    V, P, B = 90, NEIGHBOUR_DIMENSIONS + 20, 400
    indptr, indices, counts = random_batch(rng, B, V, empty_every=53)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    tr = RandomProjectionTracker(V, n_projections=P, seed=3)
    tr.update(indptr, indices, counts, keys)
    S, T, U, Pm = reference_sums(indptr, indices, counts, keys, V, P, 3)
    noise = reference_noise_sums(indptr, indices, counts, V)
    M, n = S.sum(), tr.n_docs
    p = S / M
    numerator, variance = U - S * S * n / M**2, p * p * noise[0] + p**3 * noise[1]
    f = np.clip(numerator / (T - S * S * n / M**2), 0.0, 1.0)
    allowed = (S > 0) & (np.arange(V) % 5 != 0)
    words = np.flatnonzero(allowed)
    rows = (f[words, None] * (Pm[words] / S[words, None] - Pm.sum(0) / M))[:, :NEIGHBOUR_DIMENSIONS]
    expected = np.zeros(V)
    for a, word in enumerate(words):
        distance = ((rows - rows[a]) ** 2).sum(axis=1)
        distance[a] = -1.0
        pool = words[np.argsort(distance)[:4]]
        expected[word] = numerator[pool].sum() / np.sqrt(variance[pool].sum())
    np.testing.assert_allclose(tr.pooled_signal_z(allowed, neighbours=3), expected, rtol=1e-9, atol=1e-9)
    # asked for some words only: theirs, their neighbours still among all allowed; 0 for the rest
    asked = allowed & (np.arange(V) % 3 == 0)
    np.testing.assert_allclose(tr.pooled_signal_z(allowed, 3, asked), np.where(asked, expected, 0.0), rtol=1e-9, atol=1e-9)
    # one word alone pools nothing: its own z
    single = np.zeros(V, bool)
    single[words[0]] = True
    np.testing.assert_allclose(tr.pooled_signal_z(single)[words[0]], tr.signal_z()[words[0]], rtol=1e-12)
    assert np.count_nonzero(tr.pooled_signal_z(single)) == 1


def test_batch_split_is_bit_identical_and_order_only_rounds():
    rng = np.random.default_rng(2)
    V, P, B = 200, 16, 400
    indptr, indices, counts = random_batch(rng, B, V)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    whole = RandomProjectionTracker(V, P, seed=1)
    whole.update(indptr, indices, counts, keys)
    # same order, different batch sizes: bit-identical
    for bs in (1, 7, 64, 399):
        tr = RandomProjectionTracker(V, P, seed=1)
        for b0 in range(0, B, bs):
            docs = np.arange(b0, min(B, b0 + bs))
            tr.update(*sub_batch(indptr, indices, counts, docs), keys[docs])
        for a in ("S", "T", "U", "P", "noise_sums"):
            np.testing.assert_array_equal(getattr(tr, a), getattr(whole, a))
    # shuffled order, uneven batches: equal to float rounding
    perm = rng.permutation(B)
    tr = RandomProjectionTracker(V, P, seed=1)
    cuts = [0, 3, 100, 101, 250, B]
    for a, b in zip(cuts[:-1], cuts[1:]):
        docs = perm[a:b]
        tr.update(*sub_batch(indptr, indices, counts, docs), keys[docs])
    for a in ("S", "T", "U", "P", "noise_sums"):
        np.testing.assert_allclose(getattr(tr, a), getattr(whole, a), rtol=1e-12, atol=1e-13)


def test_thread_count_does_not_change_bits():
    rng = np.random.default_rng(3)
    V, P, B = 500, 40, 600
    indptr, indices, counts = random_batch(rng, B, V, max_len=80)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    n0 = numba.get_num_threads()
    out = []
    try:
        for nt in sorted({1, n0}):
            numba.set_num_threads(nt)
            tr = RandomProjectionTracker(V, P, seed=2)
            tr.update(indptr, indices, counts, keys)
            out.append(tr)
    finally:
        numba.set_num_threads(n0)
    for a in ("S", "T", "U", "P"):
        np.testing.assert_array_equal(getattr(out[0], a), getattr(out[-1], a))


def test_merge_of_split_stream_equals_whole():
    rng = np.random.default_rng(4)
    V, P, B = 150, 12, 300
    indptr, indices, counts = random_batch(rng, B, V)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    whole = RandomProjectionTracker(V, P, seed=9)
    whole.update(indptr, indices, counts, keys)
    part = rng.random(B) < 0.4
    a = RandomProjectionTracker(V, P, seed=9)
    b = RandomProjectionTracker(V, P, seed=9)
    for tr, sel in ((a, np.flatnonzero(part)), (b, np.flatnonzero(~part))):
        tr.update(*sub_batch(indptr, indices, counts, sel), keys[sel])
    assert a.merge(b) is a
    assert a.n_docs == whole.n_docs == B
    for name in ("S", "T", "U", "P", "noise_sums"):
        np.testing.assert_allclose(getattr(a, name), getattr(whole, name), rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError):
        a.merge(RandomProjectionTracker(V, P, seed=10))
    with pytest.raises(ValueError):
        a.merge(RandomProjectionTracker(V, P + 1, seed=9))
    with pytest.raises(ValueError):
        a.merge(RandomProjectionTracker(V + 1, P, seed=9))


def decayed_reference(indptr, indices, counts, keys, V, P, seed, times, half_life):
    """S, T, U, P and sum w^2 with document weights w_d = 2^(-(T - t_d) / h) (T = latest time)."""
    H = dense(indptr, indices, counts, V)
    n = H.sum(1)
    w = 2.0 ** (-(times.max() - times) / half_life)
    Xn = H / n[:, None]
    Uc = H * (H - 1.0) / (n * (n - 1.0))[:, None]
    G = document_directions(keys, P, seed)
    return ((w[:, None] * Xn).sum(0), ((w[:, None] * Xn) ** 2).sum(0), ((w * w)[:, None] * Uc).sum(0),
            (w[:, None] * Xn).T @ G, float((w * w).sum()))


def true_sums(tr):
    """The tracker's decayed sums as readers see them (stored values times the lazy scale)."""
    scale = tr.decay.scale()
    return tr.S * scale, tr.T * scale**2, tr.U * scale**2, tr.P * scale, tr.weight_sq * scale**2


@pytest.mark.parametrize("unit, half_life, splits", [("documents", 40.0, [1, 17, 400]),
                                                     ("documents", 1.5, [64, 300]),  # settles past 2^256
                                                     ("stream", 90.0, [1, 33, 400])])
def test_forgetting_sums_equal_decayed_reference(unit, half_life, splits):
    rng = np.random.default_rng(11)
    V, P, B = 80, 8, 400
    indptr, indices, counts = random_batch(rng, B, V, max_len=12)
    counts += 1.0  # n_d >= 2 (the model passes the tracker only such documents)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    stamps = np.cumsum(rng.exponential(3.0, B)) if unit == "stream" else None
    times = stamps if unit == "stream" else np.arange(1.0, B + 1)
    expected = decayed_reference(indptr, indices, counts, keys, V, P, 4, times, half_life)
    for split in splits:
        tr = RandomProjectionTracker(V, P, seed=4, half_life=half_life, half_life_unit=unit)
        for a in range(0, B, split):
            docs = np.arange(a, min(B, a + split))
            tr.update(*sub_batch(indptr, indices, counts, docs), keys[docs],
                      None if stamps is None else stamps[docs])
        for got, want in zip(true_sums(tr), expected):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        restored = RandomProjectionTracker.from_state_dict(tr.state_dict())
        for got, want in zip(true_sums(restored), true_sums(tr)):
            np.testing.assert_array_equal(got, want)
    # the noise weighting sees the weighted documents: f from the reference sums
    S, T, U, _, w2 = expected
    s2 = S * S * w2 / S.sum() ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.clip(np.where(T - s2 > 0, (U - s2) / (T - s2), 0.0), 0.0, 1.0)
    np.testing.assert_allclose(tr.signal_fraction(), f, rtol=1e-7, atol=1e-9)
    weights = 2.0 ** (-(times.max() - times) / half_life)
    noise = reference_noise_sums(indptr, indices, counts, V, weights)
    np.testing.assert_allclose(tr.noise_sums * tr.decay.scale() ** 4, noise, rtol=1e-9)
    seen = S > 0
    np.testing.assert_allclose(tr.signal_z()[seen], reference_signal_z(S, U, w2, noise)[seen], rtol=1e-7, atol=1e-9)


def test_forgetting_merge_takes_both_substreams_to_now():
    rng = np.random.default_rng(12)
    V, P, h = 60, 6, 25.0
    parts = []
    for B in (120, 70):
        indptr, indices, counts = random_batch(rng, B, V, max_len=10)
        parts.append((indptr, indices, counts + 1.0, rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)))
    trackers = []
    for indptr, indices, counts, keys in parts:
        tr = RandomProjectionTracker(V, P, seed=2, half_life=h)
        tr.update(indptr, indices, counts, keys)
        trackers.append(tr)
    merged = trackers[0].merge(trackers[1])
    # each sub-stream decayed to its own end, then added
    expected = [sum(x) for x in zip(*(decayed_reference(*part, V, P, 2, np.arange(1.0, part[0].size), h)
                                      for part in parts))]
    for got, want in zip(true_sums(merged), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert merged.decay.clock == 190.0
    with pytest.raises(ValueError):
        merged.merge(RandomProjectionTracker(V, P, seed=2))


def test_subtract_removes_what_update_added():
    rng = np.random.default_rng(13)
    V, P, B = 90, 10, 300
    indptr, indices, counts = random_batch(rng, B, V, empty_every=29)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    tr = RandomProjectionTracker(V, P, seed=6)
    tr.update(indptr, indices, counts, keys)
    leaving = np.arange(120)
    tr.subtract(*sub_batch(indptr, indices, counts, leaving), keys[leaving])
    rest = np.arange(120, B)
    exact = RandomProjectionTracker(V, P, seed=6)
    exact.update(*sub_batch(indptr, indices, counts, rest), keys[rest])
    for name in ("S", "T", "U", "P", "noise_sums"):
        np.testing.assert_allclose(getattr(tr, name), getattr(exact, name), rtol=0, atol=1e-11)
    assert tr.n_docs == exact.n_docs and tr.weight_sq == exact.weight_sq == exact.n_docs
    with pytest.raises(ValueError):
        RandomProjectionTracker(V, P, half_life=10.0).subtract(indptr, indices, counts, keys)


def test_clear_word_restarts_one_row():
    rng = np.random.default_rng(14)
    V, P = 50, 8
    first, second = (random_batch(rng, 150, V) for _ in range(2))
    keys = [rng.integers(0, 2**64 - 1, size=150, dtype=np.uint64) for _ in range(2)]
    tr = RandomProjectionTracker(V, P, seed=1)
    tr.update(*first, keys[0])
    tr.clear_word(7)
    tr.update(*second, keys[1])
    old, new = RandomProjectionTracker(V, P, seed=1), RandomProjectionTracker(V, P, seed=1)
    old.update(*first, keys[0])
    new.update(*second, keys[1])
    for name in ("S", "T", "U", "P"):
        want = getattr(old, name).copy()
        want[7] = 0.0
        np.testing.assert_allclose(getattr(tr, name), want + getattr(new, name), rtol=1e-12, atol=1e-13)


def test_state_dict_round_trip_and_resume():
    rng = np.random.default_rng(5)
    V, P, B = 180, 20, 240
    indptr, indices, counts = random_batch(rng, B, V)
    keys = rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64)
    first, second = np.arange(0, 130), np.arange(130, B)
    uninterrupted = RandomProjectionTracker(V, P, seed=3)
    uninterrupted.update(indptr, indices, counts, keys)

    tr = RandomProjectionTracker(V, P, seed=3)
    tr.update(*sub_batch(indptr, indices, counts, first), keys[first])
    state = tr.state_dict()
    assert all(isinstance(v, (int, np.ndarray)) for v in state.values())
    # the saved state is a copy, immune to later updates
    tr.update(*sub_batch(indptr, indices, counts, second), keys[second])
    back = RandomProjectionTracker.from_state_dict(state)
    assert back.seed == 3 and back.n_projections == P and back.n_docs == 130
    back2 = RandomProjectionTracker.from_state_dict(back.state_dict())
    for name in ("S", "T", "U", "P", "noise_sums"):
        np.testing.assert_array_equal(getattr(back2, name), state[name])
    back.update(*sub_batch(indptr, indices, counts, second), keys[second])
    for name in ("S", "T", "U", "P", "noise_sums"):
        np.testing.assert_array_equal(getattr(back, name), getattr(uninterrupted, name))
    # a state written before the noise sums were kept (version 2) loads; its z is unknown for good
    older = {k: v for k, v in state.items() if k != "noise_sums"}
    older["version"] = 2
    back3 = RandomProjectionTracker.from_state_dict(older)
    back3.update(*sub_batch(indptr, indices, counts, second), keys[second])
    assert back3.noise_sums is None and back3.signal_z() is None
    np.testing.assert_array_equal(back3.U, uninterrupted.U)
    assert back.n_docs == uninterrupted.n_docs
    bad = dict(state, P=state["P"][:, :3])
    with pytest.raises(ValueError):
        RandomProjectionTracker.from_state_dict(bad)


def test_grow_keeps_sums_and_equals_larger_vocabulary():
    rng = np.random.default_rng(6)
    V, P = 100, 8
    ip1, ind1, cnt1 = random_batch(rng, 50, V)
    ip2, ind2, cnt2 = random_batch(rng, 50, V + 30)
    k1 = np.arange(50, dtype=np.uint64)
    k2 = np.arange(50, 100, dtype=np.uint64)
    tr = RandomProjectionTracker(V, P)
    tr.update(ip1, ind1, cnt1, k1)
    with pytest.raises(ValueError, match="grow"):
        tr.update(ip2, ind2, cnt2, k2)
    assert tr.n_docs == 50  # nothing added by the failed update
    old = tr.P.copy()
    tr.grow(V + 30)
    assert tr.n_words == V + 30 and tr.P.shape == (V + 30, P)
    np.testing.assert_array_equal(tr.P[:V], old)
    assert not tr.P[V:].any() and not tr.S[V:].any()
    tr.update(ip2, ind2, cnt2, k2)
    big = RandomProjectionTracker(V + 30, P)
    big.update(ip1, ind1, cnt1, k1)
    big.update(ip2, ind2, cnt2, k2)
    for name in ("S", "T", "U", "P"):
        np.testing.assert_array_equal(getattr(tr, name), getattr(big, name))
    with pytest.raises(ValueError):
        tr.grow(V)
    assert tr.nbytes == (V + 30) * (P + 3) * 8


def test_bad_input_raises_without_side_effects():
    tr = RandomProjectionTracker(10, 4)
    ip = np.array([0, 2], dtype=np.int64)
    with pytest.raises(ValueError):
        tr.update(ip, np.array([1, 2], np.int32), np.array([1.0, 0.0]), np.array([1], np.uint64))
    with pytest.raises(ValueError):
        tr.update(ip, np.array([1, 2], np.int32), np.array([1.0, np.nan]), np.array([1], np.uint64))
    with pytest.raises(ValueError):
        tr.update(ip, np.array([-1, 2], np.int32), np.array([1.0, 1.0]), np.array([1], np.uint64))
    with pytest.raises(ValueError):
        tr.update(ip, np.array([1, 2], np.int32), np.array([1.0, 1.0]), np.array([1, 2], np.uint64))
    assert tr.n_docs == 0 and not tr.S.any() and not tr.P.any()
    # empty batch and all-empty documents are fine
    no_words, no_counts = np.empty(0, np.int32), np.empty(0)
    assert tr.update(np.array([0], np.int64), no_words, no_counts, np.empty(0, np.uint64)) == 0
    two_empty = np.array([0, 0, 0], np.int64)
    assert tr.update(two_empty, no_words, no_counts, np.array([1, 2], np.uint64)) == 0


# ----------------------------------------------------------------------------------------------
# candidates and clustering
# ----------------------------------------------------------------------------------------------


def test_sets_of_words_rank_by_the_raw_projections():
    # no document repeats a word (clean images, sets of words): U is 0, so every signal fraction
    # and shrunk projection is 0 and "snr" would carry no ranking; it ranks as "raw" instead
    rng = np.random.default_rng(21)
    V, P, B = 60, 16, 200
    indptr, indices, counts = random_batch(rng, B, V)
    counts[:] = 1.0
    tr = RandomProjectionTracker(V, P, seed=3)
    tr.update(indptr, indices, counts, rng.integers(0, 2**64 - 1, size=B, dtype=np.uint64))
    assert not np.any(tr.signal_fraction() > 0)
    np.testing.assert_array_equal(tr.candidates(), tr.candidates(weighting="raw"))
    assert tr.candidates().size > 2


def test_candidates_reference_and_mask():
    rng = np.random.default_rng(7)
    V, P = 60, 10
    indptr, indices, counts = random_batch(rng, 200, V)
    tr = RandomProjectionTracker(V, P)
    tr.update(indptr, indices, counts, np.arange(200, dtype=np.uint64))
    mask = rng.random(V) < 0.5
    mask[0] = True
    # raw: argmax/argmin of P_i / S_i over the allowed words, by a plain loop
    z = tr.P / tr.S[:, None]
    want = set()
    for j in range(P):
        allowed = np.flatnonzero(mask & (tr.S > 0))
        want.add(int(allowed[np.argmax(z[allowed, j])]))
        want.add(int(allowed[np.argmin(z[allowed, j])]))
    got = tr.candidates(mask, weighting="raw")
    assert got.tolist() == sorted(want)
    assert set(tr.candidates(mask).tolist()) <= set(np.flatnonzero(mask).tolist())
    # snr projections: f_i (z_i - centre), f from the numpy definition
    M = tr.S.sum()
    f = np.clip((tr.U - tr.S**2 / M) / (tr.T - tr.S**2 / M), 0, 1)
    np.testing.assert_allclose(tr.signal_fraction(), f, rtol=1e-12)
    np.testing.assert_allclose(
        tr.projections(weighting="snr"), f[:, None] * (z - tr.P.sum(0) / M), rtol=1e-10, atol=1e-14
    )
    assert tr.candidates(np.zeros(V, bool)).size == 0
    assert RandomProjectionTracker(5, 3).candidates().size == 0


def test_every_anchor_is_a_candidate_and_groups_are_topics(corpus):
    A, anchors, indptr, indices, counts, keys = corpus
    V, K = A.shape
    tr = RandomProjectionTracker(V, n_projections=64, seed=0)
    tr.update(indptr, indices, counts, keys)
    df = np.bincount(indices, minlength=V)
    support = df >= 0.005 * tr.n_docs
    cand = tr.candidates(support)
    missing = set(anchors.tolist()) - set(cand.tolist())
    assert not missing, f"anchors missing from {cand.size} candidates: {missing}"
    assert cand.size <= 3 * K

    Qb = qbar_rows(indptr, indices, counts, V)
    calls = []

    def get_rows(ids):
        calls.append(ids.copy())
        return Qb[ids]

    groups = rp_anchor_groups(tr, support, K, get_rows)
    assert len(calls) == 1 and np.array_equal(calls[0], cand)
    assert len(groups) == K
    assert sorted(np.concatenate(groups).tolist()) == cand.tolist()
    owner = {int(w): g for g, grp in enumerate(groups) for w in grp}
    assert len({owner[int(a)] for a in anchors}) == K  # one anchor per group, each in its own
    pk = A / A.sum(1, keepdims=True)
    ids, wins = tr.candidates(support, return_wins=True)
    np.testing.assert_array_equal(ids, cand)
    assert wins.sum() == 2 * tr.n_projections
    win_of = dict(zip(ids.tolist(), wins.tolist()))
    for grp in groups:
        assert grp[0] in anchors  # the strongest vertex represents the group
        key = [(-win_of[int(w)], -tr.S[w]) for w in grp]
        assert key == sorted(key)
        near = grp[pk[grp].max(1) >= 0.9]  # (near-)anchors of one topic only
        assert len(set(pk[near].argmax(1).tolist())) == 1
    # the plain Ding ranking (why "snr" is the default) returns mostly noisy words here:
    # measured recall 0.5-0.8 with ~100 candidates on seeds 3-7, against 1.0 with ~11
    raw = tr.candidates(support, weighting="raw")
    assert raw.size > 4 * cand.size


def blobs(rng, sizes, dim=30, spread=0.02):
    centres = rng.dirichlet(np.full(dim, 0.3), size=len(sizes))
    noise = [spread * rng.standard_normal((s, dim)) / np.sqrt(dim) for s in sizes]
    rows = np.concatenate([c + e for c, e in zip(centres, noise)])
    truth = np.repeat(np.arange(len(sizes)), sizes)
    return rows, truth


def same_partition(a, b):
    return len(set(zip(a.tolist(), b.tolist()))) == len(set(a.tolist())) == len(set(b.tolist()))


def test_cluster_candidates_components_and_fallback():
    rng = np.random.default_rng(8)
    rows, truth = blobs(rng, [4, 1, 6, 3, 2])
    perm = rng.permutation(truth.size)
    rows, truth = rows[perm], truth[perm]
    lab = cluster_candidates(rows, 5)
    assert same_partition(lab, truth)
    assert lab.dtype == np.int64 and set(lab.tolist()) == set(range(5))
    # labels numbered in order of first appearance
    first = [lab.tolist().index(v) for v in range(5)]
    assert first == sorted(first)
    thr = default_cluster_threshold(rows, 5)
    D = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(-1)
    same = truth[:, None] == truth[None, :]
    assert D[same].max() < thr < D[~same].min()
    # scale-free: scaling the rows scales the threshold, not the labels
    assert default_cluster_threshold(10 * rows, 5) == pytest.approx(100 * thr)
    np.testing.assert_array_equal(cluster_candidates(10 * rows, 5), lab)
    # a threshold that links everything -> 1 component != 5 -> average linkage, exactly 5 groups
    assert same_partition(cluster_candidates(rows, 5, threshold=1e9), truth)
    # the fallback is average linkage, which does not chain: an evenly spaced line of points
    # plus one slightly further point splits in the middle, not at the last gap (single linkage)
    line = np.r_[np.arange(8.0), 8.5][:, None]
    np.testing.assert_array_equal(cluster_candidates(line, 2, threshold=1e9), [0] * 4 + [1] * 5)
    # while Ding's rule at the default d / 2 (squared gaps 1 < 2.25 / 2) links the line
    np.testing.assert_array_equal(cluster_candidates(line, 2), [0] * 8 + [1])
    # asking for fewer clusters than blobs still gives exactly that many labels
    assert set(cluster_candidates(rows, 3).tolist()) == {0, 1, 2}
    # fewer candidates than clusters: one each
    np.testing.assert_array_equal(cluster_candidates(rows[:3], 5), [0, 1, 2])
    assert cluster_candidates(np.empty((0, 4)), 3).size == 0
    np.testing.assert_array_equal(cluster_candidates(rows, 1), np.zeros(truth.size))
    assert default_cluster_threshold(rows, 1) == np.inf


def _minimum_spanning_tree_edges(rows: np.ndarray) -> np.ndarray:
    """Reference: the squared lengths of a minimum spanning tree's edges (Prim, in plain loops),
    sorted -- single linkage's merge heights."""
    c = rows.shape[0]
    inside, edges = [0], []
    while len(inside) < c:
        best = min(((float(((rows[i] - rows[j]) ** 2).sum()), j) for i in inside for j in range(c) if j not in inside))
        edges.append(best[0])
        inside.append(best[1])
    return np.sort(edges)


def test_group_separation_against_a_spanning_tree_reference():
    rng = np.random.default_rng(3)
    rows, _ = blobs(rng, [4, 1, 6, 3, 2])
    for k in (2, 3, 5, 7):
        edges = _minimum_spanning_tree_edges(rows)
        expected = edges[rows.shape[0] - k] / edges[rows.shape[0] - k - 1]
        assert group_separation(rows, k) == pytest.approx(expected, rel=1e-9)
    assert group_separation(rows, 5) > 2  # five blobs apart: Ding et al.'s clean case
    noise = rng.normal(size=(100, 100))  # no groups at all (300 draws: at most 1.02)
    assert 1 <= group_separation(noise, 20) < 1.1
    assert group_separation(rows[:5], 5) == 0.0 and group_separation(rows, 1) == 0.0


def test_default_projection_count_is_documented():
    assert DEFAULT_N_PROJECTIONS == RandomProjectionTracker(3).n_projections
    assert f"Default P = {DEFAULT_N_PROJECTIONS}" in RandomProjectionTracker.__doc__
    got = [n_projections_for_topics(k) for k in (1, 20, 50, 100, 1000)]
    assert got == [64, 256, 512, 1024, 4096]
