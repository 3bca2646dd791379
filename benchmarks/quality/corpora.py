"""Real corpora as a user would prepare them: tokenized, stop words out, rare and ubiquitous
words out, split into train and test.

Tokens come from :class:`streamtopics.text.tokenizer.Tokenizer` (its shipped English stop list, words of
3+ letters, mail transport not stripped: the corpora as first defined, so that figures recorded
before ``strip_mail`` stay comparable). The vocabulary is fitted on the training split: words in at least ``MIN_DF``
training documents and in at most ``MAX_DF_FRACTION`` of them, the ``VOCABULARY_SIZE`` of
highest document frequency (ties alphabetical). Documents keep only those words.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from benchmarks.peers.data import DATA, real_texts

MIN_DF = 5
MAX_DF_FRACTION = 0.5
VOCABULARY_SIZE = 6000
CORPORA = ("20newsgroups", "reuters", "nips", "bbc", "debian")


@dataclass(frozen=True)
class Corpus:
    """A tokenized corpus: train and test counts over ``vocabulary``, and how it was cut."""

    name: str
    train: sp.csr_matrix
    test: sp.csr_matrix
    vocabulary: list[str]
    note: str


def _jsonl(path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _seeded_split(texts: list[str], seed: int = 0, test_fraction: float = 0.2):
    order = np.random.default_rng(seed).permutation(len(texts))
    cut = int(round(len(texts) * (1 - test_fraction)))
    return [texts[i] for i in order[:cut]], [texts[i] for i in order[cut:]]


def raw_texts(name: str) -> tuple[list[str], list[str], str]:
    """(train texts, test texts, note) of corpus ``name`` (one of :data:`CORPORA`)."""
    if name == "20newsgroups":
        return real_texts("20newsgroups-bydate", DATA)
    if name == "reuters":
        rows = [r for r in _jsonl(DATA / "reuters21578" / "reuters21578.jsonl.gz")
                if r["topics_attr"] == "YES" and r["topics"] and r["text_type"] != "BRIEF"]
        text = lambda r: f"{r['title']}\n{r['body']}"
        return ([text(r) for r in rows if r["lewissplit"] == "TRAIN"],
                [text(r) for r in rows if r["lewissplit"] == "TEST"],
                "ModApte split (TOPICS=YES, >= 1 topic, LEWISSPLIT), BRIEF stories dropped; title + body")
    if name == "nips":
        rows = _jsonl(DATA / "nips-papers-1-12" / "nips-1-12-papers.jsonl.gz")
        text = lambda r: r["text"].replace("-\n", "")
        return ([text(r) for r in rows if r["volume"] < 11], [text(r) for r in rows if r["volume"] >= 11],
                "volumes 0-10 (1987-1997) train, 11-12 (1998-1999) test; line-end hyphens joined")
    if name == "bbc":
        train, test = _seeded_split([r["text"] for r in _jsonl(DATA / "bbc-news" / "bbc-news.jsonl.gz")])
        return train, test, "seeded 80/20 split (numpy default_rng(0) permutation)"
    if name == "debian":
        return real_texts("debian-descriptions", DATA)
    raise ValueError(f"unknown corpus {name!r}; use one of {CORPORA}")


def word_counts(texts, index, tokenizer) -> sp.csr_matrix:
    """The texts' counts (documents x words) over the words of ``index`` (word -> column)."""
    indptr, indices, values = [0], [], []
    for text in texts:
        row = sorted(Counter(i for i in map(index.get, tokenizer.tokenize(text)) if i is not None).items())
        indices.extend(i for i, _ in row)
        values.extend(c for _, c in row)
        indptr.append(len(indices))
    return sp.csr_matrix((np.array(values, float), np.array(indices, np.int32), np.array(indptr)),
                         shape=(len(texts), len(index)))


@lru_cache(maxsize=None)
def load(name: str) -> Corpus:
    """Corpus ``name``, tokenized and filtered (cached per process)."""
    from streamtopics.text.tokenizer import Tokenizer

    train_texts, test_texts, note = raw_texts(name)
    tokenizer = Tokenizer(strip_mail=False)
    df = Counter()
    for text in train_texts:
        df.update(set(tokenizer.tokenize(text)))
    ceiling = MAX_DF_FRACTION * len(train_texts)
    kept = sorted(((w, n) for w, n in df.items() if MIN_DF <= n <= ceiling), key=lambda item: (-item[1], item[0]))
    words = [w for w, _ in kept[:VOCABULARY_SIZE]]
    index = {w: i for i, w in enumerate(words)}
    train, test = word_counts(train_texts, index, tokenizer), word_counts(test_texts, index, tokenizer)
    return Corpus(name, train, test, words,
                  f"{note}; Tokenizer(strip_mail=False), its English stop list; V = {len(words)} training words with "
                  f"df >= {MIN_DF} and df <= {MAX_DF_FRACTION:.0%} of documents, highest df first")
