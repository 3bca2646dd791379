"""The carried refinement (``refine_carry``, the default) against refreshes that all restart from the anchor seed.

One Gibbs-truth stream of the quality protocol (tomotopy truths, ``benchmarks.quality``), fed in
chunks with a refresh after each, once with each setting in the same run: per refresh its
seconds, the refinement's share, what the refinement continued (``restart``, ``carried``, or which
won a challenge) and the matched L1 to the truth; then per setting the median refresh once the
reservoir is full, all refreshes' seconds, documents per second end to end, and the final L1.
``--only ids-first`` runs a third setting, ``refine_fill_restarts=False`` (the burn-in's refinement
carried through the fill unchallenged: topic ids first).

    python -m benchmarks.carried_refinement --corpus 20newsgroups --topics 40 --documents 70000
    python -m benchmarks.carried_refinement --corpus 20newsgroups --topics 50 --only carried

The truths are fitted on first use (minutes) and cached in ``.artifacts/quality``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.quality import truths
from benchmarks.quality.streams import draw
from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1

CACHE = Path(__file__).resolve().parents[1] / ".artifacts" / "quality"
SETTINGS = {"carried": {}, "restarts": {"refine_carry": False}, "ids-first": {"refine_fill_restarts": False}}
COMPARED = ("carried", "restarts")  # run unless --only names one setting


def run(truth, documents, every: int, settings: dict) -> dict:
    """Feed ``documents`` in chunks of ``every``, refreshing after each; the rows and totals."""
    model = StreamingTopicModel(truth.topic_word.shape[1], truth.vocabulary, **settings)
    rows, ingest_s, full = [], 0.0, model.config.resolved_reservoir_size()
    for start in range(0, documents.shape[0], every):
        t0 = time.perf_counter()
        model.learn_many(documents[start:start + every])
        ingest_s += time.perf_counter() - t0
        model.refresh()
        timings = model.last_refresh
        rows.append({"documents": model.snapshot.documents_seen, "total_s": round(timings["total_s"], 2),
                     "refine_s": round(timings["refine_s"], 2), "source": timings.get("refinement_source"),
                     "full": len(model.ingest.reservoir) >= full,
                     "l1": round(matched_l1(truth.topic_word, model.snapshot.topic_word), 4)})
        print(json.dumps(rows[-1]), flush=True)
    refresh_s = sum(r["total_s"] for r in rows)
    return {"rows": rows, "ingest_s": ingest_s, "refresh_s": refresh_s,
            "full_median_s": statistics.median([r["total_s"] for r in rows if r["full"]] or [float("nan")]),
            "documents_per_s": documents.shape[0] / (ingest_s + refresh_s), "l1": rows[-1]["l1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="20newsgroups", help="truth corpus (benchmarks.quality.corpora)")
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--alpha", type=float, default=0.1, help="Dirichlet of the drawn mixtures")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=5_000, help="documents between refreshes")
    parser.add_argument("--stream-seed", type=int, default=1, help="seed of the drawn stream")
    parser.add_argument("--only", choices=sorted(SETTINGS), help="run one setting only")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args()
    truth = truths.load(args.corpus, args.topics, cache=args.cache)
    documents = draw(truth, args.documents, args.alpha, seed=args.stream_seed)
    results = {}
    for name, settings in SETTINGS.items():
        if args.only == name or (args.only is None and name in COMPARED):
            print(f"# {name} ({settings or 'defaults'})", flush=True)
            results[name] = run(truth, documents, args.every, settings)
    for name, r in results.items():
        print(f"{name}: median refresh once the reservoir is full {r['full_median_s']:.2f} s; all refreshes "
              f"{r['refresh_s']:.1f} s, ingest {r['ingest_s']:.1f} s, {r['documents_per_s']:,.0f} documents/s end to "
              f"end; L1 at {r['rows'][-1]['documents']:,} documents {r['l1']}")
    if len(results) == 2:
        carried, restarts = results["carried"], results["restarts"]
        print(f"carried / restarts: median full refresh {carried['full_median_s'] / restarts['full_median_s']:.2f}, "
              f"all refreshes {carried['refresh_s'] / restarts['refresh_s']:.2f}")


if __name__ == "__main__":
    main()
