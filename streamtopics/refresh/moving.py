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

from .emerging import CONTINUES, MIN_DOCUMENTS, RecentWords, continued_topic


class MovingTopics:
    """The topics whose subject is moving onto new words, by id, with the words that led it."""

    def __init__(self):
        self.leads: dict[int, list[str]] = {}

    def update(self, recent: RecentWords | None, words: list[str], topic_ids: list[int],
               topic_word: np.ndarray) -> None:
        """Compare the reservoir's ``recent`` words (None: it cannot tell; nothing is moving) with
        the last snapshot's topics (``topic_ids``, ``topic_word``; ``words`` the vocabulary's
        words): keep the moving topics whose leads are still used and add those a rising subject
        continues."""
        if recent is None:
            self.leads = {}
            return
        index = {w: i for i, w in enumerate(words[:recent.n_words])}
        self.leads = {t: lead_words for t, lead_words in self.leads.items() if t in topic_ids
                      and any(w in index and recent.in_recent[index[w]] >= MIN_DOCUMENTS for w in lead_words)}
        left_out = np.union1d(recent.profile_words, np.flatnonzero(recent.falling))  # the words that rose or fell
        for lead in recent.leads():
            word = int(recent.rising[lead])
            column, cosine = continued_topic(recent.lift(word), topic_word, left_out)
            if cosine >= CONTINUES:
                led = self.leads.setdefault(topic_ids[column], [])
                if words[word] not in led:
                    led.append(words[word])

    def state(self) -> list:
        return [[t, list(lead_words)] for t, lead_words in self.leads.items()]

    def load_state(self, state) -> None:
        self.leads = {int(t): list(lead_words) for t, lead_words in (state or [])}
