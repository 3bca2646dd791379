"""The carried refinement (``refine_carry``) against refreshes that refine from the anchor seed.

One Gibbs-truth stream of the quality protocol (tomotopy truths, ``benchmarks.quality``), fed in
chunks with a refresh after each: per refresh its seconds, the refinement's share, what the
refinement continued (``restart``, ``carried``, or which won a challenge) and the matched L1 to the
truth; then the medians of the carried and of the other refreshes, and the refreshes' total.

    python -m benchmarks.carried_refinement --corpus 20newsgroups --topics 50 --carry
    python -m benchmarks.carried_refinement --corpus 20newsgroups --topics 50          # restarts only

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="20newsgroups", help="truth corpus (benchmarks.quality.corpora)")
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--alpha", type=float, default=0.1, help="Dirichlet of the drawn mixtures")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=5_000, help="documents between refreshes")
    parser.add_argument("--carry", action="store_true", help="refine_carry=True")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    args = parser.parse_args()
    truth = truths.load(args.corpus, args.topics, cache=args.cache)
    documents = draw(truth, args.documents, args.alpha)
    model = StreamingTopicModel(args.topics, truth.vocabulary, refine_carry=args.carry)
    rows, ingest_s = [], 0.0
    for start in range(0, args.documents, args.every):
        t0 = time.perf_counter()
        model.learn_many(documents[start:start + args.every])
        ingest_s += time.perf_counter() - t0
        model.refresh()
        timings = model.last_refresh
        rows.append({"documents": model.snapshot.documents_seen, "total_s": round(timings["total_s"], 2),
                     "refine_s": round(timings["refine_s"], 2), "source": timings.get("refinement_source"),
                     "l1": round(matched_l1(truth.topic_word, model.snapshot.topic_word), 4)})
        print(json.dumps(rows[-1]), flush=True)
    carried = [r["total_s"] for r in rows[1:] if r["source"] == "carried"]
    others = [r["total_s"] for r in rows[1:] if r["source"] != "carried"]
    print(f"median refresh: carried {statistics.median(carried) if carried else float('nan'):.2f} s "
          f"({len(carried)}), others {statistics.median(others) if others else float('nan'):.2f} s ({len(others)}); "
          f"all refreshes {sum(r['total_s'] for r in rows):.1f} s, ingest {ingest_s:.1f} s; "
          f"L1 at {rows[-1]['documents']:,} documents {rows[-1]['l1']}")


if __name__ == "__main__":
    main()
