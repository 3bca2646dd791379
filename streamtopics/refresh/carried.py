"""The refinement's work kept from one refresh to the next (docs/design.md, "Refinement").

Refining from the anchor seed at every refresh (KL-tEM, then CVB0 sweeps over the reservoir,
:func:`~streamtopics.refresh.refinement.refine_topics`) throws its work away: a stream refreshing
every 5,000 documents spent 95 % of its time there. :class:`CarriedRefinement` keeps the CVB0
shares of the reservoir's fitted documents instead, so each refresh works on what is new and the
sweeps add up over the stream the way batch Gibbs' iterations do (incremental inference over a
reservoir: Canini, Shi & Griffiths 2009). A carried refresh (:func:`refine_carried`):

1. finds the fitted documents the carried state holds (same key hash, same content: a document a
   replaced vocabulary slot changed is new again);
2. lines the carried topics up with the new anchor seed (Hungarian matching on L1), so the topic
   ids the alignment step continues follow the anchors; a carried topic farther than
   :data:`RESEED_L1` from its seed topic seeds the new documents from the seed's column;
3. places the new documents' first shares from the carried topics, then sweeps every fitted
   document :data:`OLD_SWEEPS` times and the new ones :data:`NEW_SWEEPS` times in all.

The anchors stay the seed. While the burn-in lasts (docs/design.md, "Topic identity") nothing is
carried: every refresh refines from the anchor seed exactly as with ``refine_carry=False``
(:func:`~streamtopics.refresh.steps.refine`), since the young stream's topics still form and the
seed improves fastest. From the refresh after the burn-in's end the shares are carried, so topics
keep their ids while the reservoir fills (an archive replay never fills it): restarting at every
refresh re-split them (Israel with the Middle East or apart, cars with bikes), and the events
benchmark's shuffled 20 Newsgroups kept 87.5 % of its announced ids against 100 % carried
(BENCHMARKS.md, "Topic identity"), and 20,000-document Gibbs-truth streams refreshed every 2,000
(``python -m benchmarks.carried_refinement --documents 20000 --every 2000``, 2026-12-07) ended at
L1 0.226 against 0.351 (20 Newsgroups K = 20), 0.205 against 0.220 (K = 50, alpha 0.03), Reuters K
= 50 level (0.342). Carried shares put two new subjects into the one column the old topics leave
free, so a refresh that placed anchors for emerging subjects (:mod:`~streamtopics.refresh.emerging`)
restarts from the seed (``new_subjects``).
A forgetting model (``half_life``) waits for a full reservoir as before: until then its reservoir
forgets nothing while its seed does, and carried shares held a newborn subject back
(tests/test_drift.py's full vocabulary: it was called found). The first refresh of a full reservoir
restarts whatever was carried (``CarriedRefinement.filling``): a state carried from a young
stream's seed did not give way to a later, better seed under the challenge below (20 Newsgroups K =
50: L1 0.270 against 0.235 at 100,000 documents; its restart at 45,000 went 0.387 -> 0.271 and
lost), so from that refresh on a stream refines as when carrying waited for a full reservoir. As
:func:`challenge_due` says, a restart challenges the carried candidate whenever the documents seen
have grown :data:`CHALLENGE_GROWTH`-fold since the last restart (and replaces it when too few
carried documents remain, :data:`MIN_KEPT`). The one whose fitted documents' training
log-likelihood is higher (:meth:`~streamtopics.refresh.collapsed.CollapsedShares.log_likelihood`;
the restart needs :data:`MARGIN` more) is published and carried on. That criterion ordered the two
as their distance to the truth did in 86 % of 94 pairs on seven Gibbs-truth streams; the held-out
completion score of the refinement's early stop did not (BENCHMARKS.md, "Carried refinement"), and
the likelihood of only the documents new to the carried state favoured the restart at every
challenge (by 0.02-0.05 nats a token; 20 Newsgroups K = 50 at 100,000: 0.302). Carrying while the
reservoir filled with a challenge at every refresh cost both a restart and a carried candidate per
refresh (the README's Reuters replay: 33.8 s of refreshes against 27.0 s) and ended farther from
the truth at 100,000 documents on three of the seven streams (20 Newsgroups K = 40: L1 0.243
against 0.189), level on the others.

The background column keeps the recovery's distribution through the sweeps (in a challenging
restart's too: :meth:`~streamtopics.refresh.collapsed.CollapsedShares.hold`). CVB0 treats it
as one more topic, and carried over many refreshes it became one: on a 600-document stream of 24
words it took four fruit words, so a document about apples came out as sport once the
background's share was dropped; on a separable stream (the seed papers' setting) the topics ended
at L1 0.30 from the truth instead of the restarts' 0.19 (0.19 with the background held).

On by default (``refine_carry``): on seven Gibbs-truth streams of 100,000 documents refreshed
every 5,000 (BENCHMARKS.md, "Carried refinement") its topics ended closer to the truth than the
restarts' on five (20 Newsgroups K = 40: L1 0.189 against 0.282; K = 50: 0.241 against 0.346;
Reuters K = 50: 0.178 against 0.230) and level on the two at K = 100, where the anchor seed improves
faster than the sweeps follow and one refresh moved a restart's L1 by 0.036: over three draws of
each, 20 Newsgroups 0.860 against 0.857, Debian (alpha 0.03) 0.462 against 0.453. On real text
(Debian descriptions, 57,092 training documents refreshed every 2,500) held-out NPMI 0.140
against 0.138 at K = 50 and 0.118 against 0.127 at K = 100.

The held-out documents are chosen by key hash (every :data:`HOLDOUT_EVERY`-th value, the copies of
a repeated document counted on from it: :func:`held_out_mask`), not by position, so a document
stays fitted or held out while it stays in the reservoir. The state is
part of the checkpoint (:meth:`CarriedRefinement.state_dict`); the documents' topic counts and the
topic-word counts are summed afresh from the shares at every refresh, so a resumed run refines
exactly as the uninterrupted one. It travels with the :class:`~streamtopics.refresh.lineage.Lineage`:
the Dask replay's client and a scale-out refresher carry it from round to round (one that takes
over the lease from another starts again from the seed).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.optimize import linear_sum_assignment

from ..text.documents import DocumentBatch
from .alignment import l1_distances
from .collapsed import CollapsedShares
from .refinement import DOCUMENT_PRIOR, HOLDOUT_EVERY, Refinement, recovery_columns, refine_topics, refined_recovery

NEW_SWEEPS = 5  # CVB0 sweeps a document gets at the first refresh that fits it
OLD_SWEEPS = 2  # sweeps every fitted document gets at every carried refresh
RESEED_L1 = 1.0  # a carried topic this far (L1) from its seed topic seeds the new documents from the seed
CHALLENGE_GROWTH = 1.25  # after the reservoir is full, a restart challenges once the documents seen have grown
# this much since the last (1.5 left 20 Newsgroups K = 100 at L1 0.880 against the restarts' 0.829 at 100,000
# documents: its anchor seed improves fast while the reservoir of 16,000 is swept; BENCHMARKS.md, "Carried refinement")
MARGIN = 0.01  # log-likelihood per token the restart must gain over the carried refinement to replace it: with
# 0.002 a restart gaining 0.004 replaced carried topics closer to the truth (20 Newsgroups K = 40 at 50,000: L1 0.204
# -> 0.239); on seven Gibbs-truth streams 0.01 ended level or closer at 100,000 (K = 50 0.235 against 0.272, K = 100
# 0.827 against 0.842, Debian K = 50 0.459 against 0.453), while the restarts that mattered gained 0.012-0.044
MIN_KEPT = 0.5  # the least share of the fitted documents the carried state must hold to be carried on


class CarriedRefinement:
    """The CVB0 shares of the last refresh's fitted documents: per document its key hash,
    content fingerprint and first entry, per entry its topic ids and weights; alpha's scale and
    the documents seen at the last restart. Empty until the first refinement."""

    def __init__(self):
        self.keys: np.ndarray | None = None
        self.fingerprints: np.ndarray | None = None
        self.indptr: np.ndarray | None = None
        self.topic_ids: np.ndarray | None = None
        self.weights: np.ndarray | None = None
        self.alpha_scale = 1.0
        self.restarted_at = 0  # documents seen at the last restart
        self.filling = False  # kept while the reservoir filled: the first refresh of a full one restarts

    def holds(self, n_columns: int) -> bool:
        """Whether there are shares over ``n_columns`` topics (and background) to carry on."""
        return self.keys is not None and self.topic_ids.shape[0] > 0 and int(self.topic_ids.max()) < n_columns

    def keep(self, shares: CollapsedShares, fingerprints: np.ndarray, alpha_scale: float) -> None:
        """Carry ``shares`` (of documents with content ``fingerprints``) on to the next refresh."""
        self.keys, self.fingerprints = shares.batch.keys.copy(), fingerprints
        self.indptr, self.topic_ids, self.weights = shares.batch.indptr.copy(), shares.topic_ids, shares.weights
        self.alpha_scale = float(alpha_scale)

    def state_dict(self) -> tuple[dict, dict | None]:
        """``(arrays, meta)`` for the checkpoint (nothing while empty)."""
        if self.keys is None:
            return {}, None
        arrays = {"keys": self.keys, "fingerprints": self.fingerprints, "indptr": self.indptr,
                  "topic_ids": self.topic_ids, "weights": self.weights}
        return arrays, {"alpha_scale": self.alpha_scale, "restarted_at": self.restarted_at, "filling": self.filling}

    def load_state_dict(self, arrays: dict, meta: dict | None) -> None:
        """Take up what :meth:`state_dict` wrote (None: stay empty)."""
        if meta is None:
            return
        self.keys, self.fingerprints, self.indptr = arrays["keys"], arrays["fingerprints"], arrays["indptr"]
        self.topic_ids, self.weights = arrays["topic_ids"], arrays["weights"]
        self.alpha_scale, self.restarted_at = float(meta["alpha_scale"]), int(meta["restarted_at"])
        self.filling = bool(meta.get("filling", False))  # files before it carried only full reservoirs


def refine_carried(recovery, reservoir: DocumentBatch, carried: CarriedRefinement, n_topics: int,
                   background_words: np.ndarray | None, n_docs: int, config, full: bool,
                   new_subjects: bool = False, from_seed: bool = False) -> tuple:
    """The refinement step with ``carried`` state (see the module docstring): the recovery
    refined over the ``reservoir`` and the :class:`~streamtopics.refresh.refinement.Refinement`
    run, ``carried`` moved on. ``n_docs``: the documents seen, for the challenge schedule;
    ``full``: whether the reservoir is full (the first refresh of a full one restarts);
    ``new_subjects``: the seed has anchors placed for emerging subjects (:mod:`~streamtopics.refresh.emerging`),
    and a restart from it replaces the carried refinement: the carried shares had put the new
    subjects into one column, and restarts near them lost the challenge (planted stream: one at L1
    0.34 and 0.25 from the two by 0.02 nats a token, one at 0.21 and 0.15 by -0.003); ``from_seed``:
    restart from the seed whatever is carried, and keep its shares (``refine_fill_restarts=False`` in
    the burn-in). With ``config.refine_fill_restarts`` off no restart challenges the carried state
    before the reservoir is ``full``."""
    seed = recovery_columns(recovery)
    smoothing = config.refine_smoothing
    held = held_out_mask(reservoir.keys)
    fit = np.flatnonzero(~held)
    fingerprints = document_fingerprints(reservoir)[fit]
    carry_on = not from_seed and carried.holds(seed.shape[1]) and not (full and carried.filling)
    carried.filling = not full
    candidate = _carry(seed, reservoir, fit, fingerprints, carried, n_topics, smoothing) if carry_on else None
    challenged = challenge_due(carried, n_docs) and (full or config.refine_fill_restarts)
    restart = None
    if candidate is None or challenged or new_subjects:
        restart = refine_topics(seed, reservoir, config.refine_iterations, smoothing=smoothing,
                                sweeps=config.refine_sweeps, held_out=held, hold_from=n_topics)
        carried.restarted_at = n_docs
    if candidate is not None:
        shares, order = candidate
        kept = Refinement(shares.topic_word(smoothing), None, sweeps=OLD_SWEEPS, shares=shares, source="carried")
        if restart is not None:
            gain = (restart.shares.log_likelihood(DOCUMENT_PRIOR, smoothing)
                    - shares.log_likelihood(DOCUMENT_PRIOR, smoothing))
            if new_subjects or gain > MARGIN:
                restart.source = "restart (new subjects)" if new_subjects else "restart (won the challenge)"
                order = None
            else:
                kept.source, kept.held_out = "carried (kept over a restart)", restart.held_out
                restart = None
        if restart is None:
            refined, scale = refined_recovery(recovery, kept.topic_word, n_topics, background_words,
                                              kept.held_out if kept.held_out is not None else carried.alpha_scale)
            carried.keep(shares, fingerprints[order], scale)
            return refined, kept
    refined, scale = refined_recovery(recovery, restart.topic_word, n_topics, background_words, restart.held_out)
    carried.keep(restart.shares, fingerprints, scale)
    return refined, restart


def challenge_due(carried: CarriedRefinement, n_docs: int) -> bool:
    """Whether a restart challenges the carried refinement at this refresh: once the documents
    seen have grown :data:`CHALLENGE_GROWTH`-fold since the last restart, so that restarts grow
    rarer as the stream goes on."""
    return n_docs >= CHALLENGE_GROWTH * carried.restarted_at


def _carry(seed: np.ndarray, reservoir: DocumentBatch, fit: np.ndarray, fingerprints: np.ndarray,
           carried: CarriedRefinement, n_topics: int, smoothing: float) -> tuple[CollapsedShares, np.ndarray] | None:
    """The carried candidate: shares over the fitted documents (the reservoir's documents ``fit``,
    with content ``fingerprints``: those carried first, then the new ones) after this refresh's
    sweeps, and the fitted documents' order in them; None when the carried state holds too few
    of them (:data:`MIN_KEPT`)."""
    kept, previous = _match(carried.keys, carried.fingerprints, reservoir.keys[fit], fingerprints)
    if kept.size < MIN_KEPT * fit.size:
        return None
    order = np.concatenate([kept, np.setdiff1d(np.arange(fit.size), kept, assume_unique=True)])
    batch = reservoir.select(fit[order])
    ids, weights = _carried_entries(carried.indptr, previous, carried.topic_ids, carried.weights, batch.indices.size)
    shares = CollapsedShares.carried(batch, ids, weights, seed.shape[1], seed, placed=len(kept))
    carried_topics = shares.topic_word(smoothing)
    column_of = _line_up(carried_topics, seed, n_topics)
    shares.relabel(column_of)
    topics = np.empty_like(carried_topics)
    topics[:, column_of] = carried_topics
    far = np.abs(topics - seed).sum(axis=0) > RESEED_L1
    far[n_topics:] = False  # the background only places the new documents' first shares: the sweeps hold it
    topics[:, far] = seed[:, far]
    shares.place_rest(topics)
    shares.hold(n_topics, seed)
    for _ in range(OLD_SWEEPS):
        shares.sweep(DOCUMENT_PRIOR, smoothing)
    for _ in range(NEW_SWEEPS - OLD_SWEEPS):
        shares.sweep(DOCUMENT_PRIOR, smoothing, first=len(kept))
    return shares, order


def _line_up(carried_topics: np.ndarray, seed: np.ndarray, n_topics: int) -> np.ndarray:
    """The seed column each carried column takes: topics matched to the seed's topics by least
    total L1 (Hungarian), the background (a column past ``n_topics``) staying in place."""
    distance = l1_distances(carried_topics[:, :n_topics], seed[:, :n_topics])
    rows, columns = linear_sum_assignment(distance)
    column_of = np.arange(seed.shape[1])
    column_of[rows] = columns
    return column_of


def _match(previous_keys, previous_prints, keys, prints) -> tuple[np.ndarray, np.ndarray]:
    """The documents of ``keys`` / ``prints`` found among the previous ones (equal key hash and
    fingerprint; duplicates paired in order): their indices, in order, and the previous ones'.
    Each document is identified by its key, its fingerprint and how many equal ones precede it,
    so the identities are unique and one sorted intersection pairs them."""
    _, found, previous = np.intersect1d(_identities(keys, prints), _identities(previous_keys, previous_prints),
                                        assume_unique=True, return_indices=True)
    order = np.argsort(found, kind="stable")
    return found[order].astype(np.int64), previous[order].astype(np.int64)


def _identities(keys: np.ndarray, prints: np.ndarray) -> np.ndarray:
    """``(key, fingerprint, occurrence)`` of each document as one opaque 24-byte value."""
    columns = np.column_stack([keys, prints, _occurrences(keys, prints)]).astype(np.uint64)
    return np.ascontiguousarray(columns).view(np.dtype((np.void, 24))).ravel()


def _occurrences(*columns: np.ndarray) -> np.ndarray:
    """How many documents before each (in batch order) equal it in every one of ``columns``."""
    order = np.lexsort(columns[::-1])  # stable: equal documents stay in order
    starts = np.zeros(order.size, bool)
    starts[:1] = True
    for column in columns:
        ordered = column[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(order.size), 0))
    occurrence = np.empty(order.size, np.uint64)
    occurrence[order] = np.arange(order.size) - first
    return occurrence


@njit(cache=True, nogil=True)
def _carried_entries(indptr, documents, topic_ids, weights, size):
    """Rows for ``size`` entries, the first holding the kept topic ids and weights of the entries
    of ``documents`` (in their order) of shares whose documents ``indptr`` delimits, one copy per
    document; the rest left for the new documents' shares."""
    ids = np.empty((size, topic_ids.shape[1]), topic_ids.dtype)
    kept = np.empty((size, weights.shape[1]), weights.dtype)
    at = 0
    for d in documents:
        n = indptr[d + 1] - indptr[d]
        ids[at:at + n] = topic_ids[indptr[d]:indptr[d + 1]]
        kept[at:at + n] = weights[indptr[d]:indptr[d + 1]]
        at += n
    return ids, kept


def held_out_mask(keys: np.ndarray) -> np.ndarray:
    """The documents the refinement holds out: those whose key hash plus the number of equal keys
    before them is a multiple of :data:`HOLDOUT_EVERY` (uniform hashes: a tenth of the documents,
    and a tenth of the copies of a repeated one: by key alone a stream of eight sentences, each
    repeated, held one of them out whole and the refinement never saw it), or every tenth by
    position when the keys would hold out none or all."""
    held = (keys + _occurrences(keys)) % np.uint64(HOLDOUT_EVERY) == 0
    if held.all() or not held.any():
        held = np.zeros(keys.size, bool)
        held[::HOLDOUT_EVERY] = True
    return held


def document_fingerprints(batch: DocumentBatch) -> np.ndarray:
    """A 64-bit hash of each document's word ids and counts (FNV-1a over their bits)."""
    return _fingerprints(batch.indptr, batch.indices, np.ascontiguousarray(batch.counts, np.float64))


@njit(cache=True, nogil=True)
def _fingerprints(indptr, indices, counts):
    bits = counts.view(np.uint64)
    prime = np.uint64(1099511628211)
    out = np.empty(indptr.size - 1, np.uint64)
    for d in range(indptr.size - 1):
        h = np.uint64(14695981039346656037)
        for p in range(indptr[d], indptr[d + 1]):
            h = (h ^ np.uint64(indices[p])) * prime
            h = (h ^ bits[p]) * prime
        out[d] = h
    return out
