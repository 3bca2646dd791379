"""Detection delay of a new topic against its share of the stream, with and without forgetting.

Stream: :func:`streamtopics.drifting.drifting_stream`, 4 live topics over 200 words, 40 tokens per
document; at document ``--switch`` one topic (share s) stops and a new one (share s) starts. The
model keeps one spare topic slot (K = 5), refreshes every ``--refresh`` documents, and reports
births/deaths of significant topics; memory: exponential forgetting, a sliding window, or exact sums (``min_prevalence = s / 2``). Delay = documents after the
switch until the first birth event whose topic is nearest (L1) to the new true topic, and until
the death of the topic nearest to the stopped one ("-" = not within the stream).

    python -m benchmarks.drift --seeds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from streamtopics.alignment import l1_distances
from streamtopics.drifting import drifting_stream
from streamtopics.model import StreamingTopicModel


def delays(share: float, memory: dict, seed: int, n_docs: int, switch: int, refresh: int):
    stream = drifting_stream(n_docs, switch, share=share, seed=seed)
    model = StreamingTopicModel(5, stream.vocabulary, anchor_min_df=20, batch_size=refresh,
                                min_prevalence=share / 2, **memory)
    birth = death = None
    dying_id = None
    for start in range(0, n_docs, refresh):
        model.learn_many(stream.documents[start:start + refresh])
        position = start + refresh
        if position < 1000:
            continue
        snapshot = model.refresh()
        nearest = l1_distances(stream.topic_word, snapshot.topic_word).argmin(axis=0)  # true topic of each column
        if position <= switch:
            columns = np.flatnonzero(nearest == stream.dying)
            if columns.size:
                dying_id = snapshot.topic_ids[columns[0]]
            continue
        for event in snapshot.events:
            if event["type"] == "birth" and birth is None and nearest[snapshot.column(event["topic"])] == stream.newborn:
                birth = position - switch
            if event["type"] == "death" and death is None and event["topic"] == dying_id:
                death = position - switch
    return birth, death


def _fmt(values):
    found = [v for v in values if v is not None]
    if not found:
        return "-"
    text = f"{statistics.median(found):.0f}"
    return text if len(found) == len(values) else f"{text} ({len(found)}/{len(values)} found)"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.25, 0.4])
    parser.add_argument("--half-life", type=float, default=500.0)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--documents", type=int, default=8000)
    parser.add_argument("--switch", type=int, default=3000)
    parser.add_argument("--refresh", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"{args.documents} documents, switch at {args.switch}, refresh every {args.refresh}, "
          f"medians over {args.seeds} seeds; delays in documents after the switch\n")
    print("| new topic's share | forgetting | birth reported after | death reported after | seconds |")
    print("|---|---|---|---|---|")
    for share in args.shares:
        for label, memory in ((f"half-life {args.half_life:.0f}", {"half_life": args.half_life}),
                              (f"sliding window {args.window}", {"window": args.window}),
                              ("off (exact sums)", {})):
            t0 = time.perf_counter()
            runs = [delays(share, memory, seed, args.documents, args.switch, args.refresh)
                    for seed in range(args.seeds)]
            print(f"| {share:.2f} | {label} | {_fmt([r[0] for r in runs])} | {_fmt([r[1] for r in runs])} | "
                  f"{time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
