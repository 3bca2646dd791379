"""Ground truths no part of this project fitted: tomotopy collapsed-Gibbs LDA on a real corpus, and
the seed papers' separable topics.

``tomotopy.LDAModel(k=K, alpha=0.1, eta=0.01, seed=seed)`` (tomotopy's defaults) on the training
split of a :mod:`.corpora` corpus, ``iterations`` Gibbs sweeps in steps of 10 on one worker. The
truth is the smoothed topic-word matrix (V x K, ``get_topic_word_dist``), the vocabulary and the
training documents' lengths (tokens after filtering). Fits are cached as ``.npz`` under
``<cache>/truths/``, keyed by corpus, K, iterations and seed.

A corpus named ``separable-<V>-s<seed>`` is no corpus but the setting where anchor methods are
provably right (Arora et al. 2013, Ding et al. 2013): :func:`streamtopics.synthetic.separable_topics`
over V words, 5 anchor words per topic, the other words' rows uniform on the simplex (so the anchors
are rarer than the shared words), documents of 100 tokens; drawn, not fitted or cached.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import corpora

ITERATIONS = 500
SEPARABLE = re.compile(r"separable-(\d+)-s(\d+)")
SEPARABLE_ANCHORS = 5  # anchor words per topic of a separable truth
SEPARABLE_LENGTH = 100  # tokens per document of a separable stream


@dataclass(frozen=True)
class Truth:
    topic_word: np.ndarray
    vocabulary: list[str]
    lengths: np.ndarray
    note: str


def cache_path(cache: Path, corpus: str, n_topics: int, iterations: int, seed: int) -> Path:
    return Path(cache) / "truths" / f"{corpus}-K{n_topics}-it{iterations}-seed{seed}.npz"


def fit(corpus: str, n_topics: int, iterations: int = ITERATIONS, seed: int = 0) -> Truth:
    """Fit the truth (no cache)."""
    import tomotopy as tp

    data = corpora.load(corpus)
    words, train = data.vocabulary, data.train
    model = tp.LDAModel(k=n_topics, seed=seed)
    for a, b in zip(train.indptr[:-1], train.indptr[1:]):
        tokens = [words[i] for i, c in zip(train.indices[a:b], train.data[a:b]) for _ in range(int(c))]
        if tokens:
            model.add_doc(tokens)
    start = time.perf_counter()
    for _ in range(iterations // 10):
        model.train(10, workers=1)
    seconds = time.perf_counter() - start
    position = {w: i for i, w in enumerate(words)}
    used = [position[w] for w in model.used_vocabs]
    topic_word = np.zeros((len(words), n_topics))
    for k in range(n_topics):
        topic_word[used, k] = model.get_topic_word_dist(k)
    topic_word /= topic_word.sum(axis=0, keepdims=True)
    lengths = np.asarray(train.sum(axis=1)).ravel().astype(np.int64)
    note = (f"tomotopy {tp.__version__} LDAModel(k={n_topics}, seed={seed}), {iterations} Gibbs iterations "
            f"({seconds:.0f} s) on {corpus} train ({data.note})")
    return Truth(topic_word, words, lengths, note)


def load(corpus: str, n_topics: int, iterations: int = ITERATIONS, seed: int = 0,
         cache: Path | None = None) -> Truth:
    """The truth for (corpus, K, iterations, seed), from the cache when it is there."""
    if (found := SEPARABLE.fullmatch(corpus)) is not None:
        return separable(int(found[1]), n_topics, int(found[2]))
    path = None if cache is None else cache_path(cache, corpus, n_topics, iterations, seed)
    if path is not None and path.exists():
        with np.load(path) as f:
            meta = json.loads(str(f["meta"]))
            return Truth(f["topic_word"], meta["vocabulary"], f["lengths"], meta["note"])
    truth = fit(corpus, n_topics, iterations, seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = json.dumps({"vocabulary": truth.vocabulary, "note": truth.note})
        np.savez(path, topic_word=truth.topic_word, lengths=truth.lengths, meta=np.array(meta))
    return truth


def separable(n_words: int, n_topics: int, seed: int) -> Truth:
    """The separable truth of a ``separable-<V>-s<seed>`` corpus (see the module docstring)."""
    from streamtopics.synthetic import separable_topics

    model = separable_topics(n_words, n_topics, anchors_per_topic=SEPARABLE_ANCHORS, seed=seed)
    note = (f"separable_topics({n_words}, {n_topics}, anchors_per_topic={SEPARABLE_ANCHORS}, seed={seed}), "
            f"documents of {SEPARABLE_LENGTH} tokens")
    return Truth(model.topic_word, [f"w{i}" for i in range(n_words)], np.full(1, SEPARABLE_LENGTH, np.int64), note)
