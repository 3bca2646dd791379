"""Corpora with known topics, for measuring how well topics are recovered.

Three ingredients make a synthetic corpus: a V x K topic-word matrix ``A`` (columns are
distributions over words), M x K topic proportions ``W`` (rows on the simplex) and document
lengths. Each document is drawn as in LDA: every token picks a topic from the document's
proportions and then a word from that topic. Ding et al. (2013, section 6.1) build ``A`` with
planted anchor words (:func:`separable_topics`); Arora et al. (2013, section 5.1) take ``A`` from
a model fitted to a real corpus and draw Dirichlet(0.03) proportions (:func:`semi_synthetic`,
with :func:`load_uci_bow` for the real corpora). :func:`population_cooccurrence` gives the
co-occurrence matrix ``Q = A R A^T`` that an infinite corpus would produce.

Every ``seed`` argument is anything :func:`numpy.random.default_rng` accepts (an int, or a
``Generator`` to draw from), and results are exactly reproducible from it.

Documents come back as a ``scipy.sparse.csr_matrix`` of counts (float64, M x V, sorted indices,
no explicit zeros).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = [
    "SyntheticModel",
    "separable_topics",
    "topic_proportions",
    "sample_documents",
    "dirichlet_topic_covariance",
    "population_cooccurrence",
    "semi_synthetic",
    "load_uci_bow",
]


@dataclass(frozen=True)
class SyntheticModel:
    """A separable topic-word matrix and its anchor words.

    ``topic_word`` is V x K with columns summing to 1; ``anchors[k]`` are the word ids that have
    probability under topic ``k`` only (shape K x anchors_per_topic).
    """

    topic_word: np.ndarray
    anchors: np.ndarray


def separable_topics(
    n_words: int,
    n_topics: int,
    anchors_per_topic: int = 1,
    anchor_mass: float | None = None,
    concentration: float = 1.0,
    seed: int | np.random.Generator = 0,
) -> SyntheticModel:
    """Random separable topics, following Ding et al. (2013, section 6.1).

    Each non-anchor word gets a row drawn from Dirichlet(``concentration``) over the K topics
    (``concentration=1``: uniform on the simplex, as in the paper; smaller values make words more
    topic-specific). Each anchor word gets a single Uniform[0, 1] entry in its own topic. The
    columns are then normalised. With the paper's recipe an anchor's weight is tiny next to the
    V / K non-anchor words of its topic; ``anchor_mass`` instead fixes the total probability of
    each topic's anchors (the non-anchor part is scaled to ``1 - anchor_mass``), which controls how
    hard the anchors are to find. Anchor ids are placed at random positions.

    >>> model = separable_topics(50, 4, anchors_per_topic=2, anchor_mass=0.1, seed=1)
    >>> model.topic_word.shape, model.anchors.shape
    ((50, 4), (4, 2))
    >>> bool(np.allclose(model.topic_word.sum(axis=0), 1.0))
    True
    >>> anchor_probs = model.topic_word[model.anchors, np.arange(4)[:, None]]  # K x anchors
    >>> bool(np.allclose(anchor_probs.sum(axis=1), 0.1))
    True
    """
    n_anchors = n_topics * anchors_per_topic
    if n_anchors >= n_words:
        raise ValueError("need more words than anchor words")
    if anchor_mass is not None and not 0.0 < anchor_mass < 1.0:
        raise ValueError("anchor_mass must lie in (0, 1)")
    rng = np.random.default_rng(seed)
    words = rng.permutation(n_words)
    anchors = np.sort(words[:n_anchors].reshape(n_topics, anchors_per_topic), axis=1)
    common = words[n_anchors:]

    topic_word = np.zeros((n_words, n_topics))
    topic_word[common] = rng.dirichlet(np.full(n_topics, concentration), size=len(common))
    topic_of_anchor = np.repeat(np.arange(n_topics), anchors_per_topic)
    topic_word[anchors.ravel(), topic_of_anchor] = rng.uniform(size=n_anchors)
    if anchor_mass is not None:
        anchor_part = np.zeros_like(topic_word)
        anchor_part[anchors.ravel()] = topic_word[anchors.ravel()]
        common_part = topic_word - anchor_part
        topic_word = (anchor_mass * anchor_part / anchor_part.sum(axis=0)
                      + (1.0 - anchor_mass) * common_part / common_part.sum(axis=0))
    return SyntheticModel(topic_word / topic_word.sum(axis=0), anchors)


def zipf_topics(n_words: int, n_topics: int, concentration: float = 0.1,
                seed: int | np.random.Generator = 0) -> np.ndarray:
    """Random topics without anchor words (V x K), shaped like text's: each column a Dirichlet draw
    around a Zipf base measure (word i's expected share proportional to 1 / (i + 1), total
    concentration ``concentration * V``), so every topic shares the frequent words in its own
    proportions and the rare words are each left to a few. Unlike :func:`separable_topics` the
    anchors do not explain such sums to within their noise, and a model's refreshes refine them
    (:mod:`streamtopics.refresh.separability`): the streams that measure what a refresh costs draw
    their topics here.

    >>> topics = zipf_topics(100, 3, seed=1)
    >>> topics.shape, bool(np.allclose(topics.sum(axis=0), 1.0))
    ((100, 3), True)
    """
    rng = np.random.default_rng(seed)
    base = 1.0 / np.arange(1, n_words + 1)
    topic_word = rng.dirichlet(concentration * n_words * base / base.sum(), n_topics).T
    return np.ascontiguousarray(topic_word / topic_word.sum(axis=0))


def topic_proportions(
    n_docs: int,
    n_topics: int,
    kind: str = "dirichlet",
    alpha: float | np.ndarray = 0.1,
    correlation: float = 0.0,
    n_blocks: int = 10,
    seed: int | np.random.Generator = 0,
) -> np.ndarray:
    """Per-document topic proportions, an M x K array whose rows lie on the simplex.

    ``kind="dirichlet"``: rows ~ Dirichlet(``alpha``), ``alpha`` a scalar (symmetric) or a
    length-K vector; 0.1 is Ding et al.'s (and Griffiths & Steyvers') choice.
    ``kind="logistic_normal"``: rows = softmax(eta), eta ~ N(0, Sigma), with the block-structured
    covariance of Arora et al. (2013, section 5.3): topics split into ``n_blocks`` contiguous
    groups, unit variances, and ``correlation`` between any two topics of the same group.
    ``alpha`` is used by the Dirichlet only; ``correlation`` and ``n_blocks`` by the logistic
    normal only.

    >>> w = topic_proportions(3, 5, kind="logistic_normal", correlation=0.1, seed=0)
    >>> w.shape, bool(np.allclose(w.sum(axis=1), 1.0))
    ((3, 5), True)
    """
    rng = np.random.default_rng(seed)
    if kind == "dirichlet":
        return rng.dirichlet(np.broadcast_to(np.asarray(alpha, dtype=float), (n_topics,)), n_docs)
    if kind == "logistic_normal":
        block = np.arange(n_topics) * min(n_blocks, n_topics) // n_topics
        same_block = block[:, None] == block[None, :]
        covariance = np.where(same_block, correlation, 0.0)
        np.fill_diagonal(covariance, 1.0)
        eta = rng.multivariate_normal(np.zeros(n_topics), covariance, size=n_docs,
                                      method="cholesky")
        eta -= eta.max(axis=1, keepdims=True)
        weights = np.exp(eta)
        return weights / weights.sum(axis=1, keepdims=True)
    raise ValueError(f"unknown kind {kind!r}; use 'dirichlet' or 'logistic_normal'")


def sample_documents(
    topic_word: np.ndarray,
    proportions: np.ndarray,
    doc_length: int | np.ndarray,
    poisson: bool = False,
    seed: int | np.random.Generator = 0,
) -> sp.csr_matrix:
    """Draw word counts for M documents (the LDA generative process).

    Document ``d`` has ``doc_length`` tokens (an int for all documents or a length-M array), or a
    Poisson(``doc_length``) number of them if ``poisson`` is true (so some may be empty). Its
    tokens are i.i.d. draws from ``topic_word @ proportions[d]``; they are drawn topic by topic
    (first how many tokens each topic gets, then the words of all documents' tokens of that topic
    at once): the same distribution, in memory proportional to the number of tokens, not M x V.

    >>> counts = sample_documents(np.eye(3), np.array([[0.5, 0.5, 0.0]]), doc_length=10)
    >>> counts.shape, int(counts.sum()), counts.nnz <= 2
    ((1, 3), 10, True)
    """
    topic_word = np.asarray(topic_word, dtype=float)
    proportions = np.asarray(proportions, dtype=float)
    proportions = proportions / proportions.sum(axis=1, keepdims=True)
    n_words, n_topics = topic_word.shape
    n_docs = proportions.shape[0]
    if proportions.shape[1] != n_topics:
        raise ValueError("proportions must have one column per topic")
    rng = np.random.default_rng(seed)
    lengths = np.broadcast_to(np.asarray(doc_length), (n_docs,))
    lengths = rng.poisson(lengths) if poisson else lengths.astype(np.int64)

    tokens_per_topic = rng.multinomial(lengths, proportions)
    cdf = np.cumsum(topic_word.T, axis=1)
    cdf /= cdf[:, -1:]
    doc_ids, word_ids = [], []
    for k in range(n_topics):
        counts_k = tokens_per_topic[:, k]
        doc_ids.append(np.repeat(np.arange(n_docs, dtype=np.int32), counts_k))
        word_ids.append(np.searchsorted(cdf[k], rng.random(counts_k.sum()), side="right"))
    doc_ids = np.concatenate(doc_ids)
    word_ids = np.concatenate(word_ids).astype(np.int32)
    documents = sp.csr_matrix(
        (np.ones(doc_ids.size), (doc_ids, word_ids)), shape=(n_docs, n_words)
    )
    documents.sum_duplicates()
    return documents


def dirichlet_topic_covariance(
    alpha: float | np.ndarray, n_topics: int | None = None
) -> np.ndarray:
    """``R = E[w w^T]`` for w ~ Dirichlet(``alpha``), in closed form (K x K, entries sum to 1).

    ``E[w_k w_l] = (a_k a_l + [k = l] a_k) / (a_0 (a_0 + 1))`` with ``a_0 = sum(a)``. A scalar
    ``alpha`` needs ``n_topics``.

    >>> dirichlet_topic_covariance(1.0, n_topics=2)
    array([[0.33333333, 0.16666667],
           [0.16666667, 0.33333333]])
    """
    a = np.asarray(alpha, dtype=float)
    if a.ndim == 0:
        if n_topics is None:
            raise ValueError("a scalar alpha needs n_topics")
        a = np.full(n_topics, float(a))
    a0 = a.sum()
    return (np.outer(a, a) + np.diag(a)) / (a0 * (a0 + 1.0))


def population_cooccurrence(topic_word: np.ndarray, topic_covariance: np.ndarray) -> np.ndarray:
    """The co-occurrence matrix of an infinite corpus, ``Q = A R A^T`` (V x V).

    ``Q[i, j]`` is the probability that two distinct tokens of a random document are words
    ``i`` and ``j``; the per-document estimates of docs/design.md, "Co-occurrence sums", average
    to it. ``R`` is :func:`dirichlet_topic_covariance` for LDA; for other priors estimate it from
    sampled proportions as ``W.T @ W / M``.
    """
    topic_word = np.asarray(topic_word, dtype=float)
    return topic_word @ np.asarray(topic_covariance, dtype=float) @ topic_word.T


def semi_synthetic(
    topic_word: np.ndarray,
    n_docs: int,
    alpha: float = 0.03,
    doc_length: int | np.ndarray = 300,
    seed: int | np.random.Generator = 0,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Documents from given topics with Dirichlet(``alpha``) proportions.

    The semi-synthetic setting of Arora et al. (2013, section 5.1): topics fitted to a real
    corpus, symmetric alpha = 0.03 and fixed lengths (300 for NY Times, 70 for NIPS). Returns the
    M x V counts and the M x K proportions used.
    """
    rng = np.random.default_rng(seed)
    proportions = topic_proportions(n_docs, topic_word.shape[1], alpha=alpha, seed=rng)
    documents = sample_documents(topic_word, proportions, doc_length, seed=rng)
    return documents, proportions


# --- real corpora for semi-synthetic models ------------------------------------------------------


def load_uci_bow(docword_path, vocab_path) -> tuple[sp.csr_matrix, list[str]]:
    """Read a corpus in the UCI bag-of-words format (plain or gzip).

    ``docword`` holds D, W and NNZ on three lines, then NNZ lines ``docID wordID count``
    (1-based); ``vocab`` holds one word per line, line i being word i. Returns the D x W counts
    and the vocabulary.
    """
    def read(path) -> bytes:
        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            return f.read()

    numbers = np.fromstring(read(docword_path), dtype=np.int64, sep=" ")
    n_docs, n_words, nnz = (int(x) for x in numbers[:3])
    if numbers.size != 3 + 3 * nnz:
        raise ValueError(f"{docword_path}: expected {nnz} 'docID wordID count' lines")
    doc, word, count = numbers[3:].reshape(nnz, 3).T
    documents = sp.csr_matrix(
        (count.astype(np.float64), (doc - 1, word - 1)), shape=(n_docs, n_words)
    )
    documents.sum_duplicates()
    vocabulary = [w.strip() for w in read(vocab_path).decode("utf-8").splitlines() if w.strip()]
    if len(vocabulary) != n_words:
        raise ValueError(f"{vocab_path}: {len(vocabulary)} words, docword says {n_words}")
    return documents, vocabulary
