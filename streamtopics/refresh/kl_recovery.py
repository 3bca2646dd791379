"""RecoverKL's per-word solve: each word's Qbar row as the mixture c'Qbar_S of the anchor rows
closest in KL divergence, by exponentiated gradient on the simplex as RecoverL2's
(:mod:`~streamtopics.refresh.l2_recovery`), at O(V K) per iteration and word: for moderate vocabularies
(``recovery="kl"``)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .l2_recovery import starting_points


@njit(cache=True, nogil=True, parallel=True)
def _recover_kl(anchor_rows, word_rows_source, row_ids, start, tol, max_iter):
    """KL version; ``word_rows_source`` is a dense (n x V) block of row-normalised rows."""
    n_words = row_ids.size
    k, n_features = anchor_rows.shape
    coefficients = np.empty((n_words, k))
    iterations = np.zeros(n_words, np.int64)
    for r in prange(n_words):
        row = word_rows_source[r]
        support = np.flatnonzero(row > 0)
        target = row[support]
        basis = np.ascontiguousarray(anchor_rows[:, support])
        c = start[r].copy()
        c_new = np.empty(k)
        mix = basis.T @ c
        value = 0.0
        for j in range(support.size):
            value += target[j] * np.log(target[j] / max(mix[j], 1e-300))
        eta = -1.0
        it = 0
        while it < max_iter:
            ratio = target / np.maximum(mix, 1e-300)
            g = -(basis @ ratio)
            g_min = g.min()
            gap = (c * g).sum() - g_min
            if gap <= tol:
                break
            if eta < 0.0:
                eta = 1.0 / max(g.max() - g_min, 1e-300)
            it += 1
            accepted = False
            for _ in range(60):
                c_new[:] = c * np.exp(-eta * (g - g_min))
                c_new /= c_new.sum()
                mix_new = basis.T @ c_new
                value_new = 0.0
                for j in range(support.size):
                    value_new += target[j] * np.log(target[j] / max(mix_new[j], 1e-300))
                if value_new <= value + 1e-4 * (g * (c_new - c)).sum():
                    accepted = True
                    break
                eta *= 0.5
            if not accepted:
                break
            c[:] = c_new
            mix = mix_new
            value = value_new
            eta *= 2.0
        coefficients[r] = c
        iterations[r] = it
    return coefficients, iterations


def recover_kl(anchor_rows: np.ndarray, word_rows: np.ndarray, start=None, tol: float = 1e-9, max_iter: int = 1000):
    """Solve every word's simplex-constrained KL projection; ``word_rows`` are row-normalised
    (n x D). Costs O(n x D x K) per iteration: use it for moderate vocabularies."""
    anchor_rows = np.ascontiguousarray(anchor_rows, dtype=np.float64)
    word_rows = np.ascontiguousarray(word_rows, dtype=np.float64)
    starts = starting_points(start, word_rows.shape[0], anchor_rows.shape[0])
    return _recover_kl(anchor_rows, word_rows, np.arange(word_rows.shape[0]), starts, float(tol), int(max_iter))
