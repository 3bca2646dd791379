"""Ingest throughput of the co-occurrence kernel on NYT-shaped documents.

V = 15,000 words, 300 tokens and about 200 distinct words per document, Zipf-like frequencies.
Next to it, in the same run, the naive baseline of BENCHMARKS.md, "Ingest": a numba loop that adds
one document's pairs at a time into a dense V x V float64 matrix.

    python -m benchmarks.ingest [--docs 20000] [--batch 4096]

Next to wall time, documents per CPU-second of the process (all its threads, mean of the
repeats): the steadier figure on a shared machine, where wall time mostly says how many cores
other jobs left free.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from benchmarks.common import machine, median_time, zipf_batch
from streamtopics.statistics.cooccurrence import CooccurrenceStats
from streamtopics.text.documents import DocumentBatch


@njit(cache=True, nogil=True)
def one_document_at_a_time(q, indptr, indices, counts):
    """Baseline: every (w, v) pair of each document, in document order, into a dense Q."""
    for d in range(indptr.size - 1):
        start, end = indptr[d], indptr[d + 1]
        n = counts[start:end].sum()
        weight = 1.0 / (n * (n - 1.0))
        for a in range(start, end):
            w = indices[a]
            f = counts[a] * weight
            for b in range(start, end):
                q[w, indices[b]] += f * counts[b]
            q[w, w] -= f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    corpus = zipf_batch(args.docs, args.words, tokens=300, exponent=1.0, seed=0)
    distinct = np.diff(corpus.indptr)
    full_pairs = float((distinct.astype(np.float64) ** 2).sum())
    print(machine())
    print(f"{args.docs} documents, V = {args.words}, 300 tokens, {distinct.mean():.0f} distinct words per document")

    batches = [corpus.select(np.arange(s, min(s + args.batch, args.docs))) for s in range(0, args.docs, args.batch)]

    # Both targets are allocated and touched once outside the timings (page faults on 0.9 / 1.8 GB
    # of fresh memory would otherwise dominate); repeats keep adding into them.
    stats = CooccurrenceStats(args.words)
    stats.packed[:] = 0.0

    def ours():
        for batch in batches:
            stats.update(batch)

    dense = np.zeros((args.words, args.words))
    dense[:] = 0.0

    def baseline():
        one_document_at_a_time(dense, corpus.indptr, corpus.indices, corpus.counts)

    small = DocumentBatch(corpus.indptr[:3], corpus.indices[: corpus.indptr[2]], corpus.counts[: corpus.indptr[2]], corpus.keys[:2])
    CooccurrenceStats(args.words).update(small)  # compile
    one_document_at_a_time(np.zeros((args.words, args.words)), small.indptr, small.indices, small.counts)

    cpu_start = time.process_time()
    t_ours = median_time(ours, args.repeats)
    cpu_ours = (time.process_time() - cpu_start) / args.repeats
    t_base = median_time(baseline, args.repeats)
    print()
    print("| kernel | documents/s | per CPU-second | pair-adds/s (full-matrix equivalent) | cells written/s |")
    print("|---|---|---|---|---|")
    print(f"| batched, packed upper triangle, {args.batch} docs/batch | {args.docs / t_ours:,.0f} | "
          f"{args.docs / cpu_ours:,.0f} | "
          f"{full_pairs / t_ours / 1e6:,.0f} M | {0.5 * (full_pairs + distinct.sum()) / t_ours / 1e6:,.0f} M |")
    print(f"| one document at a time, dense V x V (baseline) | {args.docs / t_base:,.0f} | – | "
          f"{full_pairs / t_base / 1e6:,.0f} M | {full_pairs / t_base / 1e6:,.0f} M |")
    print(f"\nspeed-up over the baseline: {t_base / t_ours:.2f}x (median of {args.repeats})")


if __name__ == "__main__":
    main()
