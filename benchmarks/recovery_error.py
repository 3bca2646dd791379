"""Recovery error against sample size on a semi-synthetic corpus (Arora et al. 2013, 5.1).

A K-topic model is fitted to a real corpus (UCI KOS blog entries by default); documents are then
generated from it (Dirichlet(0.03) proportions, the corpus's mean document length), so the true
topics are known, and the model is fitted to streams of increasing size.

    python -m benchmarks.recovery_error [--corpus uci-kos] [--topics 20]
"""

from __future__ import annotations

import argparse
from pathlib import Path


from benchmarks.common import machine
from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.synthetic import load_uci_bow, semi_synthetic

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "uci-kos": ("docword.kos.txt.gz", "vocab.kos.txt.gz"),
    "nips17-bow": ("docword.nips17.txt.gz", "vocab.nips17.txt.gz"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="uci-kos", choices=sorted(CORPORA))
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--sizes", default="2000,10000,50000")
    args = parser.parse_args()
    docword, vocab = CORPORA[args.corpus]
    counts, words = load_uci_bow(args.data / args.corpus / docword, args.data / args.corpus / vocab)
    fitted = StreamingTopicModel(args.topics, vocabulary=words)
    fitted.learn_many(counts)
    truth = fitted.refresh().topic_word
    length = int(round(counts.sum() / counts.shape[0]))
    print(machine())
    print(f"true topics: K = {args.topics} fitted on {args.corpus} ({counts.shape[0]} documents, V = {len(words)}); "
          f"documents of {length} tokens, Dirichlet(0.03)\n")
    print("| documents | matched L1 per topic | refresh s |")
    print("|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",")]:
        docs, _ = semi_synthetic(truth, size, alpha=0.03, doc_length=length, seed=size)
        model = StreamingTopicModel(args.topics, vocabulary=words)
        model.learn_many(docs)
        snapshot = model.refresh()
        print(f"| {size:,} | {matched_l1(truth, snapshot.topic_word):.3f} | {model.last_refresh['total_s']:.2f} |")


if __name__ == "__main__":
    main()
