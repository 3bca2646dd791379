"""Replay throughput: raw text (tokenization included) and pre-tokenized UCI archives, next to
the in-process ingest rate from pre-indexed counts of the same documents, in the same run.

For every corpus the stages are timed separately on the same documents:

* ``read``: decompress and parse the archive (:mod:`consumers.sources`), no model;
* ``tokenize``: ``Tokenizer.count`` of every text (raw corpora only);
* ``replay``: :class:`consumers.replay.Replay` end to end, the final refresh and checkpoint
  excluded (``ReplaySummary.ingest_rate``): read + tokenize + encode + ingest;
* ``learn_many(counts)``: a model with the replay's vocabulary absorbing the documents as one
  pre-indexed :class:`~streamtopics.DocumentBatch` (encoded beforehand, not timed).

Each stage runs ``--repeat`` times; the least wall time and the least CPU time (this process,
all threads: the ingest kernel runs on every core) are reported. On a shared machine the CPU
figures are the steadier ones.

Run from the repository root::

    .venv/bin/python -m benchmarks.replay_throughput [--limit N] [--vocabulary-size V]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from consumers.replay import Replay
from consumers.sources import Record, open_source
from streamtopics import StreamingTopicModel

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "20newsgroups (JSONL.gz, raw)": (DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz", {}),
    "reuters21578 (JSONL.gz, raw)": (DATA / "reuters21578" / "reuters21578.jsonl.gz",
                                     {"text_fields": ["title", "body"]}),
    "uci-kos (UCI docword, counts)": (DATA / "uci-kos", {}),
    "nips17 (UCI docword, counts)": (DATA / "nips17-bow", {}),
}


def best(function, repeat: int) -> tuple[float, float]:
    """The least wall and the least CPU time (this process, all threads) of ``repeat`` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def measure(name: str, path: Path, options: dict, limit: int, vocabulary_size: int, n_topics: int,
            repeat: int) -> list:
    documents = []

    def read():
        documents.clear()
        for item in open_source(path, **options):
            if isinstance(item, Record):
                documents.append(item.document)
                if len(documents) >= limit:
                    break

    rows = [("read (decompress + parse)", *best(read, repeat))]
    n = len(documents)
    model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size)
    if isinstance(documents[0], str):
        rows.append(("tokenize", *best(lambda: [model.tokenizer.count(text) for text in documents], repeat)))
    wall, cpu = [], []
    for clock, times in ((time.perf_counter, wall), (time.process_time, cpu)) * repeat:
        model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size)
        with tempfile.TemporaryDirectory() as out:  # the replay's clock times it; its checkpoint is left out
            summary = Replay(model, open_source(path, **options), out, clock=clock).run(stop_after=n)
        times.append(n / summary.ingest_rate)
    rows.append(("replay (read + tokenize + encode + ingest)", min(wall), min(cpu)))
    model.statistics()  # a prefix shorter than the warm-up still gets its vocabulary
    batch, _ = model.encode_many(documents)

    def learn_counts():
        counts_model = StreamingTopicModel(n_topics, model.vocabulary, tokenizer=model.tokenizer)
        counts_model.learn_many(batch)
        counts_model.statistics()

    rows.append(("in-process learn_many(pre-indexed counts)", *best(learn_counts, repeat)))
    return [(name, n, *row) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20_000, help="documents per corpus (default 20000)")
    parser.add_argument("--vocabulary-size", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="runs per stage; the fastest is reported")
    args = parser.parse_args()
    warm = StreamingTopicModel(2, vocabulary=["a", "b", "c"])  # compile / load the kernels first
    warm.learn_many([["a", "b"], ["b", "c"]])
    warm.statistics()
    print(f"{'corpus':<30} {'docs':>6}  {'stage':<42} {'wall s':>6} {'CPU s':>6} {'docs/s':>7} {'docs/CPU-s':>10}")
    for name, (path, options) in CORPORA.items():
        rows = measure(name, path, options, args.limit, args.vocabulary_size, args.topics, args.repeat)
        for corpus, n, stage, wall, cpu in rows:
            print(f"{corpus:<30} {n:>6,}  {stage:<42} {wall:>6.2f} {cpu:>6.2f} {n / wall:>7,.0f} {n / cpu:>10,.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
