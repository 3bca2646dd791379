"""Synthetic drifting streams with known topic births and deaths (tests, example, benchmarks).

A pool of separable topics (:func:`~streamtopics.synthetic.separable_topics`) is sampled from;
at document ``switch`` topic ``dying`` stops and topic ``newborn`` starts, every other topic goes
on unchanged. Before the switch the active topics are all but ``newborn``, after it all but
``dying``, so a model with K = pool size - 1 topics has the right number of topics throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .synthetic import sample_documents, separable_topics


@dataclass
class DriftingStream:
    documents: object  # scipy CSR, documents x words, in stream order
    vocabulary: list[str]
    topic_word: np.ndarray  # V x (K + 1): the pool of topics
    anchors: np.ndarray  # anchor word ids per pool topic
    switch: int
    dying: int
    newborn: int


def drifting_stream(n_documents: int = 6000, switch: int = 3000, n_topics: int = 4, n_words: int = 200,
                    doc_length: int = 40, share: float | None = None, alpha: float = 0.3,
                    anchors_per_topic: int = 3, anchor_mass: float = 0.2, concentration_words: float = 1.0,
                    seed: int = 0) -> DriftingStream:
    """A stream of ``n_documents`` over ``n_topics`` live topics (``n_topics + 1`` in the pool).

    ``share``: the expected share of the dying (before) and newborn (after) topic in the
    documents (None: the same as every other topic, 1 / n_topics); the other topics split the
    rest evenly. Words are named ``w0..``; a pool topic's anchors are ``a<topic>_<i>`` so the
    output is readable.

    >>> s = drifting_stream(100, 50, n_topics=3, n_words=30, seed=1)
    >>> s.documents.shape, s.switch, (s.dying, s.newborn)
    ((100, 30), 50, (2, 3))
    """
    rng = np.random.default_rng(seed)
    pool = separable_topics(n_words, n_topics + 1, anchors_per_topic=anchors_per_topic,
                            anchor_mass=anchor_mass, concentration=concentration_words, seed=rng)
    dying, newborn = n_topics - 1, n_topics
    share = 1.0 / n_topics if share is None else float(share)
    weights = np.full(n_topics + 1, (1.0 - share) / (n_topics - 1))
    before, after = weights.copy(), weights.copy()
    before[dying], before[newborn] = share, 0.0
    after[dying], after[newborn] = 0.0, share
    concentration = alpha * n_topics
    proportions = np.zeros((n_documents, n_topics + 1))
    for rows, mean in ((slice(0, switch), before), (slice(switch, n_documents), after)):
        count = len(range(n_documents)[rows])
        live = mean > 0
        proportions[rows][:, live] = rng.dirichlet(concentration * mean[live], count) if count else 0.0
    proportions = np.maximum(proportions, 0.0)
    proportions[proportions.sum(axis=1) == 0, 0] = 1.0
    documents = sample_documents(pool.topic_word, proportions, doc_length, seed=rng)
    vocabulary = [f"w{i}" for i in range(n_words)]
    for k, ids in enumerate(pool.anchors):
        for j, i in enumerate(ids):
            vocabulary[i] = f"a{k}_{j}"
    return DriftingStream(documents.tocsr(), vocabulary, pool.topic_word, pool.anchors, switch, dying, newborn)
