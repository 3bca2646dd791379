"""Raw mail and news posts streamed as a user streams them: topics with and without ``strip_mail``.

The 20 Newsgroups training posts (headers, attributions and addresses included, as the archive
holds them and as `streamtopics replay` reads them) go once, in a seeded shuffle, through the
default model (20 topics, ``learn_many`` in chunks of 1,000, one refresh at the end) with the
tokenizer's ``strip_mail`` off and on. The topics are judged on the quality protocol's 20
Newsgroups test split (header block cut, :mod:`benchmarks.quality.corpora`, which no setting here
produced): NPMI of the top 10 words, topic uniqueness, how many topics share a top-8 word, and
how many topics are *transport topics*: 3 or more of their top 8 words are transport words,
words at least half of whose occurrences in the training posts ``strip_mail`` removes (header
fields, attribution lines, addresses: "edu", "nntp", "posting", "writes", "cmu", ...).

Also printed: the cost of the stripping per post (Python :func:`~streamtopics.text.mail.strip_mail`
and the batch encoder's compiled pass) and the ingest rate of ``learn_many`` on the raw posts,
both settings alternating, medians of ``--repeats``.

    python -m benchmarks.mail_text
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter

import numpy as np

from benchmarks.common import machine
from benchmarks.peers.data import DATA, _read_jsonl
from benchmarks.quality import corpora
from streamtopics import StreamingTopicModel
from streamtopics.evaluation import coherence_npmi, topic_uniqueness
from streamtopics.text.mail import blank_mail_transport, strip_mail
from streamtopics.text.tokenizer import Tokenizer

TRANSPORT_SHARE = 0.5  # a word is a transport word when strip_mail removes this share of it or more
TRANSPORT_MIN_COUNT = 200
TRANSPORT_WORDS_PER_TOPIC = 3


def raw_posts() -> tuple[list[str], list[str]]:
    """(training posts in a seeded shuffle, all posts in archive order), raw."""
    rows = list(_read_jsonl(DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"))
    train = [r["text"] for r in rows if r["split"] == "train"]
    return [train[i] for i in np.random.default_rng(0).permutation(len(train))], [r["text"] for r in rows]


def transport_words(posts: list[str]) -> list[str]:
    """The transport words of ``posts``, most frequent first."""
    tokenizer = Tokenizer(strip_mail=False)
    raw, stripped = Counter(), Counter()
    for post in posts:
        raw.update(tokenizer.tokenize(post))
        stripped.update(tokenizer.tokenize(strip_mail(post)))
    return [w for w, n in raw.most_common() if n >= TRANSPORT_MIN_COUNT and n - stripped[w] >= TRANSPORT_SHARE * n]


def judge(snapshot, corpus, transport: set[str]) -> dict:
    index = {w: i for i, w in enumerate(corpus.vocabulary)}
    in_corpus = np.zeros((len(corpus.vocabulary), snapshot.topic_word.shape[1]))
    for j, word in enumerate(snapshot.vocabulary):
        if word in index:
            in_corpus[index[word]] = snapshot.topic_word[j]
    top8 = [[w for w, _ in words] for words in snapshot.top_words(8).values()]
    return {"npmi": float(np.mean(coherence_npmi(in_corpus, corpus.test))),
            "uniqueness": topic_uniqueness(snapshot.topic_word),
            "shared_max": max(Counter(w for words in top8 for w in words).values()),
            "transport_topics": sum(len(transport & set(words)) >= TRANSPORT_WORDS_PER_TOPIC for words in top8),
            "background_share": snapshot.background_share, "top8": top8}


def stream(posts: list[str], strip: bool) -> tuple[StreamingTopicModel, float]:
    model = StreamingTopicModel(20, seed=0, tokenizer=Tokenizer(strip_mail=strip))
    t0 = time.perf_counter()
    for i in range(0, len(posts), 1000):
        model.learn_many(posts[i:i + 1000])
    return model, time.perf_counter() - t0


def stripping_cost(posts: list[str]) -> tuple[float, float]:
    """Microseconds per post: Python strip_mail, and the compiled pass (ASCII posts)."""
    t0 = time.perf_counter()
    for post in posts:
        strip_mail(post)
    python = (time.perf_counter() - t0) / len(posts) * 1e6
    ascii_posts = [p for p in posts if p.isascii()]
    data = np.frombuffer("\n".join(ascii_posts).encode("ascii"), np.uint8)
    starts = np.zeros(len(ascii_posts) + 1, np.int64)
    np.cumsum([len(p) + 1 for p in ascii_posts], out=starts[1:])
    blank_mail_transport(data.copy(), starts)  # compile
    copy = data.copy()
    t0 = time.perf_counter()
    blank_mail_transport(copy, starts)
    return python, (time.perf_counter() - t0) / len(ascii_posts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="ingest timings per setting (alternating)")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    train, everything = raw_posts()
    corpus = corpora.load("20newsgroups")
    frequent_first = transport_words(train)
    transport = set(frequent_first)
    print(f"{len(train):,} raw training posts; {len(transport)} transport words, the most frequent: "
          f"{' '.join(frequent_first[:15])}")
    stream(train[:3000], True)  # compile the kernels before any timing
    rates = {False: [], True: []}
    for _ in range(args.repeats):
        for strip in (False, True):
            model, seconds = stream(everything, strip)
            rates[strip].append(len(everything) / seconds)
    python, compiled = stripping_cost(everything)
    print(f"stripping per post: strip_mail {python:.1f} us, compiled pass {compiled:.1f} us; learn_many on all "
          f"{len(everything):,} posts (no refresh), median of {args.repeats}: "
          f"{statistics.median(rates[False]):,.0f} docs/s without, {statistics.median(rates[True]):,.0f} with")
    for strip in (False, True):
        model, _ = stream(train, strip)
        t0 = time.perf_counter()
        snapshot = model.refresh()
        seconds = time.perf_counter() - t0
        scores = judge(snapshot, corpus, transport)
        print(f"\nstrip_mail={strip}: NPMI {scores['npmi']:.3f}, uniqueness {scores['uniqueness']:.2f}, "
              f"top-8 word shared by at most {scores['shared_max']} topics, {scores['transport_topics']} transport "
              f"topics, background {scores['background_share']:.0%} of tokens; refresh {seconds:.1f} s")
        for words in scores["top8"]:
            mark = "*" if len(transport & set(words)) >= TRANSPORT_WORDS_PER_TOPIC else " "
            print(f"  {mark} {' '.join(words)}")


if __name__ == "__main__":
    main()
