"""Refresh latency: anchors, recovery and alignment, cold and warm, with solver iterations.

A separable synthetic model (V words, K topics, Dirichlet(0.1) proportions, 300-token documents)
feeds M documents; the model refreshes cold, absorbs 10% more documents and refreshes warm; a
second model refreshes cold on the same final statistics for comparison.

    python -m benchmarks.refresh --words 5000 --topics 50
    python -m benchmarks.refresh --words 15000 --topics 100
"""

from __future__ import annotations

import argparse

from benchmarks.common import machine
from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.synthetic import semi_synthetic, separable_topics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--docs", type=int, default=30000)
    args = parser.parse_args()
    truth = separable_topics(args.words, args.topics, anchor_mass=0.05, seed=1)
    docs, _ = semi_synthetic(truth.topic_word, int(args.docs * 1.1), alpha=0.1, doc_length=300, seed=2)
    first, more = docs[: args.docs], docs[args.docs :]
    vocabulary = [f"w{i}" for i in range(args.words)]

    print(machine())
    print(f"V = {args.words}, K = {args.topics}, {args.docs} + {more.shape[0]} documents of 300 tokens\n")
    print("| refresh | anchors s | products s | solve s | align s | total s | mean iterations | max | matched L1 |")
    print("|---|---|---|---|---|---|---|---|---|")

    def row(name, model, snapshot):
        r = model.last_refresh
        print(f"| {name} | {r['anchors_s']:.2f} | {r['products_s']:.2f} | {r['solve_s']:.2f} | {r['align_s']:.3f} | "
              f"{r['total_s']:.2f} | {r['iterations_mean']:.1f} | {r['iterations_max']} | "
              f"{matched_l1(truth.topic_word, snapshot.topic_word):.3f} |")

    model = StreamingTopicModel(args.topics, vocabulary=vocabulary)
    model.learn_many(first)
    model.refresh()  # compiles the kernels; not reported
    model = StreamingTopicModel(args.topics, vocabulary=vocabulary)
    model.learn_many(first)
    row(f"cold, {args.docs} docs", model, model.refresh())
    model.learn_many(more)
    row(f"warm, +{more.shape[0]} docs", model, model.refresh())
    cold = StreamingTopicModel(args.topics, vocabulary=vocabulary, warm_start=False)
    cold.learn_many(docs)
    row(f"cold, same {docs.shape[0]} docs", cold, cold.refresh())


if __name__ == "__main__":
    main()
