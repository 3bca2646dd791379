"""The interface every adapter implements, and version strings."""

from __future__ import annotations

import importlib

import numpy as np
import scipy.sparse as sp


class Peer:
    """One topic model behind the benchmark's interface (see :mod:`benchmarks.peers`).

    ``n_documents`` is the stream length announced in advance (libraries such as scikit-learn and
    river use it to scale their stochastic updates); ``online`` is False for batch references.
    """

    name = "?"
    package = "?"
    online = True

    def __init__(self, n_topics: int, vocabulary: list[str], n_documents: int, seed: int = 0):
        self.n_topics = n_topics
        self.vocabulary = list(vocabulary)
        self.n_documents = n_documents
        self.seed = seed

    def learn(self, chunk: sp.csr_matrix) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Make the topics readable (a no-op for most online learners)."""

    def topic_word(self) -> np.ndarray:
        raise NotImplementedError

    def infer(self, documents: sp.csr_matrix) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def version(cls) -> str:
        module = importlib.import_module(cls.package)
        return f"{cls.package} {getattr(module, '__version__', '?')}"


def normalise_columns(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=float)
    total = matrix.sum(axis=0, keepdims=True)
    total[total == 0] = 1.0
    return matrix / total


def csr_rows_as_pairs(documents: sp.csr_matrix):
    """Yield (word ids, counts) per row."""
    documents = sp.csr_matrix(documents)
    for a, b in zip(documents.indptr[:-1], documents.indptr[1:]):
        yield documents.indices[a:b], documents.data[a:b]
