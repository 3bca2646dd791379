"""Replay throughput: raw text (tokenization included) and pre-tokenized UCI archives, next to
the in-process ingest rate from pre-indexed counts of the same documents, in the same run.

For every corpus the stages are timed separately on the same documents:

* ``read``: decompress and parse the archive (:mod:`consumers.sources`), no model;
* ``tokenize``: ``Tokenizer.count`` of every text (raw corpora only);
* ``replay``: :class:`consumers.replay.Replay` end to end, the final refresh and checkpoint
  excluded (``ReplaySummary.ingest_rate``): read + tokenize + encode + ingest;
* ``learn_many(counts)``: a model with the replay's vocabulary absorbing the documents as one
  pre-indexed :class:`~streamtopics.DocumentBatch` (encoded beforehand, not timed).

Run from the repository root::

    .venv/bin/python benchmarks/replay_throughput.py [--limit N] [--vocabulary-size V]
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


def measure(name: str, path: Path, options: dict, limit: int, vocabulary_size: int, n_topics: int) -> list:
    rows = []
    t0 = time.perf_counter()
    documents = []
    for item in open_source(path, **options):
        if isinstance(item, Record):
            documents.append(item.document)
            if len(documents) >= limit:
                break
    n = len(documents)
    rows.append((name, n, "read (decompress + parse)", time.perf_counter() - t0))
    model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size)
    if isinstance(documents[0], str):
        t0 = time.perf_counter()
        for text in documents:
            model.tokenizer.count(text)
        rows.append((name, n, "tokenize", time.perf_counter() - t0))
    with tempfile.TemporaryDirectory() as out:
        replay = Replay(model, open_source(path, **options), out)
        summary = replay.run(stop_after=n)
    rows.append((name, n, "replay (read + tokenize + encode + ingest)", n / summary.ingest_rate))
    counts_model = StreamingTopicModel(n_topics, model.vocabulary, tokenizer=model.tokenizer)
    batch, _ = counts_model.encode_many(documents)
    t0 = time.perf_counter()
    counts_model.learn_many(batch)
    counts_model.statistics()
    rows.append((name, n, "in-process learn_many(pre-indexed counts)", time.perf_counter() - t0))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20_000, help="documents per corpus (default 20000)")
    parser.add_argument("--vocabulary-size", type=int, default=5000)
    parser.add_argument("--topics", type=int, default=20)
    args = parser.parse_args()
    warm = StreamingTopicModel(2, vocabulary=["a", "b", "c"])  # compile / load the kernels first
    warm.learn_many([["a", "b"], ["b", "c"]])
    warm.statistics()
    print(f"{'corpus':<32} {'docs':>7}  {'stage':<44} {'seconds':>8} {'docs/s':>9}")
    for name, (path, options) in CORPORA.items():
        for corpus, n, stage, seconds in measure(name, path, options, args.limit, args.vocabulary_size, args.topics):
            print(f"{corpus:<32} {n:>7,}  {stage:<44} {seconds:>8.2f} {n / seconds:>9,.0f}", flush=True)


if __name__ == "__main__":
    main()
