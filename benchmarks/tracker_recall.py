"""Candidate recall of the random-projection trackers as the number of directions P grows.

Separable synthetic models, generated here (no dependency on streamtopics.synthetic).  Topic k
has one anchor word whose whole mass is in topic k, p(anchor | k) ~ Uniform(0.01, 0.04); the
other words of each topic are drawn from one of

  ding   non-anchor word rows (their weights over topics) uniform on the simplex, as in Ding et
         al. section 6.1: every word is frequent, anchors are the only near-extreme rows;
  zipf   the same, times Zipf(1) word base frequencies: a long tail of rare, noisy words;
  sparse each topic a sparse Dirichlet(0.05) over the V-K shared words: many near-anchors.

Documents: proportions ~ Dirichlet(0.1), 100 multinomial tokens.  All M documents are absorbed
once into a tracker with P_max directions; the first P columns of its sums are exactly the sums
of a P-direction tracker (column j of a direction depends only on (seed, key, j)), so one pass
serves every P.  Support mask: document frequency >= 0.5% of the documents (--support).

recall = fraction of the K true anchors among the candidates; cov = fraction of topics with a
candidate whose p(topic | word) >= 0.9 (an anchor or near-anchor); c = number of candidates.
Means over --reps corpora.  "raw" ranks words by P_i / S_i (Ding et al.), "snr" by the
noise-shrunk projection that RandomProjectionTracker.candidates uses by default.  The last lines
are the update throughput at P = 64, 256, 512 for V = 15000, ~200 distinct words per document.

    .venv/bin/python benchmarks/tracker_recall.py            # full table (~4 min on 2 cores)
    .venv/bin/python benchmarks/tracker_recall.py --quick
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from streamtopics.statistics.trackers import RandomProjectionTracker


def separable_model(V, K, rng, kind="ding", anchor_lo=0.01, anchor_hi=0.04):
    """Return (A, anchors): V x K column-stochastic, anchors[k] is topic k's anchor word."""
    anchors = rng.choice(V, size=K, replace=False)
    rest = np.setdiff1d(np.arange(V), anchors)
    if kind == "sparse":
        B = rng.dirichlet(np.full(rest.size, 0.05), size=K).T
    else:
        B = rng.dirichlet(np.ones(K), size=rest.size)
        if kind == "zipf":
            B *= (1.0 / np.arange(1, rest.size + 1))[rng.permutation(rest.size), None]
        B /= B.sum(0)
    A = np.zeros((V, K))
    a = rng.uniform(anchor_lo, anchor_hi, size=K)
    A[rest] = B * (1.0 - a)
    A[anchors, np.arange(K)] = a
    return A, anchors


def sample_corpus(A, M, rng, n_tokens=100, alpha=0.1):
    """CSR (indptr, indices, counts) of M multinomial documents of n_tokens tokens."""
    V, K = A.shape
    cdf = np.cumsum(A, axis=0)
    cdf /= cdf[-1]
    theta = rng.dirichlet(np.full(K, alpha), size=M)
    indptr = np.zeros(M + 1, dtype=np.int64)
    ind, cnt = [], []
    for d in range(M):
        zc = rng.multinomial(n_tokens, theta[d])
        ks = np.flatnonzero(zc)
        w = np.concatenate(
            [np.searchsorted(cdf[:, k], rng.random(zc[k]), side="right") for k in ks]
        )
        u, c = np.unique(np.minimum(w, V - 1), return_counts=True)
        ind.append(u)
        cnt.append(c)
        indptr[d + 1] = indptr[d] + u.size
    return indptr, np.concatenate(ind).astype(np.int32), np.concatenate(cnt).astype(np.float64)


def recall_curve(V, K, M, Ps, seed, support, kind):
    """[(weighting, P, recall, coverage, n_candidates)] for one corpus."""
    rng = np.random.default_rng(seed)
    A, anchors = separable_model(V, K, rng, kind)
    indptr, indices, counts = sample_corpus(A, M, rng)
    keys = rng.integers(0, 2**63, size=M, dtype=np.uint64)
    tr = RandomProjectionTracker(V, n_projections=max(Ps), seed=seed)
    tr.update(indptr, indices, counts, keys)
    mask = np.bincount(indices, minlength=V) >= support * M
    pk = A / A.sum(1, keepdims=True)
    out = []
    for weighting in ("raw", "snr"):
        for P in Ps:
            sub = RandomProjectionTracker.from_state_dict(
                dict(tr.state_dict(), n_projections=P, P=tr.P[:, :P])
            )
            cand = sub.candidates(mask, weighting=weighting)
            near = cand[pk[cand].max(1) >= 0.9]
            cov = np.unique(pk[near].argmax(1)).size / K
            out.append((np.isin(anchors, cand).mean(), cov, cand.size))
    return np.array(out)


def make_batch(V=15000, B=4000, distinct=200, seed=0):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1)
    p /= p.sum()
    perm = rng.permutation(V)  # frequent words at random ids
    indptr = np.zeros(B + 1, dtype=np.int64)
    ind = []
    for d in range(B):
        u = np.unique(perm[rng.choice(V, size=int(distinct * 1.55), p=p)])
        ind.append(u)
        indptr[d + 1] = indptr[d] + u.size
    indices = np.concatenate(ind).astype(np.int32)
    counts = rng.integers(1, 4, size=indices.size).astype(np.float64)
    return indptr, indices, counts, np.arange(B, dtype=np.uint64)


def throughput(P=256, V=15000, B=4000, distinct=200, reps=5):
    """(docs/s of RandomProjectionTracker.update, mean distinct words per document)."""
    indptr, indices, counts, keys = make_batch(V, B, distinct)
    tr = RandomProjectionTracker(V, n_projections=P)
    tr.update(indptr[:11], indices, counts, keys[:10])  # compile / load cache
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        tr.update(indptr, indices, counts, keys)
        best = min(best, time.perf_counter() - t0)
    return B / best, float(np.diff(indptr).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--support", type=float, default=0.005, help="min document frequency / M")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    Ps = [32, 64, 128, 256, 512, 1024]
    settings = [("ding", 2000, 20, 20000), ("zipf", 2000, 20, 20000), ("sparse", 2000, 20, 20000),
                ("ding", 5000, 50, 40000), ("zipf", 5000, 50, 40000), ("sparse", 5000, 50, 40000),
                ("zipf", 10000, 100, 80000), ("sparse", 10000, 100, 80000)]
    reps = args.reps
    if args.quick:
        Ps, settings, reps = [32, 128, 256], settings[:3], 1
    print(f"support: df >= {args.support:g} M; recall / cov / c, mean of {reps} corpora")
    head = f"{'model':>6} {'V':>5} {'K':>3} {'M':>6} {'rank':>4} |"
    print(head + "".join(f"{'P=' + str(P):>17}" for P in Ps))
    for kind, V, K, M in settings:
        res = np.mean(
            [recall_curve(V, K, M, Ps, s, args.support, kind) for s in range(reps)], axis=0
        )
        for w, weighting in enumerate(("raw", "snr")):
            r = res[w * len(Ps) : (w + 1) * len(Ps)]
            cells = "".join(f"  {a:4.2f}/{b:4.2f}/{c:4.0f}" for a, b, c in r)
            print(f"{kind:>6} {V:>5} {K:>3} {M:>6} {weighting:>4} |{cells}")
    for P in (64, 256, 512) if not args.quick else (256,):
        dps, ud = throughput(P=P)
        print(f"update throughput, V=15000, P={P}, {ud:.0f} distinct words/doc: {dps:,.0f} docs/s")


if __name__ == "__main__":
    main()
