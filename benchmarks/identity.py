"""Topic identity on stationary streams whose truth we did not fit: what a refresh after more of
the same stream changes.

Each setting is a stream drawn from a tomotopy Gibbs truth (the quality protocol's
:mod:`benchmarks.quality.truths`, cached fits) with one refresh every ``--every`` documents. A
stationary stream has nothing to announce after the burn-in, so every birth, death and return
after the refresh that ended it is churn. Reported per variant: matched L1 at every refresh,
anchors replaced per refresh, events after the burn-in.

    python -m benchmarks.identity \\
        --settings 20newsgroups:20:0.03 reuters:40:0.03 --variants default raw=anchor_rectification=0
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine
from benchmarks.quality import streams, truths
from benchmarks.quality.__main__ import CACHE
from benchmarks.quality.variants import describe, parse
from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1


def follow(corpus: str, n_topics: int, alpha: float, settings: dict, n_docs: int, every: int, cache: Path) -> dict:
    """One pass over the setting's stream, refreshing every ``every`` documents."""
    truth = truths.load(corpus, n_topics, cache=cache)
    stream = streams.draw(truth, n_docs, alpha)
    model = StreamingTopicModel(n_topics, vocabulary=list(truth.vocabulary), seed=0, **settings)
    l1, moved, refresh_s = [], [], []
    after = {"birth": 0, "death": 0, "return": 0}
    previous = None
    for start in range(0, n_docs, every):
        model.learn_many(stream[start:start + every])
        t0 = time.perf_counter()
        snapshot = model.refresh()
        refresh_s.append(time.perf_counter() - t0)
        l1.append(round(matched_l1(truth.topic_word, np.asarray(snapshot.topic_word, dtype=float)), 3))
        moved.append(None if previous is None else len(set(snapshot.anchors) - set(previous.anchors)))
        if previous is not None and not previous.forming:  # the burn-in's own announcement excluded
            for event in snapshot.events:
                if event["type"] in after:
                    after[event["type"]] += 1
        previous = snapshot
    return {"l1": l1, "anchors_replaced": moved, "events_after_burn_in": after,
            "refresh_s_median": round(statistics.median(refresh_s), 2)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=["20newsgroups:20:0.03", "reuters:40:0.03"],
                        metavar="CORPUS:K:ALPHA")
    parser.add_argument("--variants", nargs="+", default=["default"])
    parser.add_argument("--docs", type=int, default=60_000)
    parser.add_argument("--every", type=int, default=5_000)
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args(argv)
    print(f"# {machine()}")
    print("| setting | variant | L1 per refresh | anchors replaced per refresh | births / deaths / returns "
          "after the burn-in | refresh s (median) |\n|---|---|---|---|---|---|")
    for spec in args.settings:
        corpus, k, alpha = spec.split(":")
        for variant in args.variants:
            name, settings = parse(variant)
            result = follow(corpus, int(k), float(alpha), settings, args.docs, args.every, args.cache)
            events = result["events_after_burn_in"]
            print(f"| {corpus} K={k} alpha={alpha} | `{name}` ({describe(settings)}) | "
                  f"{' '.join(map(str, result['l1']))} | {' '.join('-' if m is None else str(m) for m in result['anchors_replaced'])} | "
                  f"{events['birth']} / {events['death']} / {events['return']} | {result['refresh_s_median']} |", flush=True)


if __name__ == "__main__":
    main()
