"""scikit-learn's online LDA: ``LatentDirichletAllocation(learning_method="online").partial_fit``.

As scikit-learn's documentation describes online (mini-batch) variational Bayes for data that
arrives in pieces: ``LatentDirichletAllocation(n_components=K, learning_method="online",
total_samples=<stream length>, random_state=seed)`` with the defaults ``batch_size=128``,
``learning_offset=10.0``, ``learning_decay=0.7``, ``doc_topic_prior`` = ``topic_word_prior`` =
1/K, ``max_doc_update_iter=100``, ``mean_change_tol=1e-3``; ``partial_fit(chunk)`` for each chunk of
the stream (it splits the chunk into ``batch_size`` mini-batches and makes one online update
each). ``total_samples`` is set to the stream length because scikit-learn scales each mini-batch
by it. Topics are the row-normalised ``components_``; held-out mixtures are ``transform(X)``.
``n_jobs=None`` (one process).
"""

from __future__ import annotations

import numpy as np

from .base import Peer, normalise_columns


class Sklearn(Peer):
    name = "scikit-learn LDA (partial_fit)"
    package = "sklearn"

    def __init__(self, n_topics, vocabulary, n_documents, seed=0):
        super().__init__(n_topics, vocabulary, n_documents, seed)
        from sklearn.decomposition import LatentDirichletAllocation

        self.model = LatentDirichletAllocation(n_components=n_topics, learning_method="online",
                                               total_samples=n_documents, random_state=seed)

    def learn(self, chunk):
        self.model.partial_fit(chunk)

    def topic_word(self):
        return normalise_columns(self.model.components_.T)

    def infer(self, documents):
        return np.asarray(self.model.transform(documents))

    @classmethod
    def version(cls):
        import sklearn

        return f"scikit-learn {sklearn.__version__}"
