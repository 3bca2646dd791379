"""Counter-based Gaussian directions g_d ~ N(0, I_P), one per document (docs/design.md, "Anchor words").

The random-projection tracker (:mod:`streamtopics.statistics.trackers`) projects every document on its own
direction.  g_d is a pure function of (seed, document key, column): a splitmix64 mixer and
Box-Muller computed with IEEE-exact polynomial log/sin/cos, so a replay, a resume from a
checkpoint or a split over several consumers sees the same directions on any machine, and the
trackers' sums stay exact and mergeable.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

__all__ = ["document_directions"]

_U64_MASK = (1 << 64) - 1
_GAMMA = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio increment of splitmix64
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SEED_SALT = np.uint64(0x5851F42D4C957F2D)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_S49 = np.uint64(49)
_S51 = np.uint64(51)
_ONE = np.uint64(1)
_THREE = np.uint64(3)
_TWO_POW_51 = np.int64(1) << np.int64(51)
_LN2 = 0.6931471805599453094
_SQRT2 = 1.4142135623730951
_TWO_PI_OVER_2_53 = 2.0 * math.pi / 9007199254740992.0


@njit(cache=True, nogil=True, inline="always")
def _mix64(z):
    """splitmix64 / Stafford 'Mix13' finaliser: a bijection of uint64 with full avalanche."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True, nogil=True, inline="always")
def _ln_unit(n):
    """ln(n * 2**-53) for an integer 1 <= n <= 2**53, using only IEEE-exact operations.

    frexp is exact; the series for ln(m), m in [sqrt(1/2), sqrt(2)), is ln m = 2 atanh(s),
    s = (m-1)/(m+1), |s| <= 0.1716, truncated after s**25 (error < 1e-19).  Only correctly
    rounded operations (+ - * / sqrt, frexp), no libm transcendental, and numba neither
    reassociates nor contracts to FMA without fastmath: the result does not depend on the
    machine's libm or SIMD math library.
    """
    m, e = math.frexp(float(n))  # n = m * 2**e, m in [0.5, 1)
    m = m * 2.0
    e = e - 1
    if m > _SQRT2:
        m = m * 0.5
        e = e + 1
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = 1.0 / 25.0
    p = p * s2 + 1.0 / 23.0
    p = p * s2 + 1.0 / 21.0
    p = p * s2 + 1.0 / 19.0
    p = p * s2 + 1.0 / 17.0
    p = p * s2 + 1.0 / 15.0
    p = p * s2 + 1.0 / 13.0
    p = p * s2 + 1.0 / 11.0
    p = p * s2 + 1.0 / 9.0
    p = p * s2 + 1.0 / 7.0
    p = p * s2 + 1.0 / 5.0
    p = p * s2 + 1.0 / 3.0
    p = p * s2 + 1.0
    return float(e - 53) * _LN2 + 2.0 * s * p


@njit(cache=True, nogil=True, inline="always")
def _sincos_reduced(a):
    """(sin a, cos a) for |a| <= pi/4 by Taylor polynomials (error < 1e-16), IEEE-exact ops."""
    a2 = a * a
    s = 1.0 - a2 / 342.0
    s = 1.0 - a2 / 272.0 * s
    s = 1.0 - a2 / 210.0 * s
    s = 1.0 - a2 / 156.0 * s
    s = 1.0 - a2 / 110.0 * s
    s = 1.0 - a2 / 72.0 * s
    s = 1.0 - a2 / 42.0 * s
    s = 1.0 - a2 / 20.0 * s
    s = 1.0 - a2 / 6.0 * s
    c = 1.0 - a2 / 306.0
    c = 1.0 - a2 / 240.0 * c
    c = 1.0 - a2 / 182.0 * c
    c = 1.0 - a2 / 132.0 * c
    c = 1.0 - a2 / 90.0 * c
    c = 1.0 - a2 / 56.0 * c
    c = 1.0 - a2 / 30.0 * c
    c = 1.0 - a2 / 12.0 * c
    c = 1.0 - a2 / 2.0 * c
    return a * s, c


@njit(cache=True, nogil=True, inline="always")
def _doc_stream_key(seed_u64, key):
    """Per-document stream key: a bijection of the key for a fixed seed (no collisions)."""
    return _mix64(key ^ _mix64(seed_u64 ^ _SEED_SALT))


@njit(cache=True, nogil=True, inline="always")
def _fill_direction(k, out):
    """Write the P normals of the document with stream key k into out (length P).

    Pair m (columns 2m, 2m+1) uses the splitmix64 outputs x1 = mix(k + (2m+1)*gamma) and
    x2 = mix(k + (2m+2)*gamma) -> u1 = (x1>>11 + 1) 2^-53 in (0,1], angle = 2 pi (x2>>11) 2^-53
    -> Box-Muller.  Column j therefore depends on (seed, key, j) only; a longer direction is an
    extension of a shorter one.
    """
    P = out.shape[0]
    c = k
    for m in range((P + 1) // 2):
        c = c + _GAMMA
        x1 = _mix64(c)
        c = c + _GAMMA
        x2 = _mix64(c)
        n1 = (x1 >> _S11) + _ONE  # 1 .. 2**53
        r = math.sqrt(-2.0 * _ln_unit(n1))
        # angle 2*pi*N/2**53, N = x2>>11 in [0, 2**53); quadrant q = round(N / 2**51) mod 4,
        # remainder in [-2**50, 2**50) -> reduced angle in [-pi/4, pi/4); all integer-exact.
        N = x2 >> _S11
        qq = (N + (_ONE << _S49)) >> _S51
        rem = np.int64(N) - np.int64(qq) * _TWO_POW_51
        a = float(rem) * _TWO_PI_OVER_2_53
        sa, ca = _sincos_reduced(a)
        q = qq & _THREE
        if q == 0:
            cs, sn = ca, sa
        elif q == 1:
            cs, sn = -sa, ca
        elif q == 2:
            cs, sn = -ca, -sa
        else:
            cs, sn = sa, -ca
        out[2 * m] = r * cs
        if 2 * m + 1 < P:
            out[2 * m + 1] = r * sn


@njit(cache=True, nogil=True, parallel=True)
def _directions_kernel(keys, n_projections, seed_u64):
    B = keys.shape[0]
    G = np.empty((B, n_projections), dtype=np.float64)
    for d in prange(B):
        _fill_direction(_doc_stream_key(seed_u64, keys[d]), G[d])
    return G


def _seed_u64(seed: int) -> np.uint64:
    return np.uint64(int(seed) & _U64_MASK)


def document_directions(keys, n_projections: int, seed: int) -> np.ndarray:
    """Random directions g_d ~ N(0, I_P) of a batch of documents, shape (B, P), float64.

    ``g_d`` is a pure function of ``(seed, keys[d], column)``: the same key gets the same vector
    in any batch, at any position, in any process, and (no libm transcendental; polynomial
    log/sin/cos) on any IEEE-754 machine.  Column j of a P-direction is column j of any longer
    one.  (Checked against a libm Box-Muller reference to 1e-13 in the tests.)  Keys are the
    uint64 hashes of the documents' keys; equal keys get equal directions,
    so two different documents must not share a key.
    """
    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    n_projections = int(n_projections)
    if n_projections < 1:
        raise ValueError("n_projections must be >= 1")
    return _directions_kernel(keys, n_projections, _seed_u64(seed))

