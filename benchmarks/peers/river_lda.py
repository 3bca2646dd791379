"""river's online LDA with an infinite vocabulary (Zhai & Boyd-Graber 2013): ``preprocessing.LDA``.

As river's documentation shows (``feature_extraction.BagOfWords`` then ``preprocessing.LDA``),
one document at a time: ``LDA(n_components=K, number_of_documents=<stream length>,
maximum_size_vocabulary=V + 1, seed=seed)``, every other parameter at its default
(``alpha_theta=0.5``, ``alpha_beta=100``, ``tau=64``, ``kappa=0.75``, ``number_of_samples=10``,
``burn_in_sweeps=5``, ``vocab_prune_interval=10``), and ``learn_one({word: count})`` for each
document in arrival order (the dict is what ``BagOfWords`` would produce; we skip re-tokenising).
``maximum_size_vocabulary`` is raised from its default 4000 to the vocabulary size so that no
word of the shared vocabulary is pruned away. river's LDA looks at each document's distinct
words only (``x.keys()``), not their counts: that is the library's design.

Topics: the expected stick-breaking word probabilities ``E[v_i] prod_{j<i} (1 - E[v_j])`` with
``v_i ~ Beta(nu_1[i], nu_2[i])``, read in river's word order and renormalised over the shared
vocabulary (words it never indexed get 0). Held-out mixtures: ``transform_one(x)`` (river's own
Gibbs-sampled document-topic counts plus ``alpha_theta``), which does not update the topics.
"""

from __future__ import annotations

import numpy as np

from .base import Peer, normalise_columns


class River(Peer):
    name = "river LDA"
    package = "river"

    def __init__(self, n_topics, vocabulary, n_documents, seed=0):
        super().__init__(n_topics, vocabulary, n_documents, seed)
        from river.preprocessing import LDA

        self.model = LDA(n_components=n_topics, number_of_documents=n_documents,
                         maximum_size_vocabulary=len(self.vocabulary) + 1, seed=seed)

    def _dicts(self, documents):
        words = self.vocabulary
        documents = documents.tocsr()
        for a, b in zip(documents.indptr[:-1], documents.indptr[1:]):
            yield {words[i]: c for i, c in zip(documents.indices[a:b].tolist(), documents.data[a:b].tolist())}

    def learn(self, chunk):
        for x in self._dicts(chunk):
            self.model.learn_one(x)

    def topic_word(self):
        m = self.model
        out = np.zeros((len(self.vocabulary), self.n_topics))
        ids = np.array([m.word_to_index.get(w, -1) for w in self.vocabulary])
        for k in range(self.n_topics):
            nu1, nu2 = np.asarray(m.nu_1[k], float), np.asarray(m.nu_2[k], float)
            v = nu1 / (nu1 + nu2)
            beta = v * np.concatenate([[1.0], np.cumprod(1.0 - v)[:-1]])
            known = (ids >= 0) & (ids < beta.size)
            out[known, k] = beta[ids[known]]
        return normalise_columns(out)

    def infer(self, documents):
        rows = [self.model.transform_one(x) for x in self._dicts(documents)]
        return np.array([[row[k] for k in range(self.n_topics)] for row in rows])
