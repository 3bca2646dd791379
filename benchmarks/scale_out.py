"""Scale-out (issue 6): worker throughput with 1 and 2 workers, and the refresher's merge+refresh
cost as the number of partial states grows; a projection for 8 and 32 workers from those costs.

    python -m benchmarks.scale_out                       # both parts (starts a local Kafka broker)
    python -m benchmarks.scale_out --part merge --words 15000 --topics 100 --partials 1 2 4 8
    python -m benchmarks.scale_out --part merge --words 100000 --topics 100 --per-worker-rate 8000  # sketched
    python -m benchmarks.scale_out --part throughput --docs 8000

Throughput: 20newsgroups posts produced to a 4-partition topic first; N worker processes
(``python -m consumers.cli group worker``) are started, and the clock runs from the moment every
worker has its partitions to the moment the store's partial checkpoints cover every offset
(checkpoints every 2 s, so the figure includes checkpoint cost and up to 2 s of checkpoint lag).

Merge+refresh: one partial state of a Zipf-shaped synthetic model (V words, K topics, 300-token
documents) is written once and hard-linked as the newest checkpoint of 1, 2, 4, 8 members of a
store; :meth:`consumers.group.Refresher.refresh_once` then loads and sums them (one at a time)
and refreshes cold. The partial files are in the page cache: on separate machines add the time
to read them over the network (the bytes per partial state are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine
from consumers.checkpoint import CheckpointStore
from consumers.group import Refresher
from consumers.kafka_consumer import ConsumerConfig
from consumers.store import DirectoryStateStore, coverage
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import semi_synthetic, zipf_topics

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- merge + refresh


def merge_costs(words: int, topics: int, docs: int, partials: list[int], workdir: Path,
                cooccurrence: str = "auto") -> list[dict]:
    topic_word = zipf_topics(words, topics, seed=1)
    matrix, _ = semi_synthetic(topic_word, docs, alpha=0.1, doc_length=300, seed=2)
    model = StreamingTopicModel(topics, vocabulary=[f"w{i}" for i in range(words)], cooccurrence=cooccurrence)
    model.learn_many(matrix)
    source = workdir / "source"
    with CheckpointStore(source) as store:
        t0 = time.perf_counter()
        saved = store.save(model, {("bench", 0): docs})
        save_s = time.perf_counter() - t0
    manifest = source / f"ckpt-{saved.sequence:010d}.json"
    del model
    config = ConsumerConfig(topics=["bench"], n_topics=topics)
    rows = []
    warm_up = True
    for n in partials:
        root = workdir / f"merge-store-{n}"
        store = DirectoryStateStore(root)
        for i in range(n):
            member = store.member_dir(f"w{i}")
            member.mkdir(parents=True)
            os.link(saved.state_path, member / saved.state_path.name)
            shutil.copy(manifest, member / manifest.name)
        if warm_up:  # compile the kernels once, not reported
            refresher = Refresher(config, store, interval=0)
            refresher.refresh_once()
            refresher.close()
            shutil.rmtree(store.snapshot_dir)
            shutil.rmtree(store.refresher_dir)
            store = DirectoryStateStore(root)
            warm_up = False
        refresher = Refresher(config, store, interval=0)
        snapshot = refresher.refresh_once()
        refresher.close()
        assert snapshot is not None and snapshot.documents_seen == n * docs
        rows.append({"partials": n, "merge_s": refresher.last["merge_s"], "refresh_s": refresher.last["refresh_s"],
                     "total_s": refresher.last["total_s"], "state_bytes": saved.state_bytes, "save_s": save_s})
        print(f"| {n} | {saved.state_bytes / 1e6:.0f} | {rows[-1]['merge_s']:.2f} | "
              f"{rows[-1]['merge_s'] / n:.2f} | {rows[-1]['refresh_s']:.2f} | {rows[-1]['total_s']:.2f} |", flush=True)
        shutil.rmtree(root)
    return rows


# --------------------------------------------------------------------------- throughput


def throughput(n_workers: int, docs: int, vocabulary_size: int, topics: int, workdir: Path, broker) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from kafka_helpers import (build_vocabulary, corpus_messages, create_topic, end_offsets, load_corpus, produce,
                               unique)

    corpus = load_corpus(docs)
    vocabulary = build_vocabulary(corpus, vocabulary_size)
    vocabulary_file = workdir / "vocabulary.txt"
    vocabulary_file.write_text("\n".join(vocabulary.words), encoding="utf-8")
    topic = unique("bench")
    create_topic(broker, topic, 4)
    produce(broker, topic, corpus_messages(corpus))
    ends = end_offsets(broker, topic, 4)
    config = ConsumerConfig(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group_id=unique("group"),
                            n_topics=topics, vocabulary=str(vocabulary_file), poll_records=500,
                            checkpoint_every_messages=0, checkpoint_every_wall_seconds=2.0, log_every_seconds=0)
    config_path = workdir / f"config-{n_workers}.json"
    config_path.write_text(json.dumps(config.to_dict(redact=False)))
    store = DirectoryStateStore(workdir / f"store-{n_workers}")
    logs = [workdir / f"worker-{n_workers}-{i}.log" for i in range(n_workers)]
    procs = []
    for i, log in enumerate(logs):
        with open(log, "wb") as handle:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "consumers.cli", "group", "worker", "--config", str(config_path), "--store",
                 str(store.root), "--member", f"w{i}"], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1")))
    try:
        t_start = time.monotonic()
        while not all("reading " in log.read_text(errors="replace") for log in logs):
            time.sleep(0.05)
            if time.monotonic() - t_start > 120:
                raise RuntimeError("workers did not get partitions")
        t0 = time.monotonic()
        want = {(topic, p): [(0, e)] for p, e in ends.items() if e}
        while coverage(store.partials()) != want:
            time.sleep(0.1)
            if time.monotonic() - t0 > 600:
                raise RuntimeError("workers did not finish")
        elapsed = time.monotonic() - t0
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=120)
    return {"workers": n_workers, "documents": docs, "seconds": elapsed, "docs_per_s": docs / elapsed,
            "startup_s": t0 - t_start}


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "merge", "throughput"), default="all")
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--merge-docs", type=int, default=5000, help="Documents in the synthetic partial state.")
    parser.add_argument("--partials", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--cooccurrence", choices=("auto", "exact", "sketch"), default="auto",
                        help="Statistics of the partial states (auto: sketched above 20,000 words).")
    parser.add_argument("--docs", type=int, default=8000, help="20newsgroups posts for the throughput part.")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--throughput-words", type=int, default=2000)
    parser.add_argument("--throughput-topics", type=int, default=20)
    parser.add_argument("--per-worker-rate", type=float, default=None,
                        help="Documents/s of one worker for the projection when the throughput part is not run.")
    args = parser.parse_args()
    print(machine())
    workdir = Path(tempfile.mkdtemp(prefix="scale-out-bench-"))
    rates, costs = [], []
    try:
        if args.part in ("all", "throughput"):
            from devtools.kafka_broker import KafkaBroker
            print(f"\nThroughput: {args.docs} 20newsgroups posts, 4 partitions, V = {args.throughput_words}, "
                  f"K = {args.throughput_topics}, checkpoints every 2 s\n")
            print("| workers | documents | seconds | documents/s | start-up s (not counted) |")
            print("|---|---|---|---|---|")
            with KafkaBroker() as broker:
                for n in args.workers:
                    r = throughput(n, args.docs, args.throughput_words, args.throughput_topics, workdir, broker)
                    rates.append(r)
                    print(f"| {n} | {r['documents']} | {r['seconds']:.1f} | {r['docs_per_s']:.0f} | "
                          f"{r['startup_s']:.1f} |", flush=True)
        if args.part in ("all", "merge"):
            print(f"\nMerge + refresh: V = {args.words}, K = {args.topics}, cooccurrence={args.cooccurrence}, partial "
                  f"states of {args.merge_docs} documents (page cache), cold refresh\n")
            print("| partial states | MB each | load+merge s | per state s | refresh s | total s |")
            print("|---|---|---|---|---|---|")
            costs = merge_costs(args.words, args.topics, args.merge_docs, args.partials, workdir, args.cooccurrence)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not rates and args.per_worker_rate:
        rates = [{"workers": 1, "docs_per_s": args.per_worker_rate}]
    if rates and costs:
        project(rates, costs)


def project(rates: list[dict], costs: list[dict]) -> None:
    """Linear extrapolation from the measured figures (see the printed assumptions)."""
    per_worker = max(r["docs_per_s"] / r["workers"] for r in rates)
    largest = max(costs, key=lambda c: c["partials"])
    per_state = largest["merge_s"] / largest["partials"]
    refresh = sum(c["refresh_s"] for c in costs) / len(costs)
    mb = costs[0]["state_bytes"] / 1e6
    print("\nProjection (one worker per machine, each as fast as the best measured per-worker rate; merge cost "
          "linear in the number of partial states; refresh independent of it):\n")
    print("| workers | ingest documents/s | merge s | refresh s | refresh round s | partial MB read per round | "
          "at 1 GB/s network s |")
    print("|---|---|---|---|---|---|---|")
    for n in (8, 32):
        merge = per_state * n
        print(f"| {n} | {per_worker * n:,.0f} | {merge:.1f} | {refresh:.1f} | {merge + refresh:.1f} | "
              f"{mb * n:,.0f} | {mb * n / 1000:.1f} |")


if __name__ == "__main__":
    main()
