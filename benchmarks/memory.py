"""Peak memory of a model at V = 15,000: ingest, then a refresh (resident set size, from the OS).

    python -m benchmarks.memory [--words 15000] [--topics 100] [--cooccurrence auto|exact|sketch]

``--cooccurrence`` picks the statistics (the model's setting; ``auto`` sketches above 20,000 words):
``python -m benchmarks.memory --words 100000`` measures the large-vocabulary mode.
"""

from __future__ import annotations

import argparse
import resource

from benchmarks.common import machine, zipf_batch
from streamtopics import StreamingTopicModel


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--cooccurrence", default="auto", choices=("auto", "exact", "sketch"))
    args = parser.parse_args()
    print(machine())
    baseline = peak_mb()
    model = StreamingTopicModel(args.topics, vocabulary=[f"w{i}" for i in range(args.words)],
                                cooccurrence=args.cooccurrence)
    for start in range(0, args.docs, 4096):
        model.learn_many(zipf_batch(min(4096, args.docs - start), args.words, 300, 1.0, seed=start))
    after_ingest = peak_mb()
    model.refresh()
    after_refresh = peak_mb()
    print(f"statistics: {type(model.statistics()).__name__}")
    print("| V | K | statistics (MB) | peak RSS after ingest (MB) | peak RSS after refresh (MB) | interpreter + libraries (MB) |")
    print("|---|---|---|---|---|---|")
    print(f"| {args.words} | {args.topics} | {model.statistics().nbytes / 2**20:.0f} | {after_ingest:.0f} | {after_refresh:.0f} | {baseline:.0f} |")


if __name__ == "__main__":
    main()
