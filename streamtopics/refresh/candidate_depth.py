"""How deep into the frequency ranking the anchor search looks (docs/design.md, "Anchor words").

``max_anchor_candidates="auto"`` caps the candidate anchors at the max(1000, 20 K) most frequent
eligible words (:func:`~streamtopics.refresh.anchors.default_max_candidates`): in text, rarer words'
rows carry enough junk (a name quoted in one thread, uuencoded mail) to take anchors from real
topics. In the seed papers' own setting, separable topics whose anchor words are rarer than the
words they share (Arora et al. 2013; Ding et al. 2013), the cap hides the anchors instead: V =
2,000, K = 20, 50,000 documents, matched L1 0.60 with the cap and 0.16 without it.

Which of the two holds can be read from the sums themselves. RecoverL2 writes each word's Qbar
row as a convex combination of the anchors' rows; what it cannot write is the residual, and the
better anchor set leaves less of it: over the :data:`RESIDUAL_WORDS` most frequent words (weighted
by their mass) the set with the lower L1 had the lower residual in all 14 cases measured (four
separable streams, K = 20 and 50, alpha 0.1 and 0.03; Gibbs-truth streams of 20 Newsgroups K = 20
and 50, Reuters K = 50 and Debian K = 50 at 20,000 and 100,000 documents, where the cap won).
:class:`CandidateDepth` therefore searches both the capped set and one :data:`WIDER` times as deep
and keeps the deeper one where its anchors leave at least 1 % less residual (:data:`DEEPER_MARGIN`).
A second search and two recoveries cost about as much as a refresh's anchor step again, so the
choice is made again only once the documents seen have grown :data:`REDECIDE_GROWTH`-fold (the
refreshes between search the set chosen last): about seven times over a stream of 100,000 documents. The choice is part of the
refresh state (checkpoint and lineage), so resumed and scaled-out runs search as the sequential one.
"""

from __future__ import annotations

import numpy as np

from .l2_recovery import recover_l2
from .separability import ROWS_AT_ONCE, most_frequent_words, squared_residuals
from .statistics_view import normalised_rows

WIDER = 2  # the wider candidate set reaches this many times deeper into the frequency ranking than the cap
RESIDUAL_WORDS = 1000  # the residual is measured over this many of the most frequent words
REDECIDE_GROWTH = 2.0  # the choice is made again once the documents seen have grown this much since the last
DEEPER_MARGIN = 0.01  # the deeper set is kept only where its anchors leave at least this much less residual: where
# the sets differ by a few words so do their residuals, by noise (20 Newsgroups K = 50, alpha 0.03, 5,000 documents:
# 6 more words, 0.3 % less residual, L1 0.432 against the cap's 0.382 after refinement); on separable streams the
# deeper set's residual was 2-24 % lower at 20,000 documents (2 % at K = 50, alpha 0.1) and 9-43 % at 50,000


class CandidateDepth:
    """The candidate set the last choice kept (``widened``: the deeper one) and the documents
    seen when it was made."""

    def __init__(self):
        self.widened = False
        self.decided_at = 0

    def anchors(self, view, search, cap: int | None, chooses: bool, n_docs: int, min_df: int) -> np.ndarray:
        """K anchor word ids: ``search(limit)`` (the anchor search with that candidate cap) with
        ``cap``, or :data:`WIDER` times ``cap`` where the last choice kept the deeper set; where
        ``chooses`` (the cap is the default one) and a choice is due, both are searched and the
        deeper set is kept where its anchors leave clearly less residual (:func:`recovery_residual`,
        :data:`DEEPER_MARGIN`). No choice
        while the eligible words (document frequency ``min_df``) fit under the cap: both sets
        would be the same."""
        if cap is None or not chooses:
            return search(cap)
        if n_docs < REDECIDE_GROWTH * self.decided_at or np.count_nonzero(
                np.asarray(view.document_frequency) >= min_df) <= cap:
            return search(WIDER * cap if self.widened else cap)
        capped, deeper = search(cap), search(WIDER * cap)
        self.decided_at = n_docs
        if np.array_equal(np.sort(capped), np.sort(deeper)):
            self.widened = False
            return capped
        words = most_frequent_words(view, RESIDUAL_WORDS)
        self.widened = bool(recovery_residual(view, deeper, words)
                            < (1.0 - DEEPER_MARGIN) * recovery_residual(view, capped, words))
        return deeper if self.widened else capped

    def state(self) -> dict:
        """The choice, for the checkpoint."""
        return {"widened": self.widened, "decided_at": self.decided_at}

    def load_state(self, state: dict | None) -> None:
        """Take up what :meth:`state` wrote (None: a checkpoint from before the choice, which searched the cap)."""
        if state is not None:
            self.widened, self.decided_at = bool(state["widened"]), int(state["decided_at"])


def recovery_residual(view, anchors: np.ndarray, words: np.ndarray, tol: float = 1e-5, max_iter: int = 500) -> float:
    """RecoverL2's mass-weighted mean squared residual over ``words``: ``sum_i p_i ||Qbar_i - C_i
    Qbar_S||^2 / sum_i p_i``, C_i the simplex weights solved from the anchors' rows ``Qbar_S``."""
    anchor_rows = normalised_rows(view, np.asarray(anchors, dtype=np.int64))
    products = np.empty((words.size, anchor_rows.shape[0]))
    for s in range(0, words.size, ROWS_AT_ONCE):
        products[s:s + ROWS_AT_ONCE] = normalised_rows(view, words[s:s + ROWS_AT_ONCE]) @ anchor_rows.T
    weights, _ = recover_l2(anchor_rows, products, None, tol, max_iter, rows=np.arange(words.size))
    squared, _ = squared_residuals(view, words, weights, products, anchor_rows)
    mass = np.asarray(view.word_mass, dtype=np.float64)[words]
    return float(squared @ mass / max(mass.sum(), 1e-300))
