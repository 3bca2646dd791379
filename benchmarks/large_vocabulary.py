"""The large-vocabulary mode (``cooccurrence="sketch"``, issue 17) against the exact sums.

    python -m benchmarks.large_vocabulary memory [--topics 100] [--plot PATH]
    python -m benchmarks.large_vocabulary speed [--docs 40000] [--topics 100]
    python -m benchmarks.large_vocabulary accuracy [--docs 50000] [--topics 20] [--sizes S ...]
        [--stream-seed 1] [--row-sums] [--skip-exact] [--cache DIR]

``memory``: bytes of the statistics as a function of V (5k ... 200k) for both modes: the exact
packed triangle measured where it is allocated here (V <= 15,000) and from its formula above;
the sketch's saved state (Y and the O(V) vectors), its working set while ingesting (plus the
cached test matrix) and at refresh (plus the view's V x s sketch of Q and its factors U, V x r),
allocated and counted (the refresh's own temporaries, e.g. 512 full rows at a time, come on top:
see ``speed``'s peak RSS). A plot is
written to ``--plot`` (default ``runs/large_vocabulary_memory.png``) if matplotlib is
installed.

``speed``: NYT-shaped documents (300 tokens, ~200 distinct words, Zipf; ``zipf_batch``), one
child process per configuration so each peak RSS is its own: the sketch at V = 100,000 and the
exact sums at V = 15,000, K = 100, twice each, alternating. Ingest documents/s of the kernel
(``stats.update``, median of 3 passes over the same 40,960 documents); the ratio is of the
medians of the two processes run back to back. Then 16,384 documents through ``learn_many`` (so
the refinement reservoir fills, as in use), a cold refresh, 4,096 more documents and a warm
refresh (default settings, refinement included), with their phases; the peak RSS through all of
it.

``accuracy``: a Gibbs-truth semi-synthetic stream with a vocabulary above 40,000 words: tomotopy
LDA (K topics, alpha 0.1, eta 0.01, 300 sweeps) fitted on all of 20 Newsgroups (train and test)
with every word of 3+ letters in at least 3 documents kept (V = 42,179), a stream of ``--docs``
documents drawn from it with the corpus's document lengths and Dirichlet(0.1) mixtures
(:mod:`benchmarks.quality.streams`); matched L1 of the exact and the sketch mode's snapshots
(default settings otherwise), refresh time and peak RSS, each mode in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine, zipf_batch

SIZES = (5_000, 15_000, 50_000, 100_000, 200_000)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------- memory
def exact_bytes(n_words: int) -> int:
    """The packed triangle plus word mass, word counts and document frequencies."""
    return n_words * (n_words + 1) // 2 * 8 + 3 * n_words * 8


def memory(args) -> None:
    from streamtopics.config import ModelConfig
    from streamtopics.statistics.cooccurrence import CooccurrenceStats
    from streamtopics.statistics.sketch import SketchedCooccurrence

    config = ModelConfig(n_topics=args.topics, cooccurrence="sketch")
    size, rank = config.resolved_sketch_size(), config.resolved_sketch_rank()
    print(machine())
    print(f"K = {args.topics}: sketch s = {size} columns, view rank r = {rank}")
    print("| V | exact (MB) | how | sketch state (MB) | sketch while ingesting (MB) | sketch at refresh (MB) | exact / sketch state |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for n_words in SIZES:
        if n_words <= 15_000:
            exact = CooccurrenceStats(n_words).nbytes
            how = "allocated"
        else:
            exact, how = exact_bytes(n_words), "formula"
        sketch = SketchedCooccurrence(n_words, size, rank)
        sketch.omega  # noqa: B018 - generate the cached test matrix
        state, ingesting = sketch.nbytes, sketch.memory_bytes
        # the view: Q Omega = Y - diag(c) Omega (V x s), then its factors U (V x r) and diagonal correction
        refreshing = ingesting + n_words * size * 8 + n_words * rank * 8 + n_words * 8
        rows.append((n_words, exact, state, ingesting, refreshing))
        print(f"| {n_words:,} | {exact / 2**20:,.0f} | {how} | {state / 2**20:,.0f} | {ingesting / 2**20:,.0f} | "
              f"{refreshing / 2**20:,.0f} | {exact / state:,.0f} |")
        del sketch
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    data = np.array(rows, dtype=float)
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.loglog(data[:, 0], data[:, 1] / 2**30, "o-", label="exact (packed triangle)")
    axis.loglog(data[:, 0], data[:, 2] / 2**30, "s-", label=f"sketch state (s = {size})")
    axis.loglog(data[:, 0], data[:, 4] / 2**30, "^--", label=f"sketch at refresh (+ test matrix, Q Omega, U: r = {rank})")
    axis.axvline(20_000, color="grey", lw=0.8, ls=":")
    axis.set_xlabel("vocabulary size V")
    axis.set_ylabel("GiB")
    axis.set_title(f"Co-occurrence statistics, K = {args.topics}")
    axis.legend()
    axis.grid(True, which="both", lw=0.3)
    path = Path(args.plot)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    print(f"plot: {path}")


# ----------------------------------------------------------------------------------------- speed
def speed_child(args) -> dict:
    """One configuration, in this process: kernel throughput, model refreshes, peak RSS."""
    from streamtopics import StreamingTopicModel

    batches = [zipf_batch(args.batch, args.words, 300, 1.0, seed=1000 + i) for i in range(args.docs // args.batch)]
    before = peak_mb()
    model = StreamingTopicModel(args.topics, vocabulary=[f"w{i}" for i in range(args.words)],
                                cooccurrence=args.mode, batch_size=args.batch)
    stats = model.statistics()
    stats.update(zipf_batch(256, args.words, 300, 1.0, seed=1))  # compile (or load) the kernel
    passes = []
    for _ in range(3):
        start = time.perf_counter()
        for batch in batches:
            stats.update(batch)
        passes.append(len(batches) * args.batch / (time.perf_counter() - start))
    # the refinement reservoir fills only through the model: 8 batches through learn_many
    # (16,384 documents with the default batch, the default reservoir's size) before the refreshes
    for batch in batches[:8]:
        model.learn_many(batch)
    after_ingest = peak_mb()
    start = time.perf_counter()
    model.refresh()
    cold = time.perf_counter() - start
    cold_phases = dict(model.last_refresh)
    for batch in batches[8:10]:
        model.learn_many(batch)
    start = time.perf_counter()
    model.refresh()
    warm = time.perf_counter() - start
    phases = {k: round(v, 2) for k, v in model.last_refresh.items()
              if isinstance(v, float) and (k.endswith("_s") or k.startswith("iterations"))}
    return {"mode": args.mode, "words": args.words, "topics": args.topics, "docs_per_s": passes,
            "docs_per_s_median": float(np.median(passes)), "cold_refresh_s": cold, "warm_refresh_s": warm,
            "cold_phases": {k: round(v, 2) for k, v in cold_phases.items()
                            if isinstance(v, (int, float)) and (k.endswith("_s") or k.startswith("iterations"))},
            "warm_phases": phases, "statistics_mb": stats.nbytes / 2**20,
            "baseline_rss_mb": before, "peak_rss_after_ingest_mb": after_ingest, "peak_rss_mb": peak_mb()}


def kernels_child(args) -> dict:
    """Both kernels in one process, passes alternating (the fairest ratio on a shared machine),
    and the phases of the sketch view at V = 100,000: building Q Omega, the factorisation, the
    candidates' block (2,000 candidates) through full rows and through ``block``."""
    from streamtopics.config import ModelConfig
    from streamtopics.statistics.cooccurrence import CooccurrenceStats
    from streamtopics.refresh.rectification import candidate_block
    from streamtopics.statistics.sketch import SketchedCooccurrence

    config = ModelConfig(n_topics=args.topics)
    sketch = SketchedCooccurrence(100_000, config.resolved_sketch_size(), config.resolved_sketch_rank())
    exact = CooccurrenceStats(15_000)
    large = [zipf_batch(args.batch, 100_000, 300, 1.0, seed=1000 + i) for i in range(args.docs // args.batch)]
    small = [zipf_batch(args.batch, 15_000, 300, 1.0, seed=1000 + i) for i in range(args.docs // args.batch)]
    sketch.update(large[0])
    exact.update(small[0])
    rates = {"sketch": [], "exact": []}
    for _ in range(3):
        for name, stats, batches in (("exact", exact, small), ("sketch", sketch, large)):
            start = time.perf_counter()
            for batch in batches:
                stats.update(batch)
            rates[name].append(len(batches) * args.batch / (time.perf_counter() - start))
    phases = {"view_s": [], "factorise_s": [], "block_rows_s": [], "block_s": []}
    candidates = np.arange(2000)
    for _ in range(3):
        sketch._view = None
        start = time.perf_counter()
        view = sketch.view()
        phases["view_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        view.factors()
        phases["factorise_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        candidate_block(view, candidates)
        phases["block_rows_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        view.block(candidates)
        phases["block_s"].append(time.perf_counter() - start)
    ratios = [s / e for s, e in zip(rates["sketch"], rates["exact"])]
    return {"rates": rates, "ratio_median": float(np.median(ratios)), "ratios": ratios,
            "phases_median": {k: float(np.median(v)) for k, v in phases.items()}, "phases": phases,
            "sketch_size": sketch.sketch_size, "rank": sketch.rank}


def run_child(command: str, options: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.large_vocabulary", command, "--child", *options],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed(args) -> None:
    if args.child:
        print(json.dumps(kernels_child(args) if args.kernels else speed_child(args)))
        return
    print(machine())
    kernels = run_child("speed", ["--kernels", "--docs", str(args.docs), "--topics", str(args.topics),
                                  "--batch", str(args.batch)])
    print(json.dumps(kernels), flush=True)
    print(f"one process, passes alternating: sketch V = 100k / exact V = 15k ingest = "
          f"{[round(r, 2) for r in kernels['ratios']]} (median {kernels['ratio_median']:.2f}); "
          f"sketch view phases (median of 3, s): {({k: round(v, 2) for k, v in kernels['phases_median'].items()})}")
    if args.kernels_only:
        return
    common = ["--docs", str(args.docs), "--topics", str(args.topics), "--batch", str(args.batch)]
    results = []
    for mode, words in (("exact", 15_000), ("sketch", 100_000), ("exact", 15_000), ("sketch", 100_000)):
        results.append(run_child("speed", ["--mode", mode, "--words", str(words), *common]))
        print(json.dumps(results[-1]), flush=True)
    print("| mode | V | K | ingest docs/s (kernel, 2 runs x median of 3 passes) | cold refresh (s) | warm refresh (s) | statistics (MB) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    def joined(rows, key, form):
        return " / ".join(format(r[key], form) for r in rows)

    for mode in ("exact", "sketch"):
        mine = [r for r in results if r["mode"] == mode]
        print(f"| {mode} | {mine[0]['words']:,} | {mine[0]['topics']} | {joined(mine, 'docs_per_s_median', ',.0f')} | "
              f"{joined(mine, 'cold_refresh_s', '.1f')} | {joined(mine, 'warm_refresh_s', '.1f')} | "
              f"{mine[0]['statistics_mb']:,.0f} | {joined(mine, 'peak_rss_mb', ',.0f')} |")
    ratios = [s["docs_per_s_median"] / e["docs_per_s_median"] for e, s in zip(results[0::2], results[1::2])]
    print(f"ingest ratio sketch (V = 100k) / exact (V = 15k), each pair back to back: {[round(r, 2) for r in ratios]}")
    for r in results:
        print(r["mode"], "warm phases", r["warm_phases"])


# -------------------------------------------------------------------------------------- accuracy
TRUTH_MIN_DF = 3
TRUTH_ITERATIONS = 300


def large_truth(n_topics: int, cache: Path):
    """tomotopy LDA on all of 20 Newsgroups, every word in >= TRUTH_MIN_DF documents (cached)."""
    from collections import Counter

    from benchmarks.quality.corpora import raw_texts
    from benchmarks.quality.truths import Truth
    from streamtopics.text.tokenizer import Tokenizer

    path = Path(cache) / "truths" / f"20newsgroups-all-df{TRUTH_MIN_DF}-K{n_topics}-it{TRUTH_ITERATIONS}-seed0.npz"
    if path.exists():
        saved = np.load(path, allow_pickle=False)
        return Truth(saved["topic_word"], [str(w) for w in saved["vocabulary"]], saved["lengths"], str(saved["note"]))
    import tomotopy as tp

    train, test, note = raw_texts("20newsgroups")
    tokenizer = Tokenizer()
    documents = [tokenizer.tokenize(text) for text in train + test]
    df = Counter()
    for tokens in documents:
        df.update(set(tokens))
    ceiling = 0.5 * len(documents)
    words = sorted((w for w, n in df.items() if TRUTH_MIN_DF <= n <= ceiling), key=lambda w: (-df[w], w))
    index = {w: i for i, w in enumerate(words)}
    model = tp.LDAModel(k=n_topics, alpha=0.1, eta=0.01, seed=0)
    lengths = []
    for tokens in documents:
        kept = [t for t in tokens if t in index]
        lengths.append(len(kept))
        if kept:
            model.add_doc(kept)
    start = time.perf_counter()
    for _ in range(TRUTH_ITERATIONS // 10):
        model.train(10, workers=1)
    seconds = time.perf_counter() - start
    topic_word = np.zeros((len(words), n_topics))
    used = [index[w] for w in model.used_vocabs]
    for k in range(n_topics):
        topic_word[used, k] = model.get_topic_word_dist(k)
    topic_word /= topic_word.sum(axis=0, keepdims=True)
    note = (f"tomotopy {tp.__version__} LDAModel(k={n_topics}, alpha=0.1, eta=0.01, seed=0), {TRUTH_ITERATIONS} "
            f"Gibbs sweeps ({seconds:.0f} s) on 20 Newsgroups train + test ({note}); V = {len(words)} words "
            f"in >= {TRUTH_MIN_DF} documents and <= 50% of them")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, topic_word=topic_word, vocabulary=np.array(words), lengths=np.array(lengths, np.int64), note=note)
    return Truth(topic_word, words, np.array(lengths, np.int64), note)


def accuracy_child(args) -> dict:
    from benchmarks.quality.streams import draw
    from streamtopics import StreamingTopicModel
    from streamtopics.evaluation import matched_l1

    import streamtopics.statistics.sketch_view as sketch_view

    sketch_view.ROW_SUMS = args.row_sums
    truth = large_truth(args.topics, args.cache)
    documents = draw(truth, args.docs, alpha=0.1, seed=args.stream_seed)
    model = StreamingTopicModel(args.topics, vocabulary=truth.vocabulary, cooccurrence=args.mode,
                                **({"sketch_size": args.sketch_size} if args.sketch_size else {}))
    start = time.perf_counter()
    model.learn_many(documents)
    model.statistics()
    ingest = time.perf_counter() - start
    start = time.perf_counter()
    snapshot = model.refresh()
    seconds = time.perf_counter() - start
    return {"mode": args.mode, "words": len(truth.vocabulary), "topics": args.topics, "docs": args.docs,
            "stream_seed": args.stream_seed, "row_sums": args.row_sums,
            "sketch_size": getattr(model.stats, "sketch_size", None),
            "matched_l1": float(matched_l1(truth.topic_word, snapshot.topic_word)),
            "ingest_s": ingest, "refresh_s": seconds, "statistics_mb": model.stats.nbytes / 2**20,
            "peak_rss_mb": peak_mb(), "truth": truth.note}


def accuracy(args) -> None:
    if args.child:
        print(json.dumps(accuracy_child(args)))
        return
    print(machine())
    large_truth(args.topics, args.cache)  # fit once, before the children read it
    common = ["--docs", str(args.docs), "--topics", str(args.topics), "--cache", str(args.cache),
              "--stream-seed", str(args.stream_seed), *(["--row-sums"] if args.row_sums else [])]
    results = []
    runs = [("sketch", None), *(("sketch", s) for s in args.sizes)]
    for mode, size in runs if args.skip_exact else [("exact", None), *runs]:
        results.append(run_child("accuracy", ["--mode", mode, *common, *(["--sketch-size", str(size)] if size else [])]))
        print(json.dumps(results[-1]), flush=True)
    print(results[0]["truth"], f"; stream seed {args.stream_seed}, row sums {'on' if args.row_sums else 'off'}")
    print("| mode | V | K | documents | s | matched L1 | vs exact | refresh (s) | statistics (MB) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {r['words']:,} | {r['topics']} | {r['docs']:,} | {r['sketch_size'] or '-'} | "
              f"{r['matched_l1']:.3f} | {'-' if args.skip_exact else format(r['matched_l1'] / results[0]['matched_l1'] - 1, '+.1%')} | {r['refresh_s']:.1f} | "
              f"{r['statistics_mb']:,.0f} | {r['peak_rss_mb']:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    mem = commands.add_parser("memory")
    mem.add_argument("--topics", type=int, default=100)
    mem.add_argument("--plot", default="runs/large_vocabulary_memory.png")
    fast = commands.add_parser("speed")
    fast.add_argument("--docs", type=int, default=40_960)
    fast.add_argument("--batch", type=int, default=2048)
    fast.add_argument("--topics", type=int, default=100)
    fast.add_argument("--words", type=int, default=100_000)
    fast.add_argument("--mode", default="sketch")
    fast.add_argument("--child", action="store_true")
    fast.add_argument("--kernels", action="store_true", help="(child) both kernels in one process")
    fast.add_argument("--kernels-only", action="store_true", help="only the one-process kernel comparison")
    good = commands.add_parser("accuracy")
    good.add_argument("--docs", type=int, default=50_000)
    good.add_argument("--topics", type=int, default=20)
    good.add_argument("--mode", default="sketch")
    good.add_argument("--sketch-size", type=int, default=None)
    good.add_argument("--sizes", type=int, nargs="*", default=[], help="further sketch sizes to compare")
    truths = Path(os.environ.get("QUALITY_CACHE", Path(__file__).resolve().parents[1] / ".artifacts" / "quality"))
    good.add_argument("--cache", type=Path, default=truths, help="cached Gibbs truth fits (the quality protocol's)")
    good.add_argument("--stream-seed", type=int, default=1, help="seed of the drawn stream")
    good.add_argument("--row-sums", action="store_true", help="the view's row-sum correction on (sketch_view.ROW_SUMS)")
    good.add_argument("--skip-exact", action="store_true", help="the sketch runs only")
    good.add_argument("--child", action="store_true")
    args = parser.parse_args()
    {"memory": memory, "speed": speed, "accuracy": accuracy}[args.command](args)


if __name__ == "__main__":
    main()
