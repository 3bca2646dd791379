"""The statistics view: how the refresh reads the co-occurrence sums.

Every step of the refresh (:mod:`~streamtopics.refresh.steps`) reads the sums through a small interface
(``n_words``, ``n_docs``, ``word_mass``, ``document_frequency``, ``rows(ids)``, ``matmul(B)``),
implemented by the packed streaming sums and by a dense matrix alike, so a streamed model and a
batch computation over the same documents run literally the same code. :func:`normalised_rows`
is the one derived quantity every step needs: rows of Qbar, the row-normalised co-occurrences.
"""

from __future__ import annotations

import numpy as np


def normalised_rows(view, ids: np.ndarray) -> np.ndarray:
    """Qbar rows of the words ``ids``: their Q rows divided by their masses (a word of no mass
    keeps its zero row). Divided in place: every kind of statistics returns its rows as a new
    array (a packed gather, a dense fancy index, a low-rank product), and at V = 100,000 a copy of
    200 rows cost page faults of 160 MB."""
    mass = view.word_mass[ids]
    rows = np.asarray(view.rows(ids), dtype=np.float64)
    rows /= np.where(mass > 0, mass, 1.0)[:, None]
    return rows


def projected_normalised_rows(view, ids: np.ndarray, projection, chunk: int = 512) -> np.ndarray:
    """``normalised_rows(view, ids) @ projection``, a ``chunk`` of full rows at a time; a view
    that projects its rows itself (the packed sums, in one pass; the sketch's
    :class:`~streamtopics.statistics.sketch_view.LowRankView`, through its factors) forms none."""
    if hasattr(view, "normalised_projected_rows"):
        return view.normalised_projected_rows(ids, projection)
    return np.vstack([normalised_rows(view, ids[s : s + chunk]) @ projection for s in range(0, ids.size, chunk)])
