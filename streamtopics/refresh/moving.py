"""Topics whose subject moves onto new words: a drift, which the stop rule must not take for a stop
(docs/design.md, "Topic identity").

Over exact sums a topic's column stays near where its subject was. When the subject drifts onto
words new to the stream, the newest documents stop using the column just as if the subject had
stopped (tests/test_drifting_subject.py's two exact-sums streams: without this, both announced
dead by :data:`~streamtopics.refresh.lineage.STOPPED_LATELY`). The rising words tell the two apart: in a
drift, a subject rising in the reservoir's recent documents (:mod:`~streamtopics.refresh.emerging`:
its lead and lift) co-occurs with the topic's words that neither rose nor fell, so its lift over
those words is :data:`~streamtopics.refresh.emerging.CONTINUES` alike the topic's column (those
streams: 0.88-0.94, against 0.03-0.07 with the other topics); after a stop nothing that rises
continues the topic. :meth:`MovingTopics.update` marks such a topic *moving* and keeps it so while
one of the words that led its subject is still in ``MIN_DOCUMENTS`` recent documents.
"""

from __future__ import annotations

import numpy as np

from ..text.documents import DocumentBatch
from .emerging import (CONTINUES, MIN_DOCUMENTS, PROFILE_DOCUMENTS, PROFILE_RISE, RISE, continued_topic,
                       document_frequencies, falling_words, lift_column, profile_cosines, recent_documents,
                       subject_leads, word_counts, word_rise)


class MovingTopics:
    """The topics whose subject is moving onto new words, by id, with the words that led it."""

    def __init__(self):
        self.leads: dict[int, list[str]] = {}

    def update(self, reservoir: DocumentBatch, stamps: np.ndarray | None, words: list[str], n_words: int,
               topic_ids: list[int], topic_word: np.ndarray) -> None:
        """Compare the ``reservoir``'s recent documents (by their ``stamps``) with the older ones
        against the last snapshot's topics (``topic_ids``, ``topic_word``; ``words`` the vocabulary's
        words, the first ``n_words`` counted): keep the moving topics whose leads are still used and
        add those a rising subject continues. Nothing is moving when the stamps cannot tell."""
        recent = recent_documents(stamps)
        if recent is None:
            self.leads = {}
            return
        in_recent, in_older = document_frequencies(reservoir, recent, n_words)
        n_recent, n_older = np.count_nonzero(recent), np.count_nonzero(~recent)
        index = {w: i for i, w in enumerate(words[:n_words])}
        self.leads = {t: lead_words for t, lead_words in self.leads.items() if t in topic_ids
                      and any(w in index and in_recent[index[w]] >= MIN_DOCUMENTS for w in lead_words)}
        rise = word_rise(in_recent, in_older, n_recent, n_older)
        rising = np.flatnonzero((rise >= RISE) & (in_recent >= MIN_DOCUMENTS))
        if rising.size == 0:
            return
        risen = np.flatnonzero((rise >= PROFILE_RISE) & (in_recent >= PROFILE_DOCUMENTS))
        fallen = np.flatnonzero(falling_words(rise, in_recent, in_older * n_recent / n_older))
        counts = word_counts(reservoir.select(np.flatnonzero(recent)), n_words)
        present = (counts > 0).astype(np.float64).tocsc()
        alike = profile_cosines(present, rising, risen)
        for lead in subject_leads(rising, rise, in_recent, alike):
            word = int(rising[lead])
            column, cosine = continued_topic(lift_column(counts, present, word), topic_word, np.union1d(risen, fallen))
            if cosine >= CONTINUES:
                led = self.leads.setdefault(topic_ids[column], [])
                if words[word] not in led:
                    led.append(words[word])

    def state(self) -> list:
        return [[t, list(lead_words)] for t, lead_words in self.leads.items()]

    def load_state(self, state) -> None:
        self.leads = {int(t): list(lead_words) for t, lead_words in (state or [])}
