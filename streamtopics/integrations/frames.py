"""pandas views of a model, in the shape users of BERTopic and gensim look for.

* :func:`topic_info`: one row per topic of a snapshot (BERTopic's ``get_topic_info``).
* :func:`topics_over_time`: one row per recorded snapshot and topic, from the model's
  :class:`~streamtopics.history.TopicHistory` (BERTopic's ``topics_over_time``).
* :func:`document_topics`: one row per document, its top topic and its whole mixture (gensim's
  ``get_document_topics``, as columns ``topic_<id>`` like :mod:`streamtopics.integrations.river`'s features).

The model's :meth:`~streamtopics.model.StreamingTopicModel.topic_info`,
:meth:`~streamtopics.model.StreamingTopicModel.topics_over_time` and
:meth:`~streamtopics.model.StreamingTopicModel.document_topics` call these.
"""

from __future__ import annotations

import numpy as np

try:
    import pandas as pd
except ImportError:  # pandas is the 'pandas' extra: the streaming core does not need it
    raise ImportError("topic_info(), topics_over_time() and document_topics() return pandas DataFrames: "
                      "pip install 'streamtopics[pandas]'") from None

from ..snapshot import DISPLAY_RELEVANCE, TopicSnapshot

INFO_WORDS = 10  # top words per topic in topic_info


def topic_info(snapshot: TopicSnapshot, words: int = INFO_WORDS) -> pd.DataFrame:
    """One row per topic, most prevalent first: ``topic`` (id), ``label``, ``anchor``,
    ``prevalence`` (its share: the mean weight of the topic in the kept documents' mixtures),
    ``coherence`` (NPMI of its 10 most probable words; NaN when the model keeps no documents),
    ``top_words`` (by relevance, as displayed) and ``representative_docs`` (the texts, or words,
    of its best-matching kept documents)."""
    top = snapshot.top_words(words, DISPLAY_RELEVANCE)
    rows = []
    for k, topic in enumerate(snapshot.topic_ids):
        shown = [] if snapshot.representatives is None else snapshot.representatives.get(topic, [])
        rows.append({
            "topic": topic, "label": snapshot.labels[k], "anchor": snapshot.anchors[k],
            "prevalence": float(snapshot.prevalence[k]),
            "coherence": np.nan if snapshot.coherence is None else float(snapshot.coherence[k]),
            "top_words": [w for w, _ in top[topic]],
            "representative_docs": [d.get("text") or " ".join(d["words"]) for d in shown],
        })
    frame = pd.DataFrame(rows, columns=["topic", "label", "anchor", "prevalence", "coherence", "top_words",
                                        "representative_docs"])
    return frame.sort_values(["prevalence", "topic"], ascending=[False, True], kind="stable").reset_index(drop=True)


def topics_over_time(history) -> pd.DataFrame:
    """One row per kept history record and topic, in stream order: ``version``,
    ``documents_seen``, ``stream_time`` (seconds, or None), ``topic``, ``label``, ``prevalence``
    and ``words`` (its first words by relevance; label and words are None for records written
    before they were kept)."""
    rows = [{"version": record["version"], "documents_seen": record["documents_seen"],
             "stream_time": record["stream_time"], "topic": topic,
             "label": record.get("labels", {}).get(topic), "prevalence": share,
             "words": record.get("words", {}).get(topic)}
            for record in history.records for topic, share in record["prevalence"].items()]
    return pd.DataFrame(rows, columns=["version", "documents_seen", "stream_time", "topic", "label", "prevalence",
                                       "words"])


def document_topics(snapshot: TopicSnapshot, mixtures: np.ndarray, known: np.ndarray) -> pd.DataFrame:
    """One row per document: ``topic`` (the id of its largest weight), ``label``, ``weight``,
    ``known_tokens`` (0: no word of the document is known, the row is the prior and ``topic`` and
    ``label`` are missing) and ``topic_<id>``, its weight on every topic."""
    best = np.argmax(mixtures, axis=1) if mixtures.size else np.zeros(len(mixtures), np.int64)
    has_words = np.asarray(known) > 0
    frame = pd.DataFrame({
        "topic": pd.array([snapshot.topic_ids[k] if ok else None for k, ok in zip(best, has_words)], dtype="Int64"),
        "label": [snapshot.labels[k] if ok else None for k, ok in zip(best, has_words)],
        "weight": mixtures[np.arange(len(mixtures)), best] if mixtures.size else np.zeros(len(mixtures)),
        "known_tokens": np.asarray(known, dtype=np.float64),
    })
    weights = pd.DataFrame(mixtures, columns=[f"topic_{t}" for t in snapshot.topic_ids])
    return pd.concat([frame, weights], axis=1)
