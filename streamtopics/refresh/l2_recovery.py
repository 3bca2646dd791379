"""RecoverL2's per-word solve (Arora et al. 2013, Algorithm 3; :mod:`~streamtopics.refresh.recovery` calls it).

Every word's row-normalised co-occurrence row is written as a convex combination ``C_i`` of the
anchor rows. RecoverL2 is kernelised: with ``G = Qbar_S Qbar_S^T`` (K x K) and
``y_i = Qbar_S Qbar_i^T``, word i solves ``min_c c'Gc - 2 y_i'c`` over the simplex by
exponentiated gradient with a backtracking (Armijo) line search, stopping when the duality gap
``c'g - min(g)`` (an upper bound on the objective's distance to optimal, the KKT test) falls below
the tolerance. EG identifies the support of the solution quickly but converges slowly on small
non-zero coefficients, so now and then a primal active-set method started from EG's support tries
to finish the solve exactly (a few small linear solves, through a Cholesky factor of the working
set's Gram block that grows with it); its result is kept when it passes the same KKT test. A try
from a rough support costs many EG iterations, so tries come after :data:`FIRST_FINISH` EG
iterations and then after twice as many each time (``git show 8e056d1:BENCHMARKS.md``, "When the
solver tries its active-set finish"). RecoverKL (:mod:`~streamtopics.refresh.kl_recovery`) minimises
KL(Qbar_i || c'Qbar_S) the same way at O(V K) per iteration.

Words are independent and solved in parallel (numba prange), each from a starting point
(:func:`starting_points`): uniform (cold) or the previous refresh's solution (warm). A warm word
whose finish from the previous support fails starts again from uniform: where anchors moved, EG
climbs out of the old support more slowly than it converges from uniform.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_FLOOR = 1e-10  # starting points are mixed with this much uniform mass: EG cannot revive a zero
FIRST_FINISH = 5  # EG iterations before the first active-set finish; each later try after twice as many
GATHER_FACTOR = 16  # working sets from this size on are factorised from scratch from their gathered block (_schur_solve)


@njit(cache=True, nogil=True, inline="always")
def _copy(source, target):
    """``target[:] = source``, element by element: an array assigned to a slice makes numba compile
    its shape-mismatch message (string formatting), about 6 s of the demo's 43 s first run."""
    for i in range(source.size):
        target[i] = source[i]


@njit(cache=True, nogil=True, fastmath=True, inline="always")
def _quadratic(gram, y, c, gc):
    """Fills gc = G c and returns c'Gc - 2 y'c."""
    k = c.size
    value = 0.0
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += gram[a, b] * c[b]
        gc[a] = s
        value += c[a] * (s - 2.0 * y[a])
    return value


@njit(cache=True, nogil=True)
def _solve_in_place(a, b):
    """Solves ``a x = b`` by Gaussian elimination with partial pivoting, leaving x in ``b`` (``a``
    is overwritten); False when a pivot is not positive in magnitude (singular, or NaN). Not
    np.linalg.solve: its exception on a singular matrix, caught inside a compiled function,
    leaks the arrays alive at the raise."""
    n = b.size
    for col in range(n):
        pivot = col
        largest = abs(a[col, col])
        for r in range(col + 1, n):
            if abs(a[r, col]) > largest:
                largest = abs(a[r, col])
                pivot = r
        if not largest > 0.0:
            return False
        if pivot != col:
            for q in range(col, n):
                a[col, q], a[pivot, q] = a[pivot, q], a[col, q]
            b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, n):
            f = a[r, col] / a[col, col]
            if f != 0.0:
                for q in range(col + 1, n):
                    a[r, q] -= f * a[col, q]
                b[r] -= f * b[col]
    for r in range(n - 1, -1, -1):
        s = b[r]
        for q in range(r + 1, n):
            s -= a[r, q] * b[q]
        b[r] = s / a[r, r]
    return True


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _schur_solve(gram, y, members, m, factor, valid, work, z):
    """``G_SS z + mu/2 1 = y_S, sum(z) = 1`` for the working set ``S = members[:m]`` through
    the Cholesky factor L of G_SS (the bordered system's Schur complement): z = a - (mu/2) b
    with G_SS a = y_S and G_SS b = 1. Rows ``0..valid-1`` of ``factor`` already hold L's rows
    for these leading members (a working set that only grew keeps them): only the others are
    computed. Writes z[:m] (z[m] = mu); False when G_SS is not numerically positive definite."""
    if valid == 0 and m >= GATHER_FACTOR:
        # from scratch: factorise the gathered block (the loop below reads every entry through
        # two indirections). Not np.linalg.cholesky: it raises on a block that is not positive
        # definite, and an exception caught inside a compiled function leaks the arrays alive at
        # the raise (GBs over a V = 100,000 refresh); the pivot test is the loop's.
        block = np.empty((m, m))
        for r in range(m):
            row = gram[members[r]]
            for q in range(m):
                block[r, q] = row[members[q]]
        for r in range(m):
            for q in range(r + 1):
                s = block[r, q]
                for t in range(q):
                    s -= factor[r, t] * factor[q, t]
                if r == q:
                    if s <= 1e-14 * block[r, r]:
                        return False
                    factor[r, r] = np.sqrt(s)
                else:
                    factor[r, q] = s / factor[q, q]
        valid = m
    for r in range(valid, m):
        row = gram[members[r]]
        for q in range(r + 1):
            s = row[members[q]]
            for t in range(q):
                s -= factor[r, t] * factor[q, t]
            if r == q:
                if s <= 1e-14 * row[members[r]]:
                    return False
                factor[r, r] = np.sqrt(s)
            else:
                factor[r, q] = s / factor[q, q]
    for r in range(m):  # forward: L u = (y_S, 1)
        s0 = y[members[r]]
        s1 = 1.0
        for t in range(r):
            s0 -= factor[r, t] * work[0, t]
            s1 -= factor[r, t] * work[1, t]
        work[0, r] = s0 / factor[r, r]
        work[1, r] = s1 / factor[r, r]
    for r in range(m - 1, -1, -1):  # back: L^T (a, b) = u
        s0 = work[0, r]
        s1 = work[1, r]
        for t in range(r + 1, m):
            s0 -= factor[t, r] * work[0, t]
            s1 -= factor[t, r] * work[1, t]
        work[0, r] = s0 / factor[r, r]
        work[1, r] = s1 / factor[r, r]
    sa, sb = 0.0, 0.0
    for r in range(m):
        sa += work[0, r]
        sb += work[1, r]
    if not sb > 0.0:
        return False
    half_mu = (sa - 1.0) / sb
    for r in range(m):
        z[r] = work[0, r] - half_mu * work[1, r]
    z[m] = 2.0 * half_mu
    return True


@njit(cache=True, nogil=True)
def _active_set(gram, y, c, out, gc, support_floor, max_steps):
    """Finish a solve exactly by a primal active-set method started from EG's support.

    On the working set S the equality-constrained minimiser solves
    ``G_SS z + mu/2 1 = y_S, sum(z) = 1``. If z stays positive it is taken, and the word outside
    S with the most negative gradient joins S while the KKT test fails; otherwise the step
    towards z stops where the first coordinate reaches zero and that word leaves S. Writes the
    solution into ``out`` (and G out into ``gc``) and returns its duality gap, or inf when the
    method cannot proceed (singular system, cycling), in which case EG simply goes on.

    The working set is kept in the order its members joined, with the Cholesky factor of G_SS:
    members joining append rows to it (O(m^2) each instead of a new O(m^3) factorisation), a
    member leaving invalidates the rows from its position on."""
    k = c.size
    top = c.max()
    in_set = np.zeros(k, np.bool_)
    x = np.zeros(k)
    total = 0.0
    for a in range(k):
        if c[a] > support_floor * top:
            in_set[a] = True
            x[a] = c[a]
            total += c[a]
    x /= total
    factor = np.empty((k, k))
    work = np.empty((2, k))
    members = np.empty(k, np.int64)
    listed = np.zeros(k, np.bool_)
    m = 0
    valid = 0
    z = np.empty(k + 1)
    added = -1
    n_steps = 0
    n_adds = 0
    block_steps = 3
    for _ in range(max_steps):
        # the working set in joining order: those still in it keep their places (the factor's
        # rows before the first one that left stay valid), new members append in word order
        kept = 0
        for r in range(m):
            a = members[r]
            if in_set[a]:
                members[kept] = a
                kept += 1
            else:
                listed[a] = False
                valid = min(valid, r)
        m = kept
        for a in range(k):
            if in_set[a] and not listed[a]:
                listed[a] = True
                members[m] = a
                m += 1
        if not _schur_solve(gram, y, members, m, factor, valid, work, z):  # G_SS singular: LU of the bordered system
            valid = 0
            system = np.zeros((m + 1, m + 1))
            rhs = np.zeros(m + 1)
            for r in range(m):
                for q in range(m):
                    system[r, q] = gram[members[r], members[q]]
                system[r, m] = 0.5
                system[m, r] = 1.0
                rhs[r] = y[members[r]]
            rhs[m] = 1.0
            if not _solve_in_place(system, rhs):
                return np.inf
            _copy(rhs, z)
        else:
            valid = m
        if z[:m].min() > 0.0:
            x[:] = 0.0
            for r in range(m):
                x[members[r]] = z[r]
            g_min = np.inf
            j = -1
            gap = 0.0
            gc[:] = 0.0  # G x over the support only (G is symmetric: rows of the members)
            for r in range(m):
                row = gram[members[r]]
                xb = x[members[r]]
                for a in range(k):
                    gc[a] += row[a] * xb
            for a in range(k):
                s = gc[a]
                g = 2.0 * (s - y[a])
                gap += x[a] * g
                if g < g_min:
                    g_min = g
                    j = a
            level = gap  # sum x_a g_a: the common gradient on the working set at its minimiser
            gap -= g_min
            if in_set[j] or gap <= 0.0:
                _copy(x, out)
                return max(gap, 0.0)
            in_set[j] = True  # the most violated KKT condition enters the working set
            added = j
            if n_adds < block_steps:
                # Early on, every clearly violated condition enters at once (a warm start misses
                # several words of the new support; one per solve would cost a solve each).
                n_adds += 1
                for a in range(k):
                    if not in_set[a] and 2.0 * (gc[a] - y[a]) < level:
                        in_set[a] = True
            continue
        if n_steps < block_steps:
            # Early on, drop every coordinate that went negative at once (block pivoting): from
            # EG's rough support this removes tens of words in one solve instead of one each.
            # Later steps use the ratio test, which cannot cycle.
            n_steps += 1
            for r in range(m):
                if z[r] <= 0.0:
                    in_set[members[r]] = False
                    x[members[r]] = 0.0
            total = x.sum()
            if total <= 0.0 or not in_set.any():
                return np.inf
            x /= total
            continue
        step = 1.0
        leaving = -1
        for r in range(m):
            a = members[r]
            if z[r] <= 0.0:
                t = x[a] / (x[a] - z[r]) if x[a] > 0.0 else 0.0
                if t < step:
                    step, leaving = t, a
        if leaving == added and step <= 0.0:
            return np.inf  # would drop the word just added: rounding-level cycling
        for r in range(m):
            a = members[r]
            x[a] += step * (z[r] - x[a])
        x[leaving] = 0.0
        in_set[leaving] = False
        for a in range(k):
            if in_set[a] and x[a] <= 0.0:
                in_set[a] = False
                x[a] = 0.0
        total = x.sum()
        if total <= 0.0:
            return np.inf
        x /= total
    return np.inf


@njit(cache=True, nogil=True, parallel=True)
def _recover_l2(gram, y_unscaled, scale, start, rows, tol, max_iter, first_finish, warm):
    """:func:`recover_l2`'s solves of the ``rows`` given, in parallel; row i's products are
    ``y_unscaled[i] / scale``."""
    n_words, k = y_unscaled.shape
    coefficients = np.zeros((n_words, k))
    iterations = np.zeros(n_words, np.int64)
    for r in prange(rows.size):
        i = rows[r]
        y_i = y_unscaled[i] / scale
        c = start[i].copy()
        c_new = np.empty(k)
        gc = np.empty(k)
        gc_new = np.empty(k)
        grad = np.empty(k)
        value = _quadratic(gram, y_i, c, gc)
        eta = -1.0
        it = 0
        finish_at = first_finish
        from_previous = warm
        while it < max_iter:
            g_min = np.inf
            g_max = -np.inf
            gap = 0.0
            for a in range(k):
                grad[a] = 2.0 * (gc[a] - y_i[a])
                gap += c[a] * grad[a]
                g_min = min(g_min, grad[a])
                g_max = max(g_max, grad[a])
            gap -= g_min
            if gap <= tol:
                break
            if it == finish_at or (it == 0 and from_previous):
                # EG's tail is slow for small non-zero coefficients; once it has roughly found the
                # support, an active-set finish gets the exact minimiser in a few linear solves.
                # A warm start carries the previous support, so it is tried at once. A failed try
                # from a rough support costs as much as many EG iterations: the next waits twice
                # as long.
                if it == finish_at:
                    finish_at *= 2
                # The previous solution's support is taken whole (its zeros carry only the
                # starting point's 1e-10 floor); EG's rough support drops its tiny coefficients.
                floor = 1e-7 if (it == 0 and from_previous) else 1e-3
                if _active_set(gram, y_i, c, c_new, gc_new, floor, 2 * k + 10) <= tol:
                    c, c_new = c_new, c
                    it += 1
                    break
                if it == 0 and from_previous:
                    # The previous support is wrong (its anchors moved): from there EG needs many
                    # steps to grow coefficients from the starting point's 1e-10 floor, more than
                    # from uniform. The word starts again, cold.
                    from_previous = False
                    for a in range(k):
                        c[a] = 1.0 / k
                    value = _quadratic(gram, y_i, c, gc)
                    continue
            if eta < 0.0:  # first step: move exponents by about one unit
                eta = 1.0 / max(g_max - g_min, 1e-300)
            it += 1
            accepted = False
            for _ in range(60):  # backtracking line search (Armijo)
                total = 0.0
                for a in range(k):
                    c_new[a] = c[a] * np.exp(-eta * (grad[a] - g_min))
                    total += c_new[a]
                decrease = 0.0
                for a in range(k):
                    c_new[a] /= total
                    decrease += grad[a] * (c_new[a] - c[a])
                value_new = _quadratic(gram, y_i, c_new, gc_new)
                if value_new <= value + 1e-4 * decrease:
                    accepted = True
                    break
                eta *= 0.5
            if not accepted:
                break
            c, c_new = c_new, c
            gc, gc_new = gc_new, gc
            value = value_new
            eta *= 2.0
        _copy(c, coefficients[i])
        iterations[i] = it
    return coefficients, iterations


def starting_points(start, n_words, n_topics):
    """Each word's start on the simplex: ``start``'s row clipped at 0, normalised, mixed with
    :data:`_FLOOR` of uniform mass (uniform where that is not finite), normalised again. In place
    in one copy: at V = 100,000, K = 101 each V x K temporary cost page faults, 0.6 s for five."""
    if start is None:
        return np.full((n_words, n_topics), 1.0 / n_topics)
    start = np.array(start, dtype=np.float64, order="C")  # a copy: changed in place below
    np.maximum(start, 0.0, out=start)
    start /= np.maximum(start.sum(axis=1, keepdims=True), 1e-300)
    start *= 1.0 - _FLOOR * n_topics
    start += _FLOOR
    start[~np.isfinite(start).all(axis=1)] = 1.0 / n_topics
    start /= start.sum(axis=1, keepdims=True)
    return start


def recover_l2(anchor_rows: np.ndarray, gram_products: np.ndarray, start=None, tol: float = 1e-5, max_iter: int = 500,
               rows: np.ndarray | None = None):
    """Solve every word's simplex-constrained least squares.

    Parameters
    ----------
    anchor_rows
        Qbar_S (K x D), the anchors' row-normalised rows (or group-averaged rows).
    gram_products
        ``y`` (V x K): ``Qbar @ Qbar_S^T``.
    start
        Warm start (V x K, rows on the simplex) or None for uniform.
    tol
        Duality-gap stop on the problem scaled to unit mean anchor norm.
    rows
        The words to solve (None: all); the others' rows of C are 0 and their iterations 0. The
        caller's full arrays are read in place: at V = 100,000, K = 101 selecting the rows first
        copied two V x K arrays and scaling ``y`` a third, about 0.1-0.3 s each.

    Returns ``(C, iterations)``: V x K rows on the simplex and the iterations each word took.
    """
    gram = anchor_rows @ anchor_rows.T
    # Solve the problem scaled to unit mean anchor norm, so `tol` means the same whatever the
    # vocabulary size (Qbar rows of a large vocabulary have tiny norms).
    scale = max(float(np.trace(gram)) / gram.shape[0], 1e-300)
    gram = np.ascontiguousarray(gram / scale)
    y = np.ascontiguousarray(gram_products, dtype=np.float64)
    rows = np.arange(y.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    return _recover_l2(gram, y, scale, starting_points(start, *y.shape), rows, float(tol), int(max_iter),
                       FIRST_FINISH, start is not None)
