"""Shared helpers for the benchmark scripts: corpora shaped like real streams, machine facts."""

from __future__ import annotations

import os
import platform
import time

import numpy as np

from streamtopics.text.documents import DocumentBatch


def machine() -> str:
    """One line naming the machine, for BENCHMARKS.md."""
    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, numba {numba.__version__} ({numba.get_num_threads()} threads), numpy {np.__version__}"


def zipf_batch(n_docs: int, n_words: int, tokens: int, exponent: float, seed: int) -> DocumentBatch:
    """Pre-indexed documents of ``tokens`` tokens drawn from a Zipf-like word distribution
    (``p(rank r) ~ r^-exponent``), the shape of news text once stop words are gone."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1) ** exponent
    cdf = np.cumsum(p / p.sum())
    draws = np.searchsorted(cdf, rng.random((n_docs, tokens)))
    draws = np.minimum(draws, n_words - 1)
    draws.sort(axis=1)
    indptr, indices, counts = [0], [], []
    for row in draws:
        ids, c = np.unique(row, return_counts=True)
        indices.append(ids)
        counts.append(c)
        indptr.append(indptr[-1] + ids.size)
    return DocumentBatch(np.array(indptr, np.int64), np.concatenate(indices).astype(np.int32),
                         np.concatenate(counts).astype(np.float64), np.arange(n_docs, dtype=np.uint64))


def median_time(function, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
