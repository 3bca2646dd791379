"""Anchors for emerging subjects: words whose rate jumped in the newest documents (docs/design.md,
"Topic identity").

Exact sums describe the whole stream, so a subject that starts late is a small share of them: its
words' rows still mix it with the old topics, and FastAnchorWords took its anchor only about
17,000 documents after it started (the events benchmark's planted stream, refreshed every 5,000).
Its words' *rates* tell at once. At each refresh after the burn-in, :meth:`EmergingAnchors.apply`
compares the reservoir's documents since the last refresh (at least :data:`MIN_RECENT`, by their
stamps) with the older ones:

1. a word *rises* when its document rate grew :data:`RISE`-fold, in at least
   :data:`MIN_DOCUMENTS` of the recent documents (:func:`word_rise`);
2. the rising words fall into subjects by the rising words they co-occur with (cosine of those
   profiles at least :data:`SAME_SUBJECT`); each subject's lead is its most exclusive word among
   those in :data:`LEAD_DOCUMENTS` recent documents (:func:`subject_leads`);
3. a subject is already held when an anchor whose own rate rose :data:`COVERING_RISE`-fold is most
   alike it; it continues a topic when the lift of its lead's recent documents
   (:func:`lift_column`), over the words that did not rise, is :data:`CONTINUES` alike a topic of
   the last snapshot (a drift onto new words: cosine 0.97; a subject whose topic formed a refresh
   before); and a subject gets no anchor while a topic of the last snapshot :data:`DRIFT_ALIKE`
   alike it is losing words (one of its :data:`DRIFT_WORDS` most probable fell :data:`FALL`-fold:
   that topic's drift under way), the head words of the topics already announced stopped aside
   (exact sums keep their fall for good, and the other topics share those words: a stream whose
   stops came first never gave its later starts an anchor). Any topic losing words held every subject back until
   2026-12-07: on the staged 20 Newsgroups stream the old newsgroups, diluted by the new ones,
   always had one ("hockey" fell 2-fold, "guns" 2.4-fold);
4. each other subject gets an anchor in place of the anchor the others explain best (the least
   leave-one-out residual of its row among the anchors' rows): the one placed for it at the last
   refresh while alike, else its lead; and its topic's seed is that lift, not the recovery's
   column, which over exact sums mixes a young subject with the old topics.

A refresh that placed an anchor refines from the seed again (a restart,
:func:`~streamtopics.refresh.carried.refine_carried`): the carried shares had put the new subjects
into the one column the old topics left free, both of them (planted stream, seed 1). Measured
(``python -m benchmarks.events --streams planted-20newsgroups --seed 1 2 3 4 5``, BENCHMARKS.md
"Topic identity"): the planted starts born within 2 refreshes and matched went from 3 of 10 to 9
of 10 (10 of 10 within 3), births' precision from 0.5 to 1.0; with the recovery's columns as the
seed 5 of 10 and 0.89. Comparing the words around the lead (common words left in) with the topics
could not tell a drift from a start (cosine 0.44-0.89 against 0.50-0.68). Exact sums only: a
forgetting model's sums follow new subjects by themselves.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..text.documents import DocumentBatch
from .statistics_view import normalised_rows

RISE = 3.0  # a rising word's recent document rate over its older one
MIN_DOCUMENTS = 30  # ... in at least this many recent documents: by chance (an older rate of 10) about 1e-7 a word
LEAD_DOCUMENTS = 50  # a subject's lead (the word that may become its anchor) is in at least this many
PROFILE_RISE = 2.0  # the words of the co-occurrence profiles: risen this much, in PROFILE_DOCUMENTS recent documents
PROFILE_DOCUMENTS = 10
SAME_SUBJECT = 0.3  # two rising words whose profiles' cosine reaches this are one subject
COVERING_RISE = 1.5  # an anchor whose rate rose this much holds the subject it is most alike (if SAME_SUBJECT alike)
DRIFT_WORDS = 20  # a topic is losing its words when one of this many of its most probable words fell: its recent
# rate below 1 / FALL of its older one, and by FALL_NOISE standard deviations of the count its older rate expects
FALL_NOISE = 4.0  # 3: a spare column's head word fell from 92 documents expected to 59 by chance (the test's seed 5)
#: A word falls this much. New words rise at once (from none) while the words they replace fade as the drift goes
#: on: half-way through tests/test_drifting_subject.py's drift its new words had risen 3-fold and no old one had
#: fallen 3-fold. A start takes little from the others: the planted stream's topics' words fell by about a tenth.
FALL = 1.5
#: A lead whose lift column (:func:`lift_column`), over the words that did not rise, is this alike (cosine) to a
#: topic of the last snapshot continues that topic: it drifts, or the subject has its topic already. Measured:
#: tests/test_drifting_subject.py's drift 0.97 at its start; the planted stream's new subjects 0.51-0.62, a subject
#: whose topic had formed a refresh before 0.81-0.83.
CONTINUES = 0.75
#: A subject is held back while a topic of the last snapshot at least this alike it (the same cosine) is losing
#: words: that topic's drift under way. Measured: the drifting stream's rising words ("bills") 0.52 alike the
#: drifting topic, and most alike another (0.65); the staged stream's baseball 0.61 alike the diluted hockey topic.
DRIFT_ALIKE = 0.3
MIN_RECENT = 1000  # the recent documents: those since the last refresh, or since earlier ones until this many


class RecentWords:
    """How each word's document rate in the reservoir's recent documents (:func:`recent_documents`)
    compares with the older ones, and the subjects rising there: worked out once per refresh for
    the emerging-subjects and the moving-topics steps (:mod:`~streamtopics.refresh.moving`)."""

    def __init__(self, reservoir: DocumentBatch, recent: np.ndarray, n_words: int):
        self.reservoir, self.recent, self.n_words = reservoir, recent, n_words
        self.in_recent, self.in_older = document_frequencies(reservoir, recent, n_words)
        self.n_recent, self.n_older = np.count_nonzero(recent), np.count_nonzero(~recent)
        self.rise = word_rise(self.in_recent, self.in_older, self.n_recent, self.n_older)
        self.falling = falling_words(self.rise, self.in_recent, self.in_older * self.n_recent / self.n_older)
        self.rising = np.flatnonzero((self.rise >= RISE) & (self.in_recent >= MIN_DOCUMENTS))
        self.profile_words = np.flatnonzero((self.rise >= PROFILE_RISE) & (self.in_recent >= PROFILE_DOCUMENTS))
        self._present = self._counts = self._leads = None
        self._lifts: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, reservoir: DocumentBatch | None, stamps: np.ndarray | None, n_words: int) -> "RecentWords | None":
        """The comparison over ``reservoir`` by its ``stamps``; None when they cannot tell recent from older."""
        recent = None if reservoir is None else recent_documents(stamps)
        return None if recent is None else cls(reservoir, recent, n_words)

    @property
    def counts(self) -> sp.csr_matrix:
        """Recent documents x words, the counts."""
        if self._counts is None:
            self._counts = word_counts(self.reservoir.select(np.flatnonzero(self.recent)), self.n_words)
        return self._counts

    @property
    def present(self) -> sp.csc_matrix:
        """Recent documents x words, 1 where the word is in the document."""
        if self._present is None:
            self._present = (self.counts > 0).astype(np.float64).tocsc()
        return self._present

    def lift(self, word: int) -> np.ndarray:
        """:func:`lift_column` of ``word``, computed once."""
        if word not in self._lifts:
            self._lifts[word] = lift_column(self.counts, self.present, word)
        return self._lifts[word]

    def leads(self) -> list[int]:
        """Positions (in :attr:`rising`) of the rising subjects' leads (:func:`subject_leads`)."""
        if self._leads is None:
            alike = profile_cosines(self.present, self.rising, self.profile_words) if self.rising.size else None
            self._leads = subject_leads(self.rising, self.rise, self.in_recent, alike) if self.rising.size else []
        return self._leads


class EmergingAnchors:
    """The anchor words the last refresh placed for emerging subjects (kept for them while alike),
    and those of the refresh in progress (:attr:`placed`)."""

    def __init__(self):
        self.words: list[str] = []
        self.placed: list[str] = []
        self.columns: dict[int, np.ndarray] = {}  # placed anchor id -> its subject's seed column (this refresh)

    def clear(self) -> None:
        """Nothing placed, nothing remembered (a refresh this step does not run at)."""
        self.words, self.placed, self.columns = [], [], {}

    def state(self) -> list[str]:
        return list(self.words)

    def load_state(self, words) -> None:
        self.words = list(words or [])

    def apply(self, anchors: np.ndarray, view, recent: RecentWords | None, words: list[str],
              previous_topics: np.ndarray, stopped: list[int] = ()) -> np.ndarray:
        """``anchors`` (word ids) with an anchor for each emerging subject they miss (see the module
        docstring); ``view``: the statistics (the anchors' rows), ``recent`` the reservoir's recent
        words (None: it cannot tell), ``words`` the vocabulary's words, ``previous_topics`` the last
        snapshot's topic-word matrix and ``stopped`` the columns of its topics announced stopped
        (:data:`~streamtopics.refresh.lineage.STOPPED_LATELY`), whose falling words hold no anchor back.
        Sets :attr:`placed` and :attr:`columns`, and remembers the words placed for the next refresh."""
        self.placed, self.columns = [], {}
        if recent is None:
            self.clear()
            return anchors
        falling, rising, profile_words = recent.falling, recent.rising, recent.profile_words
        if len(stopped):  # the words a stopped subject took away are no drift under way
            falling = falling & ~_head_words(previous_topics[:, list(stopped)], falling.size)
        if rising.size == 0:
            self.clear()
            return anchors
        losing = _losing_words(previous_topics, falling)
        anchors = np.array(anchors, dtype=np.int64)
        index = {w: i for i, w in enumerate(words)}
        kept = np.array([index[w] for w in self.words if w in index and index[w] < recent.n_words
                         and recent.in_recent[index[w]] >= MIN_DOCUMENTS], dtype=np.int64)
        alike = profile_cosines(recent.present, np.concatenate([rising, anchors, kept]), profile_words)
        leads = recent.leads()
        held = _held_subjects(leads, anchors, recent.rise, recent.in_recent,
                              alike[rising.size: rising.size + anchors.size])
        placed, keeping = [], set()
        for lead in leads:
            if lead in held:
                keeping.update(held[lead])
                continue
            cosines = topic_cosines(recent.lift(int(rising[lead])), previous_topics, profile_words)
            if (cosines[losing] >= DRIFT_ALIKE).any():
                continue  # a drift under way of a topic alike it: the subject's words are that topic's new ones
            alike_kept = alike[rising.size + anchors.size:, lead]
            if alike_kept.size and alike_kept.max() >= SAME_SUBJECT:
                placed.append(int(kept[int(np.argmax(alike_kept))]))  # the anchor it had at the last refresh
            elif cosines.max(initial=0.0) < CONTINUES:
                placed.append(int(rising[lead]))
        placed = list(dict.fromkeys(w for w in placed if w not in set(anchors.tolist())))
        for word in placed:
            residual = _leave_one_out_residuals(normalised_rows(view, anchors))
            residual[sorted(keeping)] = np.inf
            residual[np.isin(anchors, placed)] = np.inf
            slot = int(np.argmin(residual))
            if not np.isfinite(residual[slot]):
                break
            anchors[slot] = word
        placed = [w for w in placed if w in set(anchors.tolist())]
        self.columns = {w: recent.lift(w) for w in placed}
        self.placed = [words[w] for w in placed]
        self.words = list(self.placed)
        return anchors


def recent_documents(stamps: np.ndarray | None, min_recent: int = MIN_RECENT) -> np.ndarray | None:
    """The mask of the reservoir's recent documents: the newest stamp's (those since the last
    refresh), or the newest stamps' until ``min_recent``; None when the stamps cannot split the
    reservoir into recent documents and at least as many older ones."""
    if stamps is None or len(stamps) < 2 * min_recent:
        return None
    stamps = np.asarray(stamps)
    values, counts = np.unique(stamps, return_counts=True)
    from_newest = np.cumsum(counts[::-1])
    enough = int(np.searchsorted(from_newest, min_recent))
    if enough >= values.size:
        return None
    recent = stamps >= values[::-1][enough]
    return recent if np.count_nonzero(recent) <= np.count_nonzero(~recent) else None


def falling_words(rise: np.ndarray, in_recent: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """The mask of the words whose recent rate fell FALL-fold, by FALL_NOISE standard deviations of
    the recent count their older rate ``expected``."""
    return (rise <= 1.0 / FALL) & (expected - in_recent >= FALL_NOISE * np.sqrt(expected))


def word_rise(in_recent: np.ndarray, in_older: np.ndarray, n_recent: int, n_older: int) -> np.ndarray:
    """Each word's document rate in the ``n_recent`` recent documents over its rate in the
    ``n_older`` others (a word in none of those counts as in half of one)."""
    return (in_recent / n_recent) / (np.maximum(in_older, 0.5) / n_older)


def document_frequencies(batch: DocumentBatch, recent: np.ndarray, n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """How many of the ``recent`` documents of ``batch`` (a mask) each word is in, and how many of
    the others (words past ``n_words`` left out)."""
    in_recent_document = np.repeat(recent, np.diff(batch.indptr))
    known = batch.indices < n_words
    count = lambda mask: np.bincount(batch.indices[known & mask], minlength=n_words).astype(np.float64)
    return count(in_recent_document), count(~in_recent_document)


def lift_column(counts: sp.csr_matrix, present: sp.csc_matrix, word: int) -> np.ndarray:
    """A seed for the subject of ``word``: the word distribution of the recent documents it is in,
    less that of all recent documents, its positive part normalised (``counts``: recent documents x
    words, ``present`` the same as 0/1). Recovery over exact sums mixes a young subject with the
    old topics (the planted stream, 6,700 documents after its start: L1 1.23 and 1.16 from the two
    new subjects); this was 0.60 and 0.64."""
    everywhere = np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()
    around = np.asarray(counts[present[:, word].nonzero()[0]].sum(axis=0), dtype=np.float64).ravel()
    lift = np.maximum(around / max(around.sum(), 1e-300) - everywhere / max(everywhere.sum(), 1e-300), 0.0)
    return lift / lift.sum() if lift.sum() > 0 else lift


def topic_cosines(lift: np.ndarray, topics: np.ndarray, left_out: np.ndarray) -> np.ndarray:
    """The cosine of a subject's ``lift`` column with each column of ``topics`` (V x K), over the
    words not ``left_out`` (those that rose)."""
    columns = np.zeros((lift.size, topics.shape[1]))
    rows = min(lift.size, topics.shape[0])
    columns[:rows] = topics[:rows]
    columns[left_out] = 0.0
    lift = lift.copy()
    lift[left_out] = 0.0
    return (columns.T @ lift) / np.maximum(np.linalg.norm(columns, axis=0) * np.linalg.norm(lift), 1e-30)


def continued_topic(lift: np.ndarray, topics: np.ndarray, left_out: np.ndarray) -> tuple[int, float]:
    """The column of ``topics`` (V x K) most alike a subject's ``lift`` column over the words not
    ``left_out`` (:func:`topic_cosines`), and that cosine: CONTINUES or more, the subject's words are
    mostly those of a topic the model holds."""
    cosines = topic_cosines(lift, topics, left_out)
    best = int(np.argmax(cosines)) if cosines.size else 0
    return best, float(cosines[best]) if cosines.size else 0.0


def word_counts(batch: DocumentBatch, n_words: int) -> sp.csr_matrix:
    """Documents x words, the counts (words past ``n_words`` left out)."""
    matrix = sp.csr_matrix((batch.counts, batch.indices, batch.indptr),
                           shape=(len(batch), max(n_words, int(batch.indices.max(initial=0)) + 1)))
    return matrix[:, :n_words].tocsr()


def profile_cosines(present: sp.csc_matrix, ids: np.ndarray, profile_words: np.ndarray) -> np.ndarray:
    """Cosines between the words ``ids``' profiles: over ``profile_words``, the share of their
    recent documents each of those is in (a word's own column left out)."""
    counts = np.asarray((present[:, ids].T @ present[:, profile_words]).todense(), dtype=np.float64)
    counts[ids[:, None] == profile_words[None, :]] = 0.0
    norms = np.linalg.norm(counts, axis=1)
    return (counts @ counts.T) / np.maximum(np.outer(norms, norms), 1e-30)


def subject_leads(rising: np.ndarray, rise: np.ndarray, in_recent: np.ndarray, alike: np.ndarray) -> list[int]:
    """Positions (in ``rising``) of each subject's lead: the words in at least LEAD_DOCUMENTS recent
    documents, the most exclusive first (the share of the recent rate the older rate leaves
    unexplained, 1 - 1 / rise, to two decimals; then the more frequent), each a new subject unless
    SAME_SUBJECT alike to a lead before it. By frequency alone 20 Newsgroups' "space" led its
    subject (a rise of 3.3; "nasa" 14) and the seed's column from it lay 1.48 from the subject."""
    order = np.lexsort((-in_recent[rising], -np.round(1.0 - 1.0 / rise[rising], 2)))
    leads: list[int] = []
    for i in order:
        if in_recent[rising[i]] >= LEAD_DOCUMENTS and not any(alike[i, j] >= SAME_SUBJECT for j in leads):
            leads.append(int(i))
    return leads


def _held_subjects(leads: list[int], anchors: np.ndarray, rise: np.ndarray, in_recent: np.ndarray,
                   alike: np.ndarray) -> dict[int, list[int]]:
    """The subjects an anchor holds: lead -> positions of the anchors (risen COVERING_RISE-fold, in
    PROFILE_DOCUMENTS recent documents) most alike that lead, SAME_SUBJECT alike or more."""
    held: dict[int, list[int]] = {}
    if not leads:
        return held
    for slot, anchor in enumerate(anchors):
        if rise[anchor] >= COVERING_RISE and in_recent[anchor] >= PROFILE_DOCUMENTS:
            lead = max(leads, key=lambda j: alike[slot, j])
            if alike[slot, lead] >= SAME_SUBJECT:
                held.setdefault(lead, []).append(slot)
    return held


def _losing_words(topics: np.ndarray, falling: np.ndarray) -> np.ndarray:
    """Which of ``topics`` (V x K) have ``falling`` words among their DRIFT_WORDS most probable."""
    return falling[_head_ids(topics, falling.size)].any(axis=0)


def _head_words(topics: np.ndarray, n_words: int) -> np.ndarray:
    """The mask (over ``n_words``) of the words among the DRIFT_WORDS most probable of any of ``topics``."""
    mask = np.zeros(n_words, bool)
    mask[_head_ids(topics, n_words).ravel()] = True
    return mask


def _head_ids(topics: np.ndarray, n_words: int) -> np.ndarray:
    """Each topic's DRIFT_WORDS most probable words among the first ``n_words`` (DRIFT_WORDS x K)."""
    return np.argsort(-topics[:min(topics.shape[0], n_words)], axis=0, kind="stable")[:DRIFT_WORDS]


def _leave_one_out_residuals(rows: np.ndarray) -> np.ndarray:
    """Each row's squared distance from the span of the others, over its squared norm: for a
    Gram matrix G of independent rows, 1 / (G^-1)_kk / G_kk."""
    gram = rows @ rows.T
    inverse = np.linalg.pinv(gram, hermitian=True)
    diagonal = np.diag(inverse)
    return np.where(diagonal > 0, 1.0 / np.maximum(diagonal, 1e-300), 0.0) / np.maximum(np.diag(gram), 1e-300)
