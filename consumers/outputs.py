"""Where the consumer service's results go in Kafka: the snapshot topic, the document-topics
topic, dead letters (:class:`Outputs`). Full snapshots go to the snapshot directory through the
stream driver (:mod:`consumers.stream`).

Sends are asynchronous; the checkpoint calls :meth:`Outputs.flush` first (step 1 of the commit
order in :mod:`consumers.stream`), so every output derived from checkpointed documents is
delivered before their offsets are committed.
"""

from __future__ import annotations

import contextlib
import json
import logging

from kafka import KafkaProducer
from kafka.errors import KafkaError

from streamtopics import Rejection, TopicSnapshot

from .consumer_config import ConsumerConfig
from .metrics import ServiceMetrics

log = logging.getLogger("streamtopics.consumer")


class Outputs:
    """Where results go in Kafka: snapshot topic, document-topics topic, dead letters.

    Sends are asynchronous; :meth:`flush` waits until all are delivered (the checkpoint does
    so first). A send that fails is logged and counted, never allowed to stop the stream."""

    HEADER = "streamtopics."

    def __init__(self, config: ConsumerConfig, metrics: ServiceMetrics):
        self.config = config
        self.metrics = metrics
        self.producer: KafkaProducer | None = None

    @property
    def needs_producer(self) -> bool:
        c = self.config
        return any((c.snapshot_topic, c.doc_topics_topic, c.dead_letter_topic))

    def connect(self) -> None:
        if self.needs_producer and self.producer is None:
            self.producer = KafkaProducer(**self.config.producer_settings())

    def _send(self, topic: str, key: bytes | None, value: bytes | None, headers=None) -> None:
        try:
            future = self.producer.send(topic, key=key, value=value, headers=headers or [])
        except KafkaError as error:
            self._failed(topic, error)
            return
        future.add_errback(lambda error: self._failed(topic, error))

    def _failed(self, topic: str, error) -> None:
        self.metrics.increment("output_errors")
        log.error("could not deliver a message to %s: %s", topic, error)

    def snapshot(self, snapshot: TopicSnapshot) -> None:
        c = self.config
        if c.snapshot_topic:
            self._send(c.snapshot_topic, c.model_name.encode(), snapshot.to_json(c.snapshot_top_words).encode())

    def doc_topics(self, record, key, version: int, topic_ids: list[int], mixture) -> None:
        value = {"key": _text_key(key, record), "snapshot_version": version,
                 "topics": {str(t): round(float(w), 6) for t, w in zip(topic_ids, mixture)},
                 "source": {"topic": record.topic, "partition": record.partition, "offset": record.offset}}
        self._send(self.config.doc_topics_topic, _text_key(key, record).encode(), json.dumps(value).encode())
        self.metrics.increment("doc_topics_published")

    def dead_letter(self, rejection: Rejection, record=None, key=None, document=None) -> None:
        """Send a rejected message: the original record (value, key and headers kept, reason
        and origin added), or -- for a warm-up document rejected only once the vocabulary was
        frozen -- its word counts."""
        if not self.config.dead_letter_topic:
            return
        ours = [("reason", rejection.reason), ("detail", rejection.detail), ("model", self.config.model_name)]
        if record is not None:
            value, key_bytes, theirs = record.value, record.key, list(record.headers or [])
            ours += [("topic", record.topic), ("partition", str(record.partition)), ("offset", str(record.offset)),
                     ("timestamp", str(record.timestamp))]
            if value is not None and len(value) > self.config.max_message_bytes:
                value = value[: self.config.max_message_bytes]
                ours.append(("truncated", "true"))
        else:
            value, key_bytes, theirs = json.dumps(document).encode(), _key_bytes(key), []
            ours.append(("origin", "warmup"))
        headers = theirs + [(self.HEADER + name, text.encode()) for name, text in ours]
        self._send(self.config.dead_letter_topic, key_bytes, value, headers)

    def flush(self) -> None:
        """Block until every send is delivered or has failed; raises KafkaTimeoutError."""
        if self.producer is not None:
            self.producer.flush(timeout=self.config.flush_timeout_s)

    def close(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.producer.close(timeout=self.config.flush_timeout_s)
            self.producer = None


def _key_bytes(key) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    return str(key).encode()


def _text_key(key, record) -> str:
    if key is None:
        return f"{record.topic}/{record.partition}/{record.offset}"
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
