"""gensim's online LDA (Hoffman, Blei & Bach 2010): ``gensim.models.LdaModel`` + ``update``.

As gensim's documentation recommends for a stream: create the model without a corpus,
``LdaModel(id2word=..., num_topics=K, chunksize=2000, passes=1, update_every=1,
eval_every=None, random_state=seed)`` (everything else at the defaults: ``alpha="symmetric"``
= 1/K, ``eta`` = 1/K, ``decay=0.5``, ``offset=1.0``, ``iterations=50``,
``gamma_threshold=0.001``), then ``model.update(chunk)`` for each chunk of the stream in
arrival order (one E step per 2000-document mini-batch, then an M step). ``eval_every=None``
turns off the perplexity estimate the docs warn slows training down. Topics are
``model.get_topics()``; held-out mixtures are the normalised variational ``gamma`` of
``model.inference(chunk)``. Single process (``LdaModel``, not ``LdaMulticore``).
"""

from __future__ import annotations


from .base import Peer, normalise_columns


def _bow(documents):
    documents = documents.tocsr()
    return [list(zip(documents.indices[a:b].tolist(), documents.data[a:b].tolist()))
            for a, b in zip(documents.indptr[:-1], documents.indptr[1:])]


class Gensim(Peer):
    name = "gensim LdaModel (online)"
    package = "gensim"

    def __init__(self, n_topics, vocabulary, n_documents, seed=0):
        super().__init__(n_topics, vocabulary, n_documents, seed)
        from gensim.corpora import Dictionary
        from gensim.models import LdaModel

        id2word = Dictionary()
        id2word.token2id = {w: i for i, w in enumerate(self.vocabulary)}
        id2word.id2token = dict(enumerate(self.vocabulary))
        self.model = LdaModel(id2word=id2word, num_topics=n_topics, chunksize=2000, passes=1,
                              update_every=1, eval_every=None, random_state=seed)

    def learn(self, chunk):
        self.model.update(_bow(chunk))

    def topic_word(self):
        return normalise_columns(self.model.get_topics().T)

    def infer(self, documents):
        gamma, _ = self.model.inference(_bow(documents))
        return gamma / gamma.sum(axis=1, keepdims=True)
