"""What watching a replay costs: ingest throughput with and without the monitoring service, in
the same run.

The same archive is replayed (:class:`consumers.replay.Replay`, raw text: read, tokenize, encode,
ingest; a refresh every ``--snapshot-every`` documents) in four modes, interleaved round by round
so that drift of the machine hits every mode alike:

* ``off``: no service (what ``streamtopics replay`` does without ``--serve``);
* ``serve``: a :class:`~consumers.service.LiveSource` fed by the replay's hooks
  (``on_snapshot``, ``on_progress``) and the HTTP service running in a thread, nobody polling;
* ``serve + dashboard``: as ``serve``, plus one client doing what an open dashboard tab does
  (``/api/status`` every second; ``/api/snapshot``, ``/api/history``, ``/api/events`` when the
  version changes) and a Prometheus scrape of ``/metrics`` every second;
* ``serve + hammer``: as ``serve``, plus 4 clients requesting ``/api/snapshot?top_n=100``,
  ``/api/status`` and ``/metrics`` back to back with no pause (a worst case, far beyond real use).

The figure is ``ReplaySummary.ingest_rate`` (documents per second, refreshes and checkpoints
excluded); the median over ``--repeat`` rounds is reported with the overhead against ``off``, and
the median of the per-round ratios (each mode against ``off`` of the same round: slow drift of a
shared machine cancels). The order of the modes rotates from round to round.

Run from the repository root::

    .venv/bin/python -m benchmarks.service_overhead [--limit 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from consumers.replay import Replay
from consumers.service import LiveSource, create_app, serve_in_thread
from consumers.sources import open_source
from streamtopics import StreamingTopicModel

from .common import machine

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
MODES = ("off", "serve", "serve + dashboard", "serve + hammer")


def dashboard_client(url: str, stop: threading.Event, counter: list) -> None:
    """One open dashboard tab plus a 1 s Prometheus scrape."""
    version = None
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            status = client.get("/api/status").json()
            client.get("/metrics")
            counter[0] += 2
            if status["version"] is not None and status["version"] != version:
                version = status["version"]
                for path in ("/api/snapshot?top_n=10", "/api/history?limit=300", "/api/events?limit=80"):
                    client.get(path)
                    counter[0] += 1
            stop.wait(1.0)


def hammer_client(url: str, stop: threading.Event, counter: list) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            for path in ("/api/snapshot?top_n=100", "/api/status", "/metrics"):
                client.get(path)
                counter[0] += 1


def run_once(mode: str, limit: int, args) -> tuple[float, float, int, float]:
    """(ingest docs/s, wall seconds, HTTP requests answered, process CPU ms per 1000 documents)
    of one replay in ``mode``. CPU time (all threads of this process: the replay, numba's
    workers, the service and its clients) barely depends on what else the machine runs, so it
    shows the service's cost even on a busy machine where wall-clock rates swing."""
    cpu0 = time.process_time()
    rate, wall, requests = _run(mode, limit, args)
    return rate, wall, requests, 1e6 * (time.process_time() - cpu0) / limit


def _run(mode: str, limit: int, args) -> tuple[float, float, int]:
    model = StreamingTopicModel(args.topics, vocabulary_size=args.vocabulary_size, warmup_documents=2000)
    with tempfile.TemporaryDirectory() as out:
        replay = Replay(model, open_source(CORPUS), out, every_documents=args.snapshot_every)
        if mode == "off":
            summary = replay.run(stop_after=limit)
            return summary.ingest_rate, summary.elapsed_s, 0
        live = LiveSource()
        replay.on_snapshot = lambda snapshot, path: live.on_snapshot(snapshot, path, model=replay.model)
        handle = serve_in_thread(create_app(live), "127.0.0.1", 0)
        stop, counter, clients = threading.Event(), [0], []
        if mode == "serve + dashboard":
            clients = [threading.Thread(target=dashboard_client, args=(handle.url, stop, counter))]
        elif mode == "serve + hammer":
            clients = [threading.Thread(target=hammer_client, args=(handle.url, stop, counter)) for _ in range(4)]
        for client in clients:
            client.start()
        try:
            summary = replay.run(stop_after=limit, on_progress=live.on_progress)
        finally:
            stop.set()
            for client in clients:
                client.join()
            handle.stop()
        return summary.ingest_rate, summary.elapsed_s, counter[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=10_000, help="documents per replay (default 10000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the median is reported")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocabulary-size", type=int, default=5000)
    parser.add_argument("--snapshot-every", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"corpus: {CORPUS.name}, {args.limit:,} documents per replay, K={args.topics}, "
          f"V={args.vocabulary_size}, a snapshot every {args.snapshot_every:,} documents, {args.repeat} rounds")
    run_once("off", min(args.limit, 3000), args)  # warm up: kernels compiled / loaded, file cached
    results = {mode: [] for mode in MODES}
    for round_ in range(args.repeat):
        order = MODES[round_ % len(MODES):] + MODES[:round_ % len(MODES)]  # rotate: drift hits every mode
        for mode in order:
            results[mode].append(run_once(mode, args.limit, args))
            rate, _, _, cpu = results[mode][-1]
            print(f"  round {round_ + 1}: {mode:<18} {rate:>8,.0f} docs/s {cpu:>8,.0f} CPU ms/1k docs", flush=True)
    cpu_base = statistics.median(r[3] for r in results["off"])
    print(f"\n{'mode':<18} {'docs/s median':>13}  {'runs (docs/s)':<34} {'overhead':>8} {'paired':>7} "
          f"{'CPU ms/1k docs':>14} {'CPU +':>6} {'wall s':>6} {'requests':>8}")
    for mode in MODES:
        rates = [r[0] for r in results[mode]]
        rate = statistics.median(rates)
        runs = " ".join(f"{r:,.0f}" for r in rates)
        paired = statistics.median(1 - r / b[0] for r, b in zip(rates, results["off"]))  # same round
        overhead = 1 - rate / statistics.median(r[0] for r in results["off"])
        requests = statistics.median(r[2] for r in results[mode])
        wall = statistics.median(r[1] for r in results[mode])
        cpu = statistics.median(r[3] for r in results[mode])
        print(f"{mode:<18} {rate:>13,.0f}  {runs:<34} {100 * overhead:>7.1f}% {100 * paired:>6.1f}% "
              f"{cpu:>14,.0f} {100 * (cpu / cpu_base - 1):>5.1f}% {wall:>6.1f} {requests:>8,.0f}")
    print("overhead: 1 - median(mode) / median(off); paired: median over rounds of 1 - mode / off of the same "
          "round;\nCPU: process CPU time per 1000 documents (replay, refreshes, service and its clients), median; "
          "CPU +: against off")


if __name__ == "__main__":
    main()
