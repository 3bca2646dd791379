"""Throughput of the Kafka consumer next to in-process ingestion, and checkpoint cost.

All on the same documents (the first --docs posts of 20newsgroups-bydate, JSON ``{"id", "text"}``
messages keyed by id), the same vocabulary (the --vocabulary-size words of highest document
frequency, 15,000 by default) and in the same run:

  in-process     StreamingTopicModel.learn_many(texts, keys) + statistics()
  produce        KafkaProducer (acks=all) into a topic with --partitions partitions
  consumer-only  TopicModelConsumer on the pre-filled topic, from start (group join included)
                 until every document is in the statistics; also from the moment its partitions
                 are placed (after the join)
  end-to-end     TopicModelConsumer already running on an empty topic; from the first send
                 until the last document is in the statistics, with the producer on this
                 process's main thread (sharing the consumer's GIL) and, next to it, with the
                 producer in a process of its own (as a deployment's producers are)
  checkpoint     the consumer's final checkpoint (state file + manifest, fsynced) and a
                 restore of it (read + verify every checksum)

Refreshes and periodic checkpoints are off while timing ingestion. "In the statistics" includes
flushing the model's ingest buffer. Each path is measured --rounds times, the rounds interleaved,
and the best figure kept: load from other processes only ever slows a path down (the 1-minute
load average is printed with the figures). Next to wall time, documents per CPU-second of this
process (all its threads: consumer, Kafka client, ingest kernel; end to end the producer too; the
broker and a producer process are others) -- the steadier figure on a shared machine -- and the system part of
that CPU time, where page faults of fresh memory show. The consumer's statistics are checked
against the in-process ones (rtol 1e-12). A local broker is started unless --bootstrap-servers is given.

    .venv/bin/python -m benchmarks.kafka_throughput
    .venv/bin/python -m benchmarks.kafka_throughput --docs 5000 --vocabulary-size 5000   # quick
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import gzip
import json
import logging
import multiprocessing
import os
import resource
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import kafka
import numpy as np
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from devtools.kafka_broker import KafkaBroker
from consumers.checkpoint import CheckpointStore
from consumers.kafka_consumer import ConsumerConfig, TopicModelConsumer, native_kafka_crc
from streamtopics import StreamingTopicModel, Tokenizer, Vocabulary

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"


def load_messages(n: int) -> list[tuple[bytes, bytes, dict]]:
    out = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as handle:
        for line in handle:
            post = json.loads(line)
            doc = {"id": post["id"], "text": post["text"]}
            out.append((post["id"].encode(), json.dumps(doc).encode(), doc))
            if len(out) == n:
                break
    return out


def create_topic(servers: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    return name


def produce(servers: str, topic: str, messages) -> float:
    """Send every message (``(key, value, ...)``) and wait for all acknowledgements; returns the
    seconds taken."""
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=5, batch_size=256 * 1024,
                             max_request_size=4 * 1024 * 1024)
    try:
        t0 = time.perf_counter()
        for key, value, *_ in messages:
            producer.send(topic, key=key, value=value)
        producer.flush(timeout=300)
        return time.perf_counter() - t0
    finally:
        producer.close()


def produce_when_told(servers: str, topic: str, messages, ready, go) -> None:
    """The producer process of the end-to-end path: once started (imports done) it says
    ``ready``, waits for ``go`` and then does what :func:`produce` does in the benchmark's own
    process, producer construction included."""
    ready.set()
    go.wait()
    produce(servers, topic, messages)


def reuse_memory() -> None:
    """Collect the models of earlier paths (a model holds reference cycles) before the next one
    is built, so that its 0.9 GB of sums reuse memory this process already touched, as in a
    long-running consumer. Otherwise a path can pay the first touch of fresh memory inside its
    timing, depending on when the collector last ran: on the development VM 1.7-2.4 s of system
    time per 0.9 GB, against 0.1-0.15 s for memory the process had touched before (``git show
    8e056d1:BENCHMARKS.md``, "Ingest kernel: prefetched entries, unsigned inner loop")."""
    gc.collect()


class RunningConsumer:
    """A TopicModelConsumer on its own thread, with a wait until N documents are absorbed."""

    def __init__(self, config: ConsumerConfig):
        self.service = TopicModelConsumer(config)
        self.thread = threading.Thread(target=self.service.run, daemon=True)
        self.thread.start()

    def wait_assigned(self, partitions: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while len(self.service.positions) < partitions:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the consumer got no partitions")
            time.sleep(0.01)

    def wait_absorbed(self, n: int, timeout: float = 1800) -> None:
        """Until n messages became documents or dead letters, then flush the ingest buffer (the
        consumer thread is idle in poll by then: no refresh or checkpoint is configured)."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.service.metrics.as_dict()
            if m["documents_absorbed"] + sum(m["rejected"].values()) >= n:
                break
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the consumer stalled: {m}")
            time.sleep(0.005)
        self.service.model.statistics()

    def stop(self) -> dict:
        self.service.stop()
        self.thread.join()
        return self.service.metrics.as_dict()


class Bench:
    """The measurements of one run; every path is measured ``--rounds`` times, interleaved, and
    the best kept (other load on the machine only ever slows a path down)."""

    def __init__(self, servers: str, messages, vocabulary: Vocabulary, work: Path, partitions: int,
                 poll_records: int):
        self.servers, self.messages, self.work = servers, messages, work
        self.partitions, self.poll_records = partitions, poll_records
        self.texts, self.keys = [m[2]["text"] for m in messages], [m[2]["id"] for m in messages]
        self.vocabulary = vocabulary
        (work / "vocabulary.txt").write_text("\n".join(vocabulary.words), encoding="utf-8")
        self.best: dict[str, float] = {}
        self.reference: StreamingTopicModel | None = None

    def keep(self, name: str, value: float, smaller_is_better: bool = False) -> None:
        old = self.best.get(name)
        if old is None or (value < old if smaller_is_better else value > old):
            self.best[name] = value

    def keep_per_cpu(self, path: str, documents: int, since) -> None:
        """Documents per CPU-second of this process since ``since`` (``getrusage``), and with
        the best of them the system part of that round's CPU time: page faults land there, not
        load. A model's 0.9 GB of sums allocated where the process freed none touches fresh
        memory inside the timing, 1.3-2.2 s of system time on the development VM (2026-11-25):
        the consumer-only path pays it at least in the first round, the in-process reference
        model being alive then, the in-process path at most in the first round."""
        now = resource.getrusage(resource.RUSAGE_SELF)
        user, system = now.ru_utime - since.ru_utime, now.ru_stime - since.ru_stime
        if documents / (user + system) > self.best.get(f"{path}_docs_per_cpu_s", 0.0):
            self.best[f"{path}_docs_per_cpu_s"] = documents / (user + system)
            self.best[f"{path}_system_cpu_s"] = system

    def config(self, topic: str, name: str) -> ConsumerConfig:
        shutil.rmtree(self.work / name, ignore_errors=True)
        return ConsumerConfig(bootstrap_servers=self.servers, topics=[topic], group_id=f"bench-{uuid.uuid4().hex[:8]}",
                              n_topics=20, vocabulary=str(self.work / "vocabulary.txt"),
                              checkpoint_dir=str(self.work / name), poll_records=self.poll_records,
                              refresh_every_documents=0, checkpoint_every_messages=0,
                              checkpoint_every_wall_seconds=0.0, log_every_seconds=0)

    def in_process(self) -> None:
        self.reference = None
        reuse_memory()
        model = StreamingTopicModel(20, self.vocabulary)
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        model.learn_many(self.texts, self.keys)
        model.statistics()
        self.keep("in_process_docs_per_s", len(self.texts) / (time.perf_counter() - t0))
        self.keep_per_cpu("in_process", len(self.texts), c0)
        self.reference = model

    def consumer_only(self) -> None:
        n = len(self.messages)
        reuse_memory()
        topic = create_topic(self.servers, self.partitions)
        self.keep("produce_docs_per_s", n / produce(self.servers, topic, self.messages))
        t0 = time.perf_counter()
        consumer = RunningConsumer(self.config(topic, "consumer-only"))
        consumer.wait_assigned(self.partitions)
        t1, c1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        consumer.wait_absorbed(n)
        t2 = time.perf_counter()
        self.keep("consumer_only_docs_per_s", n / (t2 - t0))
        self.keep("consumer_only_after_join_docs_per_s", n / (t2 - t1))
        self.keep_per_cpu("consumer_only_after_join", n, c1)
        self.keep("consumer_start_s", t1 - t0, smaller_is_better=True)
        stats, ref = consumer.service.model.statistics(), self.reference.statistics()
        assert stats.n_docs == ref.n_docs and np.allclose(stats.packed, ref.packed, rtol=1e-12, atol=0)
        del stats
        checkpoint = consumer.stop()["last_checkpoint"]
        del consumer
        self.best["checkpoint_bytes"] = checkpoint["bytes"]
        self.keep("checkpoint_save_s", checkpoint["seconds"], smaller_is_better=True)
        with CheckpointStore(self.work / "consumer-only") as store:
            t0 = time.perf_counter()
            restored = store.restore()
            self.keep("checkpoint_restore_s", time.perf_counter() - t0, smaller_is_better=True)
        assert restored.model.documents_absorbed == ref.n_docs

    def end_to_end(self) -> None:
        n = len(self.messages)
        reuse_memory()
        topic = create_topic(self.servers, self.partitions)
        consumer = RunningConsumer(self.config(topic, "end-to-end"))
        consumer.wait_assigned(self.partitions)
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        produce(self.servers, topic, self.messages)
        consumer.wait_absorbed(n)
        self.keep("end_to_end_docs_per_s", n / (time.perf_counter() - t0))
        self.keep_per_cpu("end_to_end", n, c0)
        consumer.stop()

    def end_to_end_producer_process(self) -> None:
        """As :meth:`end_to_end`, the producer in a process of its own (spawned, its interpreter
        started before the timing); documents per CPU-second count this process only."""
        n = len(self.messages)
        reuse_memory()
        topic = create_topic(self.servers, self.partitions)
        consumer = RunningConsumer(self.config(topic, "end-to-end-process"))
        consumer.wait_assigned(self.partitions)
        spawn = multiprocessing.get_context("spawn")
        ready, go = spawn.Event(), spawn.Event()
        producer = spawn.Process(target=produce_when_told, args=(
            self.servers, topic, [(key, value) for key, value, _ in self.messages], ready, go))
        producer.start()
        try:
            if not ready.wait(120):
                raise RuntimeError("the producer process did not start")
            t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            go.set()
            consumer.wait_absorbed(n)
            self.keep("end_to_end_producer_process_docs_per_s", n / (time.perf_counter() - t0))
            self.keep_per_cpu("end_to_end_producer_process", n, c0)
        finally:
            producer.join(timeout=300)
            consumer.stop()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=18_846, help="posts of 20newsgroups-bydate (all: 18,846)")
    parser.add_argument("--vocabulary-size", type=int, default=15_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--poll-records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="measure every path this many times, keep the best")
    parser.add_argument("--bootstrap-servers", default=None, help="use this broker instead of starting one")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    messages = load_messages(args.docs)
    texts = [m[2]["text"] for m in messages]
    tokenizer = Tokenizer()
    vocabulary = Vocabulary.from_document_counts((tokenizer.count(t) for t in texts), args.vocabulary_size)
    warm = StreamingTopicModel(20, vocabulary.words[:200])  # compile the kernels outside the timings
    warm.learn_many(texts[:50])
    warm.statistics()
    del warm

    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = contextlib.nullcontext() if args.bootstrap_servers else KafkaBroker(heap="1g")
    load_before = os.getloadavg()[0]
    with broker as running, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        bench = Bench(args.bootstrap_servers or running.bootstrap_servers, messages, vocabulary, work,
                      args.partitions, args.poll_records)
        for _ in range(args.rounds):
            bench.in_process()
            bench.consumer_only()
            bench.end_to_end()
            bench.end_to_end_producer_process()
    results = {"documents": len(messages), "vocabulary": len(vocabulary), "partitions": args.partitions,
               "rounds": args.rounds, "cpus": os.cpu_count(), "load_average": [load_before, os.getloadavg()[0]],
               "kafka_python": kafka.__version__, "native_crc32c": native_kafka_crc(), **bench.best}

    print(f"{results['documents']} documents, V = {results['vocabulary']}, {args.partitions} partitions, "
          f"{results['cpus']} CPUs (1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after); "
          f"best of {args.rounds}; kafka-python {kafka.__version__}, "
          f"CRC32C {'native' if results['native_crc32c'] else 'in pure Python (crc32c missing: slow)'}")
    print("| path | documents/s | documents per CPU-second |\n|---|---|---|")
    for label, key in [("in-process learn_many", "in_process_docs_per_s"), ("produce (acks=all)", "produce_docs_per_s"),
                       ("consumer-only (pre-filled topic, group join included)", "consumer_only_docs_per_s"),
                       ("consumer-only, after the group join", "consumer_only_after_join_docs_per_s"),
                       ("end-to-end (first send -> last absorbed)", "end_to_end_docs_per_s"),
                       ("end-to-end, producer in its own process", "end_to_end_producer_process_docs_per_s")]:
        cpu = results.get(key.replace("_per_s", "_per_cpu_s"))
        print(f"| {label} | {results[key]:,.0f} | {'–' if cpu is None else f'{cpu:,.0f}'} |")
    print("system CPU seconds of the best per-CPU round (page faults of fresh memory, not load): " + ", ".join(
        f"{label} {results[f'{path}_system_cpu_s']:.2f}" for label, path in [
            ("in-process", "in_process"), ("consumer after the join", "consumer_only_after_join"),
            ("end-to-end", "end_to_end"), ("end-to-end, producer process", "end_to_end_producer_process")]))
    print(f"\nconsumer start (restore, group join, partitions placed): {results['consumer_start_s']:.2f} s")
    print(f"checkpoint at V = {results['vocabulary']}: {results['checkpoint_bytes'] / 1e6:,.0f} MB, "
          f"save {results['checkpoint_save_s']:.2f} s, restore {results['checkpoint_restore_s']:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
