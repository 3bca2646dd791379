"""What the trackers' noise sums (issue 45, ``RandomProjectionTracker.signal_z``) cost in ``update``:
the same batch into a tracker with them and one without (``noise_sums = None``), alternately, in one
run; V = 15,000, 200 distinct words per document, P = 512, medians of 5.

    python -m benchmarks.tracker_noise_cost
"""

import time

import numpy as np

from streamtopics.statistics.trackers import RandomProjectionTracker


def main(n_words: int = 15_000, n_docs: int = 20_000, distinct: int = 200, repeats: int = 5) -> None:
    rng = np.random.default_rng(0)
    indptr = np.arange(n_docs + 1, dtype=np.int64) * distinct
    indices = np.concatenate([np.sort(rng.choice(n_words, distinct, replace=False)) for _ in range(n_docs)])
    counts = rng.integers(1, 4, size=indices.size).astype(np.float64)
    keys = rng.integers(0, 2**63, size=n_docs, dtype=np.uint64)
    rates = {True: [], False: []}
    for _ in range(repeats):
        for with_noise in (True, False):
            tracker = RandomProjectionTracker(n_words, 512, seed=1)
            if not with_noise:
                tracker.noise_sums = None
            tracker.update(indptr[:2049], indices.astype(np.int32), counts, keys[:2048])  # compiled, warm
            start = time.perf_counter()
            tracker.update(indptr, indices.astype(np.int32), counts, keys)
            rates[with_noise].append(n_docs / (time.perf_counter() - start))
    with_sums, without = np.median(rates[True]), np.median(rates[False])
    print(f"documents/s: with the noise sums {with_sums:,.0f}, without {without:,.0f}, ratio {with_sums / without:.3f}")


if __name__ == "__main__":
    main()
