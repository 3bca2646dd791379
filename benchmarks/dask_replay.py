"""Dask replay throughput (issue 18): documents/s of :class:`consumers.dask_replay.DaskReplay` on a
LocalCluster of 1 and 2 worker processes against the sequential :class:`consumers.replay.Replay`,
in the same run, on the largest corpus of ``shared/data`` (20 Newsgroups, 5.7 M tokens), repeated
to ``--documents`` documents (each copy's ids made distinct) in a plain JSON Lines file.

For each Dask run it prints where the time went: on the client (warm-up, waiting for the
workers, adding windows to the model, refreshing) and on the workers (task seconds of the scans,
the absorbs and the merges, from Dask's task stream, plus the seconds spent moving data between
processes). From these it projects the documents/s of 8 and 32 machines (one single-threaded
worker each) and names the bottleneck: the workers' reading and absorbing (they divide by the
machines), or the client's serial part (refreshes, adding each window's merged state, receiving
it).

Run from the repository root::

    .venv/bin/python -m benchmarks.dask_replay [--documents 1000000] [--snapshot-every 100000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from consumers.dask_replay import DaskReplay, connect
from consumers.replay import Replay
from consumers.sources import open_source
from streamtopics import StreamingTopicModel

from .common import machine

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
TASKS = ("scan_unit", "absorb_piece", "merge_partials")


def write_archive(path: Path, documents: int) -> Path:
    """The corpus repeated to ``documents`` lines of plain JSON Lines."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as corpus:
        rows = [json.loads(line) for line in corpus]
    with open(path, "w", encoding="utf-8") as out:
        for i in range(documents):
            row = rows[i % len(rows)]
            out.write(json.dumps({"id": f"{row['id']}#{i // len(rows)}", "text": row["text"]}) + "\n")
    return path


def new_model(args) -> StreamingTopicModel:
    return StreamingTopicModel(args.topics, vocabulary_size=args.vocabulary_size, seed=1)


def sequential(args, archive: Path, out: Path) -> dict:
    summary = Replay(new_model(args), open_source(str(archive)), out, every_documents=args.snapshot_every).run()
    return {"documents": summary.documents, "seconds": summary.elapsed_s, "refresh_s": summary.refresh_s}


def distributed_run(args, archive: Path, out: Path, workers: int) -> dict:
    from distributed import get_task_stream

    client = connect(f"local:{workers}")
    try:
        with get_task_stream(client) as stream:
            summary = DaskReplay(new_model(args), open_source(str(archive)), out, client,
                                 every_documents=args.snapshot_every).run()
        task_s, transfer_s = defaultdict(float), 0.0
        for task in stream.data:
            for part in task["startstops"]:
                seconds = part["stop"] - part["start"]
                if part["action"] == "compute":
                    task_s[next((name for name in TASKS if task["key"].startswith(name)), "other")] += seconds
                elif part["action"] == "transfer":
                    transfer_s += seconds
    finally:
        client.close()
    return {"documents": summary.documents, "seconds": summary.elapsed_s, "warmup_s": summary.warmup_s,
            "wait_s": summary.wait_s, "merge_s": summary.merge_s, "refresh_s": summary.refresh_s,
            "windows": len(summary.snapshots), "units": summary.units, "pieces": summary.pieces,
            "task_s": dict(task_s), "transfer_s": transfer_s}


def project(run: dict, state_bytes: float, network_bytes_per_s: float, machines: int) -> tuple[float, str]:
    """Documents/s on ``machines`` single-threaded workers: the workers' task seconds divide by
    the machines; the client's serial part (refreshes; adding windows and receiving one state per
    window) does not; the larger one is the bottleneck."""
    workers_s = sum(run["task_s"].get(name, 0.0) for name in TASKS) / machines
    client = {"the client's refreshes": run["refresh_s"],
              "merge bandwidth (the client adding and receiving one state per window)":
                  run["merge_s"] + run["windows"] * state_bytes / network_bytes_per_s}
    client_s = sum(client.values())
    bottleneck = ("archive reading and absorbing on the workers" if workers_s >= client_s
                  else max(client, key=client.get))
    return run["documents"] / (run["warmup_s"] + max(workers_s, client_s)), bottleneck


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--snapshot-every", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocabulary-size", type=int, default=10_000)
    parser.add_argument("--network-gbit", type=float, default=10.0,
                        help="Network bandwidth assumed for the projection (Gbit/s).")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        archive = write_archive(tmp / "archive.jsonl", args.documents)
        print(f"archive: {CORPUS.name} repeated to {args.documents:,} documents "
              f"({archive.stat().st_size / 2**20:,.0f} MiB plain JSONL, written in {time.perf_counter() - t0:.1f} s); "
              f"K = {args.topics}, V = {args.vocabulary_size:,}, a snapshot every {args.snapshot_every:,} documents")
        runs = {"sequential": sequential(args, archive, tmp / "sequential")}
        for workers in (1, 2):
            name = f"dask, {workers} worker{'s' * (workers > 1)}"
            runs[name] = distributed_run(args, archive, tmp / f"dask{workers}", workers)
    print(f"\n{'replay':<18} {'docs/s':>9} {'wall s':>8} {'refresh s':>10} {'merge s':>8} {'wait s':>7}  "
          "worker task s (scan / absorb / merge), transfers s")
    for name, run in runs.items():
        line = f"{name:<18} {run['documents'] / run['seconds']:>9,.0f} {run['seconds']:>8.1f} {run['refresh_s']:>10.1f}"
        if "task_s" in run:
            task = run["task_s"]
            line += (f" {run['merge_s']:>8.1f} {run['wait_s']:>7.1f}  {task.get('scan_unit', 0):.1f} / "
                     f"{task.get('absorb_piece', 0):.1f} / {task.get('merge_partials', 0):.1f}, {run['transfer_s']:.1f}"
                     f"  ({run['units']} units, {run['pieces']} pieces, {run['windows']} windows)")
        print(line)
    state_bytes = 8 * args.vocabulary_size * (args.vocabulary_size + 1) / 2  # the packed co-occurrence triangle
    bandwidth = args.network_gbit * 1e9 / 8
    print(f"\nprojection (one single-threaded worker per machine, {args.network_gbit:g} Gbit/s, "
          f"{state_bytes / 2**20:,.0f} MiB per state, from the 1-worker run):")
    for machines in (8, 32):
        rate, bottleneck = project(runs["dask, 1 worker"], state_bytes, bandwidth, machines)
        print(f"  {machines:>2} machines: about {rate:,.0f} docs/s; bottleneck: {bottleneck}")


if __name__ == "__main__":
    main()
