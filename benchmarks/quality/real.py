"""Real text: the training split streamed once (seeded shuffle), topics judged on the test split.

Per system: NPMI of the top-10 words against the test documents, topic uniqueness of the
top-10 words, held-out log-likelihood per token by document completion (test documents with at
least 4 tokens, half observed; :func:`streamtopics.evaluation.heldout_log_likelihood` with each
system's own ``infer``; for ours also with its background column, which is how our model
predicts words itself), and how many topics share each top-8 word (max and mean over the words
that are in some topic's top 8), by probability and as displayed: ranked by relevance with
:data:`~streamtopics.snapshot.DISPLAY_RELEVANCE` (what the command line and dashboard show), the
training split's word frequencies as p(w) for every system. Our model's background column is not
part of its topics here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamtopics.evaluation import (coherence_npmi, heldout_log_likelihood, relevance, top_word_ids, top_words,
                                     topic_uniqueness)
from streamtopics.snapshot import DISPLAY_RELEVANCE

from . import corpora
from .systems import build, measure, one_pass, warm_up


@dataclass(frozen=True)
class Setting:
    corpus: str
    n_topics: int

    @property
    def key(self) -> str:
        return f"{self.corpus} K={self.n_topics}"


def shared_top_words(topic_word, n: int = 8, word_distribution=None) -> tuple[int, float]:
    """(max, mean) over words in some topic's top ``n`` of the number of topics sharing it; with
    ``word_distribution`` (p(w)) the top words are the displayed ones, ranked by relevance."""
    ranking = topic_word if word_distribution is None else relevance(topic_word, word_distribution, DISPLAY_RELEVANCE)
    ids = top_word_ids(ranking, n).ravel()
    per_word = np.bincount(ids)
    per_word = per_word[per_word > 0]
    return int(per_word.max()), float(per_word.mean())


def scores(topic_word, model, test, word_distribution) -> dict:
    usable = test[np.asarray(test.sum(axis=1)).ravel() >= 4]
    most, mean = shared_top_words(topic_word)
    shown_most, shown_mean = shared_top_words(topic_word, word_distribution=word_distribution)
    out = {"npmi": float(np.mean(coherence_npmi(topic_word, test))),
           "uniqueness": topic_uniqueness(topic_word),
           "heldout_ll": heldout_log_likelihood(topic_word, usable, model.infer, seed=0),
           "shared_max": most, "shared_mean": mean, "shared_shown_max": shown_most, "shared_shown_mean": shown_mean}
    if hasattr(model, "with_background"):
        columns, infer = model.with_background()
        out["heldout_ll_background"] = heldout_log_likelihood(columns, usable, infer, seed=0)
    return out


def run(setting: Setting, systems: list[str], variants: dict, tomotopy_iterations: int = 200,
        report=None) -> list[dict]:
    corpus = corpora.load(setting.corpus)
    train = corpus.train[np.random.default_rng(0).permutation(corpus.train.shape[0])]
    train = train[np.asarray(train.sum(axis=1)).ravel() >= 2]
    frequencies = np.asarray(train.sum(axis=0), dtype=np.float64).ravel()
    word_distribution = frequencies / frequencies.sum()
    warm_up(corpus.vocabulary, train)
    def work(system, record):
        model = build(system, setting.n_topics, corpus.vocabulary, train.shape[0], variants, tomotopy_iterations)

        def judge(seen, m):
            topic_word = m.topic_word()
            record.update(scores(topic_word, m, corpus.test, word_distribution))
            record["top_words"] = [" ".join(t) for t in top_words(topic_word, corpus.vocabulary, 8)]

        record.update(one_pass(model, train, (train.shape[0],), judge))

    return measure(systems, lambda system: {"setting": setting.key, "system": system, "corpus": corpus.note},
                   work, report)
