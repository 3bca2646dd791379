"""tomotopy's collapsed-Gibbs LDA (a *batch* reference: it sees the whole stream, many passes).

As tomotopy's documentation does: ``LDAModel(k=K, seed=seed)`` with the defaults ``alpha=0.1``,
``eta=0.01``, ``min_cf=0``, ``rm_top=0``; every document is added with ``add_doc(tokens)``
(counts expanded to tokens, words from the shared vocabulary) as it arrives, and ``finish()``
runs ``train(10, workers=0)`` ``iterations // 10`` times (all cores; the docs' example loops
``mdl.train(10)``). ``iterations`` is 200 in the quick suite and 500 in the full one. Topics:
``get_topic_word_dist(k)`` mapped through ``used_vocabs``; held-out mixtures:
``infer(make_doc(tokens), iterations=100)``.

This is not a streaming method: it is in the table to show what a multi-pass batch fit of the
same data reaches, and its documents/s count every Gibbs pass.
"""

from __future__ import annotations

import numpy as np

from .base import Peer, normalise_columns

ITERATIONS = 200


class Tomotopy(Peer):
    name = "tomotopy LDA (batch Gibbs)"
    package = "tomotopy"
    online = False

    def __init__(self, n_topics, vocabulary, n_documents, seed=0, iterations: int | None = None):
        super().__init__(n_topics, vocabulary, n_documents, seed)
        import tomotopy as tp

        self.iterations = iterations or ITERATIONS
        self.model = tp.LDAModel(k=n_topics, seed=seed)

    def _tokens(self, documents):
        words = self.vocabulary
        documents = documents.tocsr()
        for a, b in zip(documents.indptr[:-1], documents.indptr[1:]):
            tokens = []
            for i, c in zip(documents.indices[a:b].tolist(), documents.data[a:b].tolist()):
                tokens.extend([words[i]] * int(c))
            yield tokens

    def learn(self, chunk):
        for tokens in self._tokens(chunk):
            if tokens:
                self.model.add_doc(tokens)

    def finish(self):
        """Gibbs sampling in steps of 10 iterations; stops early (``iterations_done`` says where)
        once the worker's ``deadline`` (a ``time.perf_counter()`` value) has passed."""
        import time

        deadline = getattr(self, "deadline", None)
        self.iterations_done = 0
        while self.iterations_done < self.iterations:
            if deadline is not None and time.perf_counter() > deadline and self.iterations_done:
                break
            self.model.train(10, workers=0)
            self.iterations_done += 10

    def topic_word(self):
        position = {w: i for i, w in enumerate(self.vocabulary)}
        used = [position[w] for w in self.model.used_vocabs]
        out = np.zeros((len(self.vocabulary), self.n_topics))
        for k in range(self.n_topics):
            out[used, k] = self.model.get_topic_word_dist(k)
        return normalise_columns(out)

    def infer(self, documents):
        docs, empty = [], []
        for d, tokens in enumerate(self._tokens(documents)):
            docs.append(self.model.make_doc(tokens))
            empty.append(not tokens)
        dists, _ = self.model.infer(docs, iterations=100, workers=0)
        theta = np.array([np.asarray(t, float) for t in dists])
        theta[np.array(empty, bool)] = 1.0 / self.n_topics
        return theta
