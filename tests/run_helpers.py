"""A finished replay's run directory for the service and dashboard tests: a real
:class:`~consumers.replay.Replay` over a JSON Lines archive with empty documents (rejected by
the model) and unreadable lines (malformed records), and a way to add what newer snapshots carry
(labels, coherence, representative documents) to its newest snapshot file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from consumers.replay import Replay
from consumers.sources import open_source
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import sample_documents, separable_topics, topic_proportions

EMPTY_DOCUMENTS, MALFORMED_LINES = 7, 3


def finished_run(out: Path, n_topics: int = 16, n_documents: int = 2000, every: int = 500, live=None):
    """Replay ``n_documents`` synthetic documents (plus :data:`EMPTY_DOCUMENTS` empty ones and
    :data:`MALFORMED_LINES` unreadable lines) into ``out``, publishing to ``live`` (a
    :class:`~consumers.service.LiveSource`) if given; returns the replay's summary."""
    n_words = 12 * n_topics
    words = ["term" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(n_words)]  # the tokenizer's kind of word
    topics = separable_topics(n_words, n_topics, anchors_per_topic=2, seed=11)
    counts = sample_documents(topics.topic_word, topic_proportions(n_documents, n_topics, alpha=0.2, seed=12),
                              40, seed=13)
    lines = [json.dumps({"id": f"d{d}", "text": " ".join(words[w] for w, n in zip(row.indices, row.data)
                                                       for _ in range(int(n)))})
             for d, row in enumerate(counts)]
    for i in range(EMPTY_DOCUMENTS):
        lines.insert(100 + 50 * i, json.dumps({"id": f"empty{i}", "text": ""}))
    for i in range(MALFORMED_LINES):
        lines.insert(300 + 70 * i, "{not json")
    archive = out.parent / f"{out.name}.jsonl"
    archive.write_text("\n".join(lines) + "\n")
    model = StreamingTopicModel(n_topics, vocabulary=words, anchor_min_df=5, seed=0)
    hooks = {} if live is None else {"on_snapshot": live.on_snapshot}
    summary = Replay(model, open_source(str(archive)), out, every_documents=every, **hooks).run(
        on_progress=None if live is None else live.on_progress)
    if live is not None:
        live.finish()
    return summary


def add_labels(snapshot_file: Path) -> dict:
    """Give each topic of the snapshot in ``snapshot_file`` a label, a coherence and two
    representative documents (one with text, one given as tokens: words only), in each topic's
    entry as the library writes them; returns {id: extras} as the API is to answer them."""
    data = json.loads(snapshot_file.read_text())
    rng = np.random.default_rng(5)
    extras = {}
    for topic in data["topics"]:
        t = topic["id"]
        topic["label"] = f"{topic['anchor']} topic{t}"
        topic["coherence"] = round(float(rng.uniform(-0.2, 0.6)), 4)
        topic["representatives"] = [
            {"key": f"d{t}-0", "weight": 0.9, "words": [topic["anchor"], "alpha"], "text": f"a document typical of topic {t}"},
            {"key": None, "weight": 0.8, "words": [topic["anchor"], "beta"]}]
        extras[t] = {"label": topic["label"], "coherence": topic["coherence"], "representatives": [
            {"text": f"a document typical of topic {t}", "words": [topic["anchor"], "alpha"], "key": f"d{t}-0", "score": 0.9},
            {"text": None, "words": [topic["anchor"], "beta"], "key": None, "score": 0.8}]}
    snapshot_file.write_text(json.dumps(data))
    return extras
