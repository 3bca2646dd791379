"""Speed-ups of the refresh that must not change its result: the anchor matching of the warm
start, the packed candidate block (see test_rectification.py) and the active set's LAPACK
factorisation, each against the plain computation."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from streamtopics.alignment import l1_distances
from streamtopics.recovery import recover_l2
from streamtopics.refresh import match_columns


def hungarian(previous, current):
    cost = l1_distances(previous.T, current.T)
    p, c = linear_sum_assignment(cost)
    mapping = np.full(current.shape[0], -1, np.int64)
    mapping[c] = p
    return mapping


def test_matching_equal_rows_first_is_the_whole_assignment():
    rng = np.random.default_rng(0)
    for trial in range(30):
        k, v = int(rng.integers(2, 12)), 40
        previous = rng.dirichlet(np.full(v, 0.3), k)
        current = previous[rng.permutation(k)].copy()
        changed = rng.random(k) < rng.random()  # some anchors replaced by other words
        current[changed] = rng.dirichlet(np.full(v, 0.3), int(changed.sum()))
        if trial % 3 == 0:  # a new anchor close to an old one
            current[0] = 0.9 * previous[-1] + 0.1 * current[0]
        assert np.array_equal(match_columns(previous, current), hungarian(previous, current))
    # more current rows than previous ones (the unmatched keep -1), and fewer
    previous = rng.dirichlet(np.ones(20), 3)
    current = np.vstack([previous[[2, 0]], rng.dirichlet(np.ones(20), 3)])
    assert np.array_equal(match_columns(previous, current), hungarian(previous, current))
    assert np.array_equal(match_columns(current, previous), hungarian(current, previous))
    # two equal previous rows: the whole problem, as before
    previous = np.vstack([previous, previous[:1]])
    assert np.array_equal(match_columns(previous, current), hungarian(previous, current))


def test_recovery_solves_as_it_did_before_the_lapack_factorisation(monkeypatch):
    """Working sets large enough for LAPACK (K = 40, supports of 20-30 words) against the
    hand-written factorisation alone: the same coefficients to rounding, and whole solves with
    the same iterations warm and cold."""
    import streamtopics.recovery as recovery

    rng = np.random.default_rng(1)
    k, v = 40, 600
    anchor_rows = rng.dirichlet(np.full(v, 0.05), k)
    mixtures = rng.dirichlet(np.full(k, 0.5), 300)
    products = (mixtures @ anchor_rows + rng.normal(0, 1e-5, (300, v))) @ anchor_rows.T
    gram = anchor_rows @ anchor_rows.T
    scale = np.trace(gram) / k
    gram, y = gram / scale, products / scale
    starts = np.full((300, k), 1.0 / k)

    def finish(kernel, i):
        out, gc = np.empty(k), np.empty(k)
        return kernel(gram, y[i], starts[i], out, gc, 1e-3, 2 * k + 10), out

    ours = [finish(recovery._active_set, i) for i in range(0, 300, 7)]  # compiled before the patch
    ours_solve = recover_l2(anchor_rows, products)
    ours_warm = recover_l2(anchor_rows, products, start=ours_solve[0])
    assert (ours_solve[0] > 1e-9).sum(axis=1).max() >= recovery.LAPACK_FACTOR
    # the same kernels compiled with the hand-written factorisation only (globals are frozen
    # when a kernel is compiled)
    monkeypatch.setattr(recovery, "LAPACK_FACTOR", 10**9)
    monkeypatch.setattr(recovery, "_schur_solve", recovery.njit(nogil=True)(recovery._schur_solve.py_func))
    plain_active = recovery.njit(nogil=True)(recovery._active_set.py_func)
    plain = [finish(plain_active, i) for i in range(0, 300, 7)]
    monkeypatch.setattr(recovery, "_active_set", plain_active)
    plain_recover = recovery.njit(nogil=True, parallel=True)(recovery._recover_l2.py_func)
    monkeypatch.setattr(recovery, "_recover_l2", plain_recover)
    plain_solve = recover_l2(anchor_rows, products)
    plain_warm = recover_l2(anchor_rows, products, start=plain_solve[0])
    for (gap_a, a), (gap_b, b) in zip(ours, plain):
        assert np.isfinite(gap_a) == np.isfinite(gap_b)
        assert not np.isfinite(gap_a) or np.allclose(a, b, rtol=0, atol=1e-12)
    for (c_a, it_a), (c_b, it_b) in ((ours_solve, plain_solve), (ours_warm, plain_warm)):
        assert np.array_equal(it_a, it_b)
        assert np.allclose(c_a, c_b, rtol=0, atol=1e-12)
