"""Ingest while a background refresh runs (``refresh_async``), against ingest with none running.

One Gibbs-truth stream of the quality protocol (``benchmarks.quality``): the model absorbs
``--warm`` documents and refreshes once (kernels compiled, and the reservoir full by default, so
later refreshes are the carried ones), then alternates, ``--rounds`` times, a stretch of ingest
alone and a stretch of ingest while a background refresh runs, both in batches of ``--batch``
documents (alone: half on numba's threads, half on one thread fewer; during the refreshes, ``--during`` documents round and round: the stream grows by what
is absorbed meanwhile, which decides when a restart challenges the carried refinement). Per round it prints both ingest rates and the refresh's seconds in the background; then
the medians and their ratios (documents/s during a refresh / documents/s without one). A background
refresh's kernels run on one numba thread fewer than ingest's (``StreamingTopicModel.refresh_async``),
so the rate during a refresh should stay near the rate alone on one thread fewer.

    python -m benchmarks.background_refresh --corpus 20newsgroups --topics 40

The truths are fitted on first use (minutes) and cached in ``.artifacts/quality``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numba

from benchmarks.quality import truths
from benchmarks.quality.streams import draw
from streamtopics import StreamingTopicModel

CACHE = Path(__file__).resolve().parents[1] / ".artifacts" / "quality"


def ingest_alone(model, documents, start: int, count: int, batch: int, threads: int) -> float:
    """Documents/s absorbing ``documents[start:start + count]`` in batches on ``threads`` numba
    threads, nothing else running."""
    everyone = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        t0 = time.perf_counter()
        for at in range(start, start + count, batch):
            model.learn_many(documents[at:at + batch])
        return count / (time.perf_counter() - t0)
    finally:
        numba.set_num_threads(everyone)


def ingest_during_refresh(model, documents, batch: int) -> tuple[float, int, float]:
    """Start a background refresh and absorb batches of ``documents`` (again from the first once
    all are absorbed) until it is done: the documents/s meanwhile, the documents absorbed, and
    the refresh's seconds."""
    t0 = time.perf_counter()
    pending = model.refresh_async()
    absorbed = 0
    while not pending.done():
        at = absorbed % documents.shape[0]
        model.learn_many(documents[at:at + batch])
        absorbed += min(batch, documents.shape[0] - at)
    elapsed = time.perf_counter() - t0
    pending.result()
    return absorbed / elapsed, absorbed, model.last_refresh["total_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="20newsgroups", help="truth corpus (benchmarks.quality.corpora)")
    parser.add_argument("--topics", type=int, default=40)
    parser.add_argument("--alpha", type=float, default=0.1, help="Dirichlet of the drawn mixtures")
    parser.add_argument("--warm", type=int, default=45_000, help="documents absorbed before the rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--alone", type=int, default=10_000, help="documents ingested alone per round")
    parser.add_argument("--during", type=int, default=20_000,
                        help="documents absorbed (round and round) while a refresh runs")
    parser.add_argument("--batch", type=int, default=200, help="documents per learn_many call")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args()
    truth = truths.load(args.corpus, args.topics, cache=args.cache)
    documents = draw(truth, args.warm + args.rounds * args.alone + args.during, args.alpha)
    model = StreamingTopicModel(args.topics, truth.vocabulary)
    model.learn_many(documents[:args.warm])
    model.refresh()
    at, alone, core_less, during = args.warm, [], [], []
    threads = numba.get_num_threads()
    for round_ in range(args.rounds):
        alone.append(ingest_alone(model, documents, at, args.alone // 2, args.batch, threads))
        core_less.append(ingest_alone(model, documents, at + args.alone // 2, args.alone // 2, args.batch,
                                      max(1, threads - 1)))
        at += args.alone
        rate, absorbed, refresh_s = ingest_during_refresh(model, documents[-args.during:], args.batch)
        during.append(rate)
        print(json.dumps({"round": round_, "alone_docs_per_s": round(alone[-1]),
                          "one_thread_fewer_docs_per_s": round(core_less[-1]), "during_docs_per_s": round(rate),
                          "absorbed_during": absorbed, "refresh_s": round(refresh_s, 2),
                          "source": model.last_refresh.get("refinement_source")}), flush=True)
    a, c, d = statistics.median(alone), statistics.median(core_less), statistics.median(during)
    print(f"median documents/s: {a:,.0f} alone on {threads} numba threads, {c:,.0f} alone on {max(1, threads - 1)}, "
          f"{d:,.0f} while a refresh runs ({d / a:.2f} of alone, {d / c:.2f} of alone on one thread fewer)")


if __name__ == "__main__":
    main()
