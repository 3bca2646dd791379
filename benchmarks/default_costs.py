"""What the quality defaults of issue 14 cost: ingest and warm refresh, the defaults against the
earlier ones, in one run: the refinement as it was (10 iterations over 2,000 documents, no
smoothing) and the engine before issue 14 (no refinement, no background topic, raw anchor rows),
and the defaults with the raw rows instead of the rectified block in the anchor search.

Ingest: ``learn_many`` on pre-indexed NYT-shaped documents (V words, 300 tokens, Zipf-like), the
model's whole per-document path (the refinement reservoir included), median of 3 passes.
Refresh: Zipf-shaped topics without anchor words (``zipf_topics``: on separable topics the refresh
skips the refinement), K topics, Dirichlet(0.1) mixtures, 300-token documents; a cold
refresh after M documents, then a warm one after 10 % more; the warm one is what a stream pays.
Its phases (``model.last_refresh``) follow, the median of ``--repeats`` warm refreshes, each of a
copy of the model taken after the cold refresh (the same state, the same documents added). That
one refresh also chooses the anchor candidates' depth (the stream has just passed the cap) and its
solver starts from the cold refresh's anchors; ``--sequence N`` gives what a stream pays refresh
after refresh instead: N warm refreshes one after the other, each after 10 % of M more documents
(the carried refinement's challenges and the depth choices among them), their medians and each
one's total.

    python -m benchmarks.default_costs --words 15000 --topics 100
    python -m benchmarks.default_costs --words 15000 --topics 100 --skip-ingest --settings defaults --repeats 3
    python -m benchmarks.default_costs --words 15000 --topics 100 --skip-ingest --settings defaults --sequence 12
"""

from __future__ import annotations

import argparse
import copy

import numpy as np
import scipy.sparse as sp

from benchmarks.common import machine, median_time, zipf_batch
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import semi_synthetic, zipf_topics

SETTINGS = {"defaults": {},
            "restarts (refine_carry=False)": {"refine_carry": False},
            "no emerging anchors": {"emerging_anchors": False},
            "raw anchor rows": {"anchor_rectification": 0},
            "KL-tEM alone": {"refine_sweeps": 0},
            "refinement as before": {"refine_iterations": 10, "reservoir_size": 2000, "refine_smoothing": 0.0,
                                     "anchor_rectification": 0},
            "before issue 14": {"refine_iterations": 0, "background_topic": False, "anchor_rectification": 0}}


PHASES = ("prepare_s", "anchors_s", "products_s", "solve_s", "refine_s", "share_s", "align_s", "describe_s",
          "total_s")


def as_csr(batch) -> sp.csr_matrix:
    return sp.csr_matrix((batch.counts, batch.indices, batch.indptr), shape=(len(batch), int(batch.indices.max()) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--docs", type=int, default=30000)
    parser.add_argument("--ingest-docs", type=int, default=20000)
    parser.add_argument("--skip-ingest", action="store_true", help="only the refresh tables")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--repeats", type=int, default=1, help="warm refreshes per setting (medians reported)")
    parser.add_argument("--sequence", type=int, default=0,
                        help="instead: this many warm refreshes one after the other, each after 10%% more documents")
    args = parser.parse_args()
    settings_run = {name: SETTINGS[name] for name in args.settings}
    vocabulary = [f"w{i}" for i in range(args.words)]
    print(f"# {machine()}")

    if not args.skip_ingest:
        ingest(args, vocabulary, settings_run)

    topic_word = zipf_topics(args.words, args.topics, seed=1)
    step = args.docs // 10
    docs, _ = semi_synthetic(topic_word, args.docs + step * max(1, args.sequence), alpha=0.1, doc_length=300, seed=2)
    print(f"\n| settings | cold refresh s ({args.docs} docs) | warm refresh s (+10 %) | warm: solve s | "
          "warm: solver iterations mean / max | warm: refinement s |\n|---|---|---|---|---|---|")
    phases, totals = {}, {}
    for name, settings in settings_run.items():
        model = StreamingTopicModel(args.topics, vocabulary=vocabulary, **settings)
        model.learn_many(docs[: args.docs])
        model.refresh()  # compiles the kernels; the figure below is a second model's
        model = StreamingTopicModel(args.topics, vocabulary=vocabulary, **settings)
        model.learn_many(docs[: args.docs])
        model.refresh()
        cold = model.last_refresh["total_s"]
        runs = []
        for start in range(args.docs, args.docs + step * args.sequence, step):
            model.learn_many(docs[start:start + step])
            model.refresh()
            runs.append(model.last_refresh)
        totals[name] = " ".join(f"{r['total_s']:.2f}" for r in runs)
        for _ in range(0 if args.sequence else max(args.repeats, 1)):
            warm_model = copy.deepcopy(model)
            warm_model.learn_many(docs[args.docs:args.docs + step])
            warm_model.refresh()
            runs.append(warm_model.last_refresh)
            del warm_model
        warm = {key: float(np.median([r[key] for r in runs])) for key in PHASES + ("solve_s", "iterations_mean")}
        warm["iterations_max"] = max(r["iterations_max"] for r in runs)
        phases[name] = warm
        print(f"| {name} | {cold:.2f} | {warm['total_s']:.2f} | {warm['solve_s']:.2f} | "
              f"{warm['iterations_mean']:.1f} / {warm['iterations_max']} | {warm['refine_s']:.2f} |")
        del model
    print(f"\nwarm refresh phases, s (median of {args.sequence or max(args.repeats, 1)}):\n\n| settings | "
          + " | ".join(p.removesuffix("_s") for p in PHASES) + " |\n" + "|---" * (len(PHASES) + 1) + "|")
    for name, warm in phases.items():
        print(f"| {name} | " + " | ".join(f"{warm[p]:.2f}" for p in PHASES) + " |")
    if args.sequence:
        print("\neach warm refresh in turn, s:\n" + "\n".join(f"- {name}: {line}" for name, line in totals.items()))


def ingest(args, vocabulary, settings_run) -> None:
    stream = as_csr(zipf_batch(args.ingest_docs, args.words, 300, 1.0, seed=3))
    stream.resize((stream.shape[0], args.words))
    print("\n| settings | ingest docs/s (median of 3) |\n|---|---|")
    rates = {}
    for name, settings in settings_run.items():
        StreamingTopicModel(args.topics, vocabulary=vocabulary, **settings).learn_many(stream[:200])  # compile
        seconds = median_time(lambda: StreamingTopicModel(args.topics, vocabulary=vocabulary, **settings)
                              .learn_many(stream))
        rates[name] = stream.shape[0] / seconds
        print(f"| {name} | {rates[name]:,.0f} |")
    if "defaults" in rates and "before issue 14" in rates:
        print(f"ingest ratio defaults / before issue 14: {rates['defaults'] / rates['before issue 14']:.3f}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
