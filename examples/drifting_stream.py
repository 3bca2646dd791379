"""Replay a drifting stream and print topic events as they happen (no broker needed).

A synthetic stream of 4 live topics: at document --switch one topic stops and a new one starts.
The model forgets (half-life --half-life documents), keeps one spare topic slot, refreshes every
--refresh-every documents of stream time (one document per second here), and prints every birth,
death and anchor change with the topic ids that stay stable across refreshes; at the end, the
prevalence history of each topic kept in bounded memory.

    python examples/drifting_stream.py
    python examples/drifting_stream.py --half-life 0      # no forgetting: the new topic is found late
"""

from __future__ import annotations

import argparse

from streamtopics.drifting import drifting_stream
from streamtopics.model import StreamingTopicModel


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=6000)
    parser.add_argument("--switch", type=int, default=3000)
    parser.add_argument("--half-life", type=float, default=500.0, help="documents; 0: no forgetting")
    parser.add_argument("--refresh-every", type=float, default=100.0, help="seconds of stream time")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    stream = drifting_stream(args.documents, args.switch, seed=args.seed)
    print(f"{args.documents} documents; at document {args.switch} the topic anchored by "
          f"a{stream.dying}_* stops and the one anchored by a{stream.newborn}_* starts")
    model = StreamingTopicModel(5, stream.vocabulary, anchor_min_df=20, half_life=args.half_life or None,
                                min_prevalence=0.15, batch_size=100, history_size=64)
    warmup = 1000  # documents before the first snapshot: fewer give noisy topics
    words = stream.vocabulary
    rows = stream.documents
    version = 0
    for d in range(rows.shape[0]):
        a, b = rows.indptr[d], rows.indptr[d + 1]
        model.learn_one({words[i]: c for i, c in zip(rows.indices[a:b], rows.data[a:b])}, key=d,
                        stream_time=float(d))
        if d + 1 == warmup:
            model.refresh(stream_time=float(d))
            model.schedule.every_stream_seconds = args.refresh_every  # from now on, every T seconds of stream time
        snapshot = model.snapshot
        if snapshot is None or snapshot.version == version:
            continue
        version = snapshot.version
        for event in snapshot.events:
            if event["type"] == "birth":
                top = ", ".join(w for w, _ in snapshot.top_words(5)[event["topic"]])
                print(f"doc {snapshot.documents_seen:5d}: BIRTH topic {event['topic']} "
                      f"(anchor {event['anchor']}; {top})")
            elif event["type"] == "death":
                print(f"doc {snapshot.documents_seen:5d}: DEATH topic {event['topic']}")
            elif (snapshot.prevalence[snapshot.column(event["topic"])] >= 0.15
                  and event["anchor_before"][:2] != event["anchor_after"][:2]):
                print(f"doc {snapshot.documents_seen:5d}: change of topic {event['topic']}: anchor "
                      f"{event['anchor_before']} -> {event['anchor_after']} (L1 moved {event['distance']:.2f})")

    print("\nprevalence history (bounded:", len(model.history), "records)")
    for topic in model.history.topic_ids():
        xs, ys = model.history.series(topic)
        if max(ys) < 0.15:
            continue  # minor topics of the spare slot
        trail = " ".join(f"{x}:{y:.2f}" for x, y in list(zip(xs, ys))[:: max(1, len(xs) // 8)])
        print(f"topic {topic}: {trail}")


if __name__ == "__main__":
    main()
