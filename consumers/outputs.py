"""Where the consumer service's results go in Kafka: the snapshot topic, the document-topics
topic, dead letters (:class:`Outputs`). Full snapshots go to the snapshot directory through the
stream driver (:mod:`consumers.stream`).

Sends are asynchronous; the checkpoint calls :meth:`Outputs.flush` first (step 1 of the commit
order in :mod:`consumers.stream`), so every output derived from checkpointed documents is
delivered before their offsets are committed.

Dead letters are the only copy of a rejected message, so they get two guarantees more than the
other outputs (which a later refresh or a re-read can produce again):

* every dead letter fits the producer's ``max_request_size`` (the record as the producer
  measures it: key, value, headers and the record-batch overhead), and its value is at most
  ``max_message_bytes``. When it would not be, the value is cut to fit and the headers say so (``streamtopics.truncated: true``,
  ``streamtopics.original_bytes``); if even an empty value does not fit, the original headers
  are dropped (``streamtopics.headers_dropped``: how many), then the key is cut
  (``streamtopics.key_truncated``: its original size).
* a dead letter that still cannot be delivered (the broker refuses it, e.g. the topic's
  ``max.message.bytes`` is smaller, or the producer gave up after its own retries) is recorded,
  and :meth:`Outputs.flush` -- step 1 of every checkpoint -- raises
  :class:`DeadLetterUndelivered` instead of returning, so no checkpoint and no commit passes over
  it. The consumer then *stops* (see :class:`DeadLetterUndelivered` for why stop and not retry).
"""

from __future__ import annotations

import contextlib
import json
import logging

import threading

from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka.record.default_records import DefaultRecordBatchBuilder

from streamtopics import Rejection, TopicSnapshot

from .consumer_config import ConsumerConfig
from .messages import text_key
from .metrics import ServiceMetrics

log = logging.getLogger("streamtopics.consumer")

#: kafka-python's default ``max_request_size``, the bound of a record unless producer_options set it.
DEFAULT_MAX_REQUEST_SIZE = 1_048_576
#: Longest ``streamtopics.detail`` header (characters): a reason, never a copy of the message.
MAX_DETAIL_CHARS = 1_000


class DeadLetterUndelivered(RuntimeError):
    """A dead letter could not be delivered: no checkpoint or commit may pass over its message.

    Raised by :meth:`Outputs.flush` (so by every checkpoint) and by :meth:`Outputs.check`; the
    consumer does not catch it, so it stops without checkpointing, and the next start re-reads
    from the last checkpoint -- which is before the message -- and sends the dead letter again.

    Stop, not retry: the producer already retries every retriable error by itself (until its
    ``delivery_timeout_ms``), so a dead letter that reaches this point failed for a reason that
    repeating the send does not cure (the topic refuses records that large, the client may not
    write to it, the topic does not exist and cannot be created). Retrying in the consume loop
    would hold every checkpoint back while the un-checkpointed backlog grows without bound; going
    on would lose the message. Stopping with this error names the topic, the message and the
    cause, and loses nothing: once the topic is fixed, a restart delivers the dead letter and
    goes on. It is deliberately not a ``KafkaError``: those are treated as a passing outage
    (reconnect, postpone the checkpoint) by the consumer."""


class Outputs:
    """Where results go in Kafka: snapshot topic, document-topics topic, dead letters.

    Sends are asynchronous; :meth:`flush` waits until all are delivered (the checkpoint does
    so first). A snapshot or document-topics send that fails is logged and counted
    (``output_errors``), never allowed to stop the stream; a dead letter that fails is counted
    too and makes :meth:`flush` raise :class:`DeadLetterUndelivered` (module docstring).
    ``undelivered`` lists the dead letters that failed (topic/partition@offset, and why);
    ``pending`` counts the sends neither delivered nor failed yet."""

    HEADER = "streamtopics."

    def __init__(self, config: ConsumerConfig, metrics: ServiceMetrics):
        self.config = config
        self.metrics = metrics
        self.producer: KafkaProducer | None = None
        self.undelivered: list[str] = []  # appended on the producer's IO thread
        self.pending = 0  # counted down on the producer's IO thread
        self._lock = threading.Lock()

    @property
    def max_record_bytes(self) -> int:
        """The largest record the producer sends (its ``max_request_size``)."""
        return int(self.config.producer_settings().get("max_request_size", DEFAULT_MAX_REQUEST_SIZE))

    @property
    def needs_producer(self) -> bool:
        c = self.config
        return any((c.snapshot_topic, c.doc_topics_topic, c.dead_letter_topic))

    def connect(self) -> None:
        if self.needs_producer and self.producer is None:
            self.producer = KafkaProducer(**self.config.producer_settings())

    def _send(self, topic: str, key: bytes | None, value: bytes | None, headers=None, dead_letter: str | None = None) -> None:
        """Send asynchronously; ``dead_letter`` names the rejected message when this is its dead letter."""
        try:
            future = self.producer.send(topic, key=key, value=value, headers=headers or [])
        except KafkaError as error:
            self._failed(topic, error, dead_letter)
            return
        with self._lock:
            self.pending += 1
        future.add_both(self._settled)
        future.add_errback(lambda error: self._failed(topic, error, dead_letter))

    def _settled(self, _) -> None:
        with self._lock:
            self.pending -= 1

    def _failed(self, topic: str, error, dead_letter: str | None = None) -> None:
        self.metrics.increment("output_errors")
        if dead_letter is None:
            log.error("could not deliver a message to %s: %s", topic, error)
            return
        with self._lock:
            self.undelivered.append(f"{dead_letter} ({type(error).__name__}: {error})")
        log.error("could not deliver the dead letter of %s to %s: %s: %s", dead_letter, topic,
                  type(error).__name__, error)

    def check(self) -> None:
        """Raise :class:`DeadLetterUndelivered` if a dead letter failed (the consume loop asks
        after every batch, so it stops early; :meth:`flush` asks after delivering)."""
        with self._lock:
            failed = list(self.undelivered)
        if failed:
            raise DeadLetterUndelivered(
                f"{len(failed)} dead letter(s) could not be delivered to {self.config.dead_letter_topic}: "
                f"{'; '.join(failed[:5])}. Stopping without checkpointing past them; the next start re-reads "
                "them from the last checkpoint. Fix the topic (e.g. its max.message.bytes must be at least the "
                f"producer's max_request_size, {self.max_record_bytes}) or lower max_request_size "
                "(--producer-option max_request_size=N).")

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
        and origin added; cut to fit, see the module docstring), or -- for a warm-up document
        rejected only once the vocabulary was frozen -- its word counts."""
        if not self.config.dead_letter_topic:
            return
        ours = [("reason", rejection.reason), ("detail", str(rejection.detail)[:MAX_DETAIL_CHARS]),
                ("model", self.config.model_name)]
        if record is not None:
            value, key_bytes, theirs = record.value, record.key, list(record.headers or [])
            ours += [("topic", record.topic), ("partition", str(record.partition)), ("offset", str(record.offset)),
                     ("timestamp", str(record.timestamp))]
            origin = f"{record.topic}/{record.partition}@{record.offset}"
        else:
            value, key_bytes, theirs = json.dumps(document).encode(), _key_bytes(key), []
            ours.append(("origin", "warmup"))
            origin = f"warm-up document {_text_key(key, None) if key is not None else '(no key)'}"
        key_bytes, value, headers = fit_record(key_bytes, value, theirs, ours, self.max_record_bytes,
                                               max_value=self.config.max_message_bytes, prefix=self.HEADER)
        self._send(self.config.dead_letter_topic, key_bytes, value, headers, dead_letter=origin)

    def flush(self) -> None:
        """Block until every send is delivered or has failed; raises KafkaTimeoutError (not
        all done in ``flush_timeout_s``: a passing outage, the checkpoint waits) or
        :class:`DeadLetterUndelivered` (a dead letter failed: the consumer stops)."""
        if self.producer is not None:
            self.producer.flush(timeout=self.config.flush_timeout_s)
        self.check()

    def close(self, wait: bool = True) -> None:
        """Close the producer, waiting at most ``flush_timeout_s`` for pending sends, or not at
        all unless ``wait`` (a flush just gave up on them: the next start sends them again).
        kafka-python's close flushes first and raises when that times out, before closing:
        then its IO thread, a daemon, goes on trying until the process ends."""
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.producer.close(timeout=self.config.flush_timeout_s if wait else 0)
            self.producer = None


def record_bytes(key: bytes | None, value: bytes | None, headers: list) -> int:
    """A record's size as the producer measures it against ``max_request_size`` (an upper bound
    of its record batch: the batch header, the record's overhead, key, value and headers)."""
    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)


def fit_record(key: bytes | None, value: bytes | None, theirs: list, ours: list, limit: int,
               max_value: int | None = None, prefix: str = Outputs.HEADER) -> tuple[bytes | None, bytes | None, list]:
    """``(key, value, headers)`` of at most ``limit`` bytes (:func:`record_bytes`) and a value
    of at most ``max_value`` bytes: ``theirs`` (the original headers) followed by ``ours``
    (``(name, text)``, named ``prefix + name``). What does not fit is cut, in this order, and
    noted in headers of ours: the value (``truncated``, ``original_bytes``), then the original
    headers (``headers_dropped``), then the key (``key_truncated``: its original size). A
    record without key and value gets an empty value (Kafka needs one of them).

    >>> key, value, headers = fit_record(b"k", b"x" * 5000, [], [("reason", "oversized")], 1000)
    >>> record_bytes(key, value, headers) <= 1000 < record_bytes(b"k", b"x" * 5000, headers)
    True
    >>> [(name, text) for name, text in headers][1:]
    [('streamtopics.truncated', b'true'), ('streamtopics.original_bytes', b'5000')]
    """
    def encode(pairs):
        return [(prefix + name, text.encode("utf-8", "replace")) for name, text in pairs]

    if key is None and value is None:
        value = b""
    headers = list(theirs) + encode(ours)
    too_long = value is not None and max_value is not None and len(value) > max_value
    if not too_long and record_bytes(key, value, headers) <= limit:
        return key, value, headers
    notes = list(ours)
    if value:
        notes += [("truncated", "true"), ("original_bytes", str(len(value)))]
        if too_long:
            value = value[:max_value]
    headers = list(theirs) + encode(notes)
    if theirs and record_bytes(key, b"", headers) > limit:
        notes.append(("headers_dropped", str(len(theirs))))
        headers = encode(notes)
    if key and record_bytes(key, b"", headers) > limit:
        headers = encode(notes + [("key_truncated", str(len(key)))])
        key = key[: max(0, len(key) - (record_bytes(key, b"", headers) - limit))]
        while key and record_bytes(key, b"", headers) > limit:  # length prefixes can move by a byte
            key = key[:-1]
    if value:
        value = value[: max(0, len(value) - (record_bytes(key, value, headers) - limit))]
        while value and record_bytes(key, value, headers) > limit:
            value = value[:-1]
    return key, value, headers


def _key_bytes(key) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    return str(key).encode()


def _text_key(key, record) -> str:
    if key is None:
        return f"{record.topic}/{record.partition}/{record.offset}"
    return text_key(key)
