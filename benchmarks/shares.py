"""Topic shares against what ``transform`` says of the stream: each topic's published share (its
prevalence) against the mean of its weight in the mixtures ``transform_many`` gives the stream's
next documents, and the recovery's share of the tokens (what snapshots published before) against
the same mean.

A real archive (``../shared/data``, ``--data`` for another folder) in a seeded random order (a
stationary stream): the model learns all but the last ``--held-out`` documents and refreshes once;
those documents are then inferred. Reported per corpus and K: the median and largest relative
difference over the topics, the share of topics within 10 %, and how many are within three
sampling errors (the spread of the topic's weight over the documents, over the root of the
documents on both sides).

    python -m benchmarks.shares
    python -m benchmarks.shares --corpora 20newsgroups --topics 20 50 100
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import machine
from benchmarks.events import ARCHIVES, DATA, archive_texts
from streamtopics import StreamingTopicModel
from streamtopics.refresh import describe, steps


def measure(texts: list[str], n_topics: int, held_out: int) -> dict:
    """The model's shares and the recovery's token shares against the held-out mean mixture."""
    recovered = []
    original = steps.share

    def share_keeping_the_recoverys(result, reservoir, config):
        recovered.append(np.asarray(result.prevalence))
        return original(result, reservoir, config)

    model = StreamingTopicModel(n_topics, warmup_documents=5000, seed=0)
    model.learn_many(texts[:-held_out])
    steps.share = share_keeping_the_recoverys
    try:
        snapshot = model.refresh()
    finally:
        steps.share = original
    mixtures = np.array([[row[t] for t in snapshot.topic_ids] for row in model.transform_many(texts[-held_out:])])
    mean = mixtures.mean(axis=0)
    sampling_error = mixtures.std(axis=0) * np.sqrt(1 / held_out + 1 / describe.POOL)
    out = {"share_s": model.last_refresh["share_s"]}
    for name, shares in (("shares", snapshot.prevalence), ("recovery", recovered[-1])):
        relative = np.abs(shares - mean) / mean
        out[name] = (np.median(relative), relative.max(), np.mean(relative <= 0.1),
                     int(np.sum(np.abs(shares - mean) <= 3 * sampling_error)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=sorted(ARCHIVES), default=sorted(ARCHIVES))
    parser.add_argument("--topics", nargs="+", type=int, default=[20, 50])
    parser.add_argument("--held-out", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    print(machine())
    print("| corpus | K | published | median rel. | largest | within 10 % | within 3 errors | share step s |\n"
          "|---|---|---|---|---|---|---|---|")
    for corpus in args.corpora:
        texts = archive_texts(corpus, args.data, args.seed)
        for n_topics in args.topics:
            result = measure(texts, n_topics, args.held_out)
            for name in ("shares", "recovery"):
                median, largest, within, errors = result[name]
                print(f"| {corpus} | {n_topics} | {name} | {median:.3f} | {largest:.3f} | {within:.2f} | "
                      f"{errors} of {n_topics} | {result['share_s']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
