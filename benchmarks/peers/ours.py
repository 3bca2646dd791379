"""streamtopics' StreamingTopicModel (this repository).

Used as docs/configuration.md, "Where a setting is given", describes for a stream with a known
vocabulary:
``StreamingTopicModel(n_topics=K, vocabulary=words, seed=0)`` with every other parameter at its
default (rectified FastAnchorWords anchors over at most the max(1000, 20 K) most frequent
candidate words, L2 recovery with a background topic, the refinement, ``batch_size=2048``),
``learn_many(chunk)`` on each CSR chunk of the stream, one pass, and
``refresh()`` once at the end (the refresh is inside the timed fit). Held-out mixtures come from
``model.infer(csr)`` (the library's own inference against the snapshot).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from .base import Peer


class Ours(Peer):
    name = "streamtopics (ours)"
    package = "streamtopics"

    def __init__(self, n_topics, vocabulary, n_documents, seed=0):
        super().__init__(n_topics, vocabulary, n_documents, seed)
        from streamtopics import StreamingTopicModel

        self.model = StreamingTopicModel(n_topics, vocabulary=self.vocabulary, seed=seed)

    def learn(self, chunk):
        self.model.learn_many(chunk)

    def finish(self):
        self.model.refresh()

    def topic_word(self):
        return np.asarray(self.model.snapshot.topic_word, dtype=float)

    def infer(self, documents):
        return self.model.infer(documents)

    @classmethod
    def version(cls):
        try:
            sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "streamtopics"],
                                   capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2]).stdout
        except (OSError, subprocess.CalledProcessError):
            sha, dirty = "?", ""
        return f"streamtopics @ {sha}{' + uncommitted changes in streamtopics/' if dirty.strip() else ''}"
