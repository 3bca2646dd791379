"""The three anchor selectors (fastanchors, rp, hybrid): ingest cost, re-selection time, accuracy.

1. Ingest: the random-projection tracker's update against the co-occurrence kernel, per
   document, in one run, on NYT-shaped documents (V = 15,000, 300 tokens, Zipf-like), at the
   model's default P (``n_projections_for_topics(K)``) for K = 20, 50, 100.
2. Re-selection: ``select_anchors`` for each selector on the statistics of a separable synthetic
   stream at V = 15,000, K = 100 (Dirichlet(0.1), 300-token documents), with the planted anchors
   found.
3. Accuracy: matched L1 of the recovered topics, the three selectors on the same streams, on the
   semi-synthetic corpus of ``benchmarks/recovery_error.py`` (K = 20 topics fitted to UCI KOS,
   Dirichlet(0.03) proportions) at three sizes; also hybrid with 4x the default P.

    python -m benchmarks.anchor_selectors [--docs 20000] [--select-docs 30000] [--sizes 2000,10000,50000]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.common import machine, median_time, zipf_batch
from benchmarks.recovery_error import CORPORA, DATA
from streamtopics import StreamingTopicModel
from streamtopics.cooccurrence import CooccurrenceStats
from streamtopics.documents import DocumentBatch
from streamtopics.evaluation import matched_l1
from streamtopics.refresh import recover_topics, select_anchors, support_mask
from streamtopics.synthetic import load_uci_bow, semi_synthetic, separable_topics
from streamtopics.trackers import RandomProjectionTracker, n_projections_for_topics

METHODS = ("fastanchors", "rp", "hybrid")


def ingest_table(n_docs: int, n_words: int, batch: int, repeats: int) -> None:
    corpus = zipf_batch(n_docs, n_words, tokens=300, exponent=1.0, seed=0)
    distinct = np.diff(corpus.indptr)
    batches = [corpus.select(np.arange(s, min(s + batch, n_docs))) for s in range(0, n_docs, batch)]
    small = batches[0].select(np.arange(2))
    CooccurrenceStats(n_words).update(small)  # compile
    RandomProjectionTracker(n_words, 8).update(small.indptr, small.indices, small.counts, small.keys)

    def cooccurrence():
        stats = CooccurrenceStats(n_words)
        for b in batches:
            stats.update(b)

    def tracker(p):
        t = RandomProjectionTracker(n_words, p, seed=0)
        for b in batches:
            t.update(b.indptr, b.indices, b.counts, b.keys)

    rows = [("co-occurrence kernel (packed upper triangle)", median_time(cooccurrence, repeats), None)]
    for k in (20, 50, 100):
        p = n_projections_for_topics(k)
        rows.append((f"tracker, P = {p} (default for K = {k})", median_time(lambda: tracker(p), repeats), p))
    base = rows[0][1]
    print(f"### Ingest cost per document\n\n{n_docs} documents, V = {n_words}, 300 tokens, "
          f"{distinct.mean():.0f} distinct words per document, batches of {batch}, median of {repeats}\n")
    print("| kernel | µs / document | documents / s | vs co-occurrence | memory MB |")
    print("|---|---|---|---|---|")
    for name, seconds, p in rows:
        memory = (n_words * (n_words + 1) // 2 * 8 if p is None else n_words * (p + 3) * 8) / 2**20
        print(f"| {name} | {1e6 * seconds / n_docs:,.1f} | {n_docs / seconds:,.0f} | {seconds / base:.2f}x | {memory:,.0f} |")
    print()


def selection_table(n_words: int, n_topics: int, n_docs: int, repeats: int) -> None:
    truth = separable_topics(n_words, n_topics, anchor_mass=0.05, seed=1)
    planted = set(truth.anchors.ravel().tolist())
    docs, _ = semi_synthetic(truth.topic_word, n_docs, alpha=0.1, doc_length=300, seed=2)
    model = StreamingTopicModel(n_topics, vocabulary=[f"w{i}" for i in range(n_words)], anchor_method="hybrid")
    t0 = time.perf_counter()
    model.learn_many(docs)
    stats = model.statistics()
    ingest = time.perf_counter() - t0
    min_df = model.min_document_frequency()
    print(f"### Anchor re-selection time\n\nV = {n_words}, K = {n_topics}, {n_docs} documents of 300 tokens "
          f"(separable, Dirichlet(0.1)), P = {model.tracker.n_projections}, min_df = {min_df}, "
          f"ingest of both statistics {ingest:.0f} s; median of {repeats}\n")
    print("| selector | rows searched | re-selection s | planted anchors found |")
    print("|---|---|---|---|")
    for method in METHODS:
        def run():
            return select_anchors(stats, n_topics, min_df, model.anchor_candidate_limit(), model.projection_dim,
                                  model.anchor_cleanup, model.seed, method=method, tracker=model.tracker,
                                  min_support=model.rp_min_support)
        anchors = run()  # warm-up; also the result reported
        seconds = median_time(run, repeats)
        if method == "fastanchors":
            rows = int(min(model.anchor_candidate_limit(), (stats.document_frequency >= min_df).sum()))
        else:
            rows = int(model.tracker.candidates(support_mask(stats, min_df, model.rp_min_support)).size)
        found = len(planted & set(anchors.tolist()))
        print(f"| {method} | {rows:,} | {seconds:.2f} | {found}/{n_topics} |")
    print()


def accuracy_table(corpus: str, n_topics: int, sizes: list[int]) -> None:
    docword, vocab = CORPORA[corpus]
    counts, words = load_uci_bow(DATA / corpus / docword, DATA / corpus / vocab)
    fitted = StreamingTopicModel(n_topics, vocabulary=words)
    fitted.learn_many(counts)
    truth = fitted.refresh().topic_word
    length = int(round(counts.sum() / counts.shape[0]))
    print(f"### Matched L1 error by selector\n\nTrue topics: K = {n_topics} fitted on {corpus} "
          f"({counts.shape[0]} documents, V = {len(words)}); documents of {length} tokens, Dirichlet(0.03); "
          f"the three selectors on the same stream of each size, default options "
          f"(P = {n_projections_for_topics(n_topics)}); selection s in parentheses\n")
    big_p = 4 * n_projections_for_topics(n_topics)
    print("| documents | " + " | ".join(METHODS) + f" | hybrid, P = {big_p} |")
    print("|---|" + "---|" * (len(METHODS) + 1))
    for size in sizes:
        docs, _ = semi_synthetic(truth, size, alpha=0.03, doc_length=length, seed=size)
        model = StreamingTopicModel(n_topics, vocabulary=words, anchor_method="hybrid")
        model.learn_many(docs)
        stats = model.statistics()
        cells = []
        for method in METHODS:  # what model.refresh() does with anchor_method=method, cold
            t0 = time.perf_counter()
            anchors = select_anchors(stats, n_topics, model.min_document_frequency(), model.anchor_candidate_limit(),
                                     model.projection_dim, model.anchor_cleanup, model.seed, method=method,
                                     tracker=model.tracker, min_support=model.rp_min_support)
            seconds = time.perf_counter() - t0
            result = recover_topics(stats, anchors, None, model.recovery, model.recovery_tol, model.recovery_max_iter)
            cells.append(f"{matched_l1(truth, result.topic_word):.3f} ({seconds:.2f} s)")
        # hybrid with 4x the default directions: a second tracker fed the same documents (same keys)
        big = RandomProjectionTracker(len(words), big_p, seed=model.seed)
        batch = DocumentBatch.from_csr(docs)
        big.update(batch.indptr, batch.indices, batch.counts, batch.keys)
        t0 = time.perf_counter()
        anchors = select_anchors(stats, n_topics, model.min_document_frequency(), model.anchor_candidate_limit(),
                                 model.projection_dim, model.anchor_cleanup, model.seed, method="hybrid",
                                 tracker=big, min_support=model.rp_min_support)
        seconds = time.perf_counter() - t0
        result = recover_topics(stats, anchors, None, model.recovery, model.recovery_tol, model.recovery_max_iter)
        cells.append(f"{matched_l1(truth, result.topic_word):.3f} ({seconds:.2f} s)")
        print(f"| {size:,} | " + " | ".join(cells) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20000, help="documents for the ingest table")
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--topics", type=int, default=100, help="K of the re-selection table")
    parser.add_argument("--select-docs", type=int, default=30000)
    parser.add_argument("--corpus", default="uci-kos", choices=sorted(CORPORA))
    parser.add_argument("--accuracy-topics", type=int, default=20)
    parser.add_argument("--sizes", default="2000,10000,50000")
    parser.add_argument("--tables", default="ingest,selection,accuracy")
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    print(machine(), f"; load average at start {os.getloadavg()[0]:.1f} (a shared machine)\n")
    if "ingest" in tables:
        ingest_table(args.docs, args.words, args.batch, args.repeats)
    if "selection" in tables:
        selection_table(args.words, args.topics, args.select_docs, args.repeats)
    if "accuracy" in tables:
        accuracy_table(args.corpus, args.accuracy_topics, [int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
