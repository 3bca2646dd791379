"""Batch Gibbs LDA given only the documents our refinement fits: is a gap between our defaults and
the quality protocol's tomotopy reference a matter of how many documents each one sees?

The protocol's reference is tomotopy's batch Gibbs, 100 iterations over the whole stream (100,000
documents). Our refinement fits nine tenths of its reservoir (``default_reservoir_size(K)``:
14,400 documents at K = 100, 28,800 at K = 50, 45,000 at K = 20). For each Gibbs-truth setting
(the protocol's truths and seeded streams, :mod:`benchmarks.quality`) this prints the matched L1
of tomotopy fitted on only the first that many documents of the stream, for each ``--iterations``.
With ``--ours`` it adds our default model after one pass over ``--documents`` documents, and the
same model with every document in its reservoir (``reservoir_size=--documents``), each with the
time of its last refresh. Our anchor seed comes from the co-occurrences of all the documents;
tomotopy's fit sees only its share of them.

    python -m benchmarks.batch_volume 20newsgroups:50:0.1 reuters:50:0.1 --iterations 100 500
    python -m benchmarks.batch_volume debian:50:0.1 --iterations 100 --ours
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import machine
from benchmarks.quality import streams, truths
from benchmarks.quality.__main__ import CACHE
from benchmarks.quality.systems import build, one_pass, warm_up
from streamtopics.config import default_reservoir_size
from streamtopics.evaluation import matched_l1
from streamtopics.refresh.refinement import HOLDOUT_EVERY


def refinement_documents(n_topics: int) -> int:
    """Documents the default refinement fits at ``n_topics`` (its reservoir less the held-out share)."""
    size = default_reservoir_size(n_topics)
    return size - len(range(0, size, HOLDOUT_EVERY))  # every HOLDOUT_EVERY-th document, from the first, is held out


def fitted_l1(system: str, truth, stream, n_documents: int, variants: dict, iterations: int = 100):
    """Matched L1 of ``system`` after one pass over the first ``n_documents`` documents, and the
    seconds of its last ``finish`` (tomotopy: the Gibbs sweeps; ours: the refresh)."""
    model = build(system, truth.topic_word.shape[1], truth.vocabulary, n_documents, variants, iterations)
    found = {}
    timing = one_pass(model, stream[:n_documents], (n_documents,),
                      lambda seen, m: found.__setitem__(seen, matched_l1(truth.topic_word, m.topic_word())))
    last = timing["checkpoint_times"][-1]
    return found[n_documents], last.get("refresh_s", last["finish_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("settings", nargs="+", metavar="CORPUS:K:ALPHA")
    parser.add_argument("--iterations", type=int, nargs="+", default=[100, 500], help="tomotopy's Gibbs iterations")
    parser.add_argument("--ours", action="store_true", help="also our defaults, and every document in the reservoir")
    parser.add_argument("--documents", type=int, default=100_000, help="stream length for --ours")
    parser.add_argument("--cache", default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args()
    print(machine())
    variants = {"default": {}, "whole": {"reservoir_size": args.documents}}
    columns = [f"tomotopy {i} it." for i in args.iterations]
    if args.ours:
        columns += ["ours, defaults (refresh s)", f"ours, reservoir {args.documents:,} (refresh s)"]
    print("| setting | documents fitted | " + " | ".join(columns) + " | seconds |")
    print("|---|---:|" + "---:|" * (len(columns) + 1))
    for spec in args.settings:
        corpus, n_topics, alpha = spec.split(":")
        truth = truths.load(corpus, int(n_topics), cache=args.cache)
        stream = streams.draw(truth, args.documents, float(alpha))
        n = refinement_documents(int(n_topics))
        start = time.perf_counter()
        cells = [f"{fitted_l1('tomotopy', truth, stream, n, variants, i)[0]:.3f}" for i in args.iterations]
        if args.ours:
            warm_up(truth.vocabulary, stream)
            for name in variants:
                l1, seconds = fitted_l1(name, truth, stream, args.documents, variants)
                cells.append(f"{l1:.3f} ({seconds:.1f})")
        print(f"| {spec} | {n:,} | " + " | ".join(cells) + f" | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
