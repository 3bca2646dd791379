"""Short topic labels: a topic's two or three most characteristic words (``"tax_budget"``).

A label is read by people scanning a table or a dashboard, so it must be short and tell topics
apart. Its words are the topic's first words by relevance (Sievert & Shirley 2014, the ranking
:meth:`~streamtopics.snapshot.TopicSnapshot.top_words` shows), which prefers the words peculiar to
the topic over those frequent everywhere. Two words, joined by ``_`` as BERTopic does; a topic
whose two words are another's gets a third, and one still equal to another's is told apart by its
id (``"tax_budget_3"``).
"""

from __future__ import annotations

from typing import Sequence

LABEL_WORDS = 2  # words of a label; one more where two topics would share a label
MAX_LABEL_WORDS = 3
SEPARATOR = "_"


def topic_labels(ranked_words: Sequence[Sequence[str]], topic_ids: Sequence[int]) -> list[str]:
    """One label per topic from its words, most characteristic first; labels are distinct.

    >>> topic_labels([["tax", "budget", "vote"], ["tax", "budget", "rate"], ["goal", "match"]], [0, 1, 2])
    ['tax_budget_vote', 'tax_budget_rate', 'goal_match']
    >>> topic_labels([["tax", "budget"], ["tax", "budget"]], [4, 7])
    ['tax_budget_4', 'tax_budget_7']
    """
    short = [tuple(words[:LABEL_WORDS]) for words in ranked_words]
    labels = []
    for k, words in enumerate(ranked_words):
        clash = any(short[j] == short[k] for j in range(len(short)) if j != k)
        chosen = list(words[:MAX_LABEL_WORDS] if clash else short[k])
        labels.append(SEPARATOR.join(chosen) if chosen else f"topic{SEPARATOR}{topic_ids[k]}")
    shared = {label for label in labels if labels.count(label) > 1}
    return [f"{label}{SEPARATOR}{topic_ids[k]}" if label in shared else label for k, label in enumerate(labels)]
