"""A Kafka topic read back as an archive (``kafka://HOST:PORT/TOPIC``), from the beginning, an offset or a time."""

from __future__ import annotations

from typing import Iterator

from .. import reasons
from ..records import Malformed, Record, Source, SourceError
from ..untrusted_json import BadJSON, load_object
from .fields import Fields, TextFieldCheck


class KafkaSource(Source):
    """Replay a Kafka topic up to the end offsets it had when the replay started.

    ``start`` is ``"beginning"``, an offset (the same on every partition) or a time (seconds
    since the epoch: each partition from its first message at or after it). Message values are
    UTF-8 text, or JSON objects read with ``fields`` when given (a wrong text-field name stops
    the read within the first records); the key is the message key and
    the timestamp the message's. Position = ``{partition: next offset}``. Only a one-partition
    topic replays in a fixed order.
    """

    def __init__(self, url: str, start="beginning", fields: Fields | None = None,
                 offsets: dict | None = None, timeout_s: float = 30.0):
        from kafka import KafkaConsumer, TopicPartition

        servers, topic = parse_kafka_url(url)
        self.topic, self.fields, self.timeout_s = topic, fields, timeout_s
        self._text_check = TextFieldCheck(fields, f"Kafka topic {topic!r}") if fields else None
        self.spec = {"path": url, "format": "kafka", "kafka_start": start,
                     **(fields.to_dict() if fields else {"text_fields": None})}
        try:
            self._consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, group_id=None,
                                           request_timeout_ms=int(timeout_s * 1000) + 5000)
        except Exception as error:  # kafka-python raises NoBrokersAvailable and friends
            raise SourceError(f"cannot reach Kafka at {servers}: {error}") from None
        partitions = self._consumer.partitions_for_topic(topic)
        if not partitions:
            self._consumer.close()
            raise SourceError(f"no topic {topic!r} on {servers}")
        self._partitions = [TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(self._partitions)
        self._end = self._consumer.end_offsets(self._partitions)
        if offsets is not None:
            begin = {tp: int(offsets[str(tp.partition)]) for tp in self._partitions}
        elif start == "beginning":
            begin = self._consumer.beginning_offsets(self._partitions)
        elif isinstance(start, int):
            begin = {tp: start for tp in self._partitions}
        else:
            found = self._consumer.offsets_for_times({tp: int(float(start) * 1000) for tp in self._partitions})
            begin = {tp: self._end[tp] if found[tp] is None else found[tp].offset for tp in self._partitions}
        self._next = {tp: min(begin[tp], self._end[tp]) for tp in self._partitions}
        for tp in self._partitions:
            self._consumer.seek(tp, self._next[tp])

    @property
    def position(self) -> dict:
        return {str(tp.partition): offset for tp, offset in self._next.items()}

    def __iter__(self) -> Iterator[Record | Malformed]:
        messages = self._messages()
        return self._text_check.held_back(messages) if self._text_check else messages

    def _messages(self) -> Iterator[Record | Malformed]:
        import time

        deadline = time.monotonic() + self.timeout_s
        try:
            while any(self._next[tp] < self._end[tp] for tp in self._partitions):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka topic {self.topic!r}: no message for {self.timeout_s:g} s")
                batches = self._consumer.poll(timeout_ms=500)
                if batches:
                    deadline = time.monotonic() + self.timeout_s
                for tp in sorted(batches, key=lambda tp: tp.partition):
                    for message in batches[tp]:
                        if message.offset >= self._end[tp]:
                            continue
                        self._next[tp] = message.offset + 1
                        yield self._decode(message)
        finally:
            self._consumer.close()

    def _decode(self, message) -> Record | Malformed:
        where = f"{self.topic}[{message.partition}]@{message.offset}"
        try:
            text = (message.value or b"").decode("utf-8")
        except UnicodeDecodeError as error:
            return Malformed(where, reasons.NOT_UTF8, f"byte {error.start + 1}")
        key = None
        if message.key is not None:
            key = message.key.decode("utf-8", "backslashreplace")
        timestamp = message.timestamp / 1000 if message.timestamp is not None and message.timestamp >= 0 else None
        if self.fields is None:
            return Record(text, key, timestamp)
        try:
            row = load_object(text)
        except BadJSON as error:
            return Malformed(where, error.reason, error.detail)
        self._text_check.see(row)
        record = self.fields.extract(row, lambda: where)
        if isinstance(record, Record) and (record.key is None or record.timestamp is None):
            record = Record(record.document, record.key if record.key is not None else key,
                            record.timestamp if record.timestamp is not None else timestamp)
        return record

    def progress(self):
        done = sum(self._next.values())
        total = sum(self._end.values())
        return done, total, "msgs"

    @property
    def name(self) -> str:
        return self.topic


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://host:port[,host:port]/topic`` -> (servers, topic)."""
    if not url.startswith("kafka://") or "/" not in url[len("kafka://"):]:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    servers, topic = url[len("kafka://"):].split("/", 1)
    if not servers or not topic:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    return servers, topic
