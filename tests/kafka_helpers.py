"""Helpers for the Kafka consumer tests: corpus, topics, producing and reading, the consumer as
a separate process, and comparison of model statistics."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError

from consumers.checkpoint import CheckpointStore
from streamtopics import StreamingTopicModel, Tokenizer, Vocabulary

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPUS = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
N_TOPICS = 5


KAFKA_CORPUS_DOCS = 2000  # first posts of 20 Newsgroups used by the Kafka and scale-out tests


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def load_corpus(n: int) -> list[dict]:
    """The first ``n`` posts of 20newsgroups-bydate with a body: ``{"id", "text", ...}`` dicts.
    (A post without one keeps only its subject's few words, none of them maybe in the tests'
    vocabulary: the model would rightly reject it, and the tests count every post absorbed.)"""
    docs = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as handle:
        for line in handle:
            post = json.loads(line)
            if not post["text"].partition("\n\n")[2].strip():
                continue
            docs.append(post)
            if len(docs) == n:
                break
    return docs


def build_vocabulary(docs: list[dict], size: int) -> Vocabulary:
    tokenizer = Tokenizer()
    return Vocabulary.from_document_counts((tokenizer.count(d["text"]) for d in docs), size)


def corpus_messages(docs: list[dict]) -> list[tuple[bytes, bytes]]:
    """(key, value) per post: the id as key, ``{"id", "text"}`` JSON as value."""
    return [(d["id"].encode(), json.dumps({"id": d["id"], "text": d["text"]}).encode()) for d in docs]


def reference_model(docs: list[dict], vocabulary: Vocabulary) -> StreamingTopicModel:
    """The same documents fed in-process, in corpus order."""
    model = StreamingTopicModel(N_TOPICS, vocabulary)
    for d in docs:
        model.learn_one(d["text"], d["id"])
    return model


def assert_same_statistics(actual: StreamingTopicModel, expected: StreamingTopicModel, exact: bool = False) -> None:
    """Counts (documents, document frequencies, word counts: sums of integers) must be equal;
    the float sums (co-occurrence, word mass) bit-identical when ``exact`` (same document order),
    else equal to rtol 1e-12 -- every term is positive, so summing ~2,000 of them in another
    order moves a cell by at most ~2e-13 relative."""
    a, e = actual.statistics(), expected.statistics()
    assert a.n_docs == e.n_docs, (a.n_docs, e.n_docs)
    assert actual.rejections == expected.rejections
    assert np.array_equal(a.document_frequency, e.document_frequency)
    assert np.array_equal(a.word_counts, e.word_counts)
    for name in ("packed", "word_mass"):
        x, y = getattr(a, name), getattr(e, name)
        if exact:
            assert np.array_equal(x, y), name
        else:
            assert np.array_equal(x == 0, y == 0), name
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=0, err_msg=name)


# --------------------------------------------------------------------------- Kafka


def create_topic(broker, name: str, partitions: int, config: dict | None = None) -> None:
    """Create ``name``; ``config`` holds topic settings, e.g. ``{"max.message.bytes": "200"}``."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                      topic_configs=config or {})])
    finally:
        admin.close()


def alter_topic(broker, name: str, config: dict) -> None:
    """Change topic settings (e.g. ``max.message.bytes``) on the broker."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=config)])
    finally:
        admin.close()


def produce(broker, topic: str, messages, partition: int | None = None, timestamps_ms=None) -> None:
    """Send (key, value) or (key, value, headers) tuples and wait until all are acknowledged
    (records of up to 16 MiB; the topic's ``max.message.bytes`` must allow them); with
    ``timestamps_ms``, each record's timestamp (else the producer's clock)."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=5,
                             max_request_size=16 * 1024 * 1024)
    try:
        stamps = [None] * len(messages) if timestamps_ms is None else list(timestamps_ms)
        futures = [producer.send(topic, key=m[0], value=m[1], headers=list(m[2]) if len(m) > 2 else None,
                                 partition=partition, timestamp_ms=stamp) for m, stamp in zip(messages, stamps)]
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close()


def read_topic(broker, topic: str, expected: int, timeout: float = 60) -> list:
    """Every record of ``topic`` (all partitions, from the beginning), once ``expected`` arrived."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout
        partitions = None
        while not partitions and time.monotonic() < deadline:
            partitions = consumer.partitions_for_topic(topic)
            time.sleep(0.1 if not partitions else 0)
        assert partitions, f"topic {topic} does not exist"
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        consumer.seek_to_beginning()
        records = []
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        for batch in consumer.poll(timeout_ms=300).values():  # nothing beyond what was expected
            records.extend(batch)
        return records
    finally:
        consumer.close()


def committed_offsets(broker, group: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """The group's committed offsets on ``topic``. Retries while the group coordinator is still
    loading its offsets or not yet there (retriable errors, e.g. just after the broker restarted)."""
    deadline = time.monotonic() + timeout
    while True:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            offsets = admin.list_group_offsets({group: None})[group]
            break
        except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}


def end_offsets(broker, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        consumer.close()
    return {tp.partition: offset for tp, offset in ends.items()}


def final_model(checkpoint_dir: Path) -> tuple[StreamingTopicModel, dict]:
    """The model and offsets of the newest good checkpoint."""
    with CheckpointStore(checkpoint_dir) as store:
        restored = store.restore()
    assert restored.model is not None, f"no checkpoint in {checkpoint_dir}"
    return restored.model, restored.checkpoint.offsets


# --------------------------------------------------------------------------- the consumer process


class ConsumerProcess:
    """``python -m consumers.cli consume ARGS`` as a child process, output in a log file."""

    def __init__(self, args: list[str], log_path: Path):
        self.log_path = log_path
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log_path, "ab") as log:
            log.write(f"=== start {' '.join(args)}\n".encode())
            self.proc = subprocess.Popen([sys.executable, "-m", "consumers.cli", "consume", *args],
                                         cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, signum=signal.SIGKILL) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=120)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"consumer did not finish in {timeout} s:\n{self.log_tail()}") from None

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
