"""A Kafka topic read back as an archive (``kafka://HOST:PORT/TOPIC``), from the beginning, an offset or a time."""

from __future__ import annotations

from typing import Iterator

from streamtopics.text.rejection import Rejection

from .. import reasons
from ..messages import DecodedMessage, MessageDecoder, text_key
from ..records import Malformed, Record, Source, SourceError
from ..untrusted_json import load_object
from .fields import Fields, FieldCheck


class KafkaSource(Source):
    """Replay a Kafka topic up to the end offsets it had when the replay started.

    ``start`` is ``"beginning"``, an offset (the same on every partition) or a time (seconds
    since the epoch: each partition from its first message at or after it). Messages are decoded
    as the consumer service decodes them (:func:`message_decoder`): values are UTF-8 text, or JSON
    objects read with ``fields`` when given (a wrong text-field name stops the read within the
    first records). Position = ``{partition: next offset}``. Only a one-partition topic replays
    in a fixed order.
    """

    def __init__(self, url: str, start="beginning", fields: Fields | None = None,
                 offsets: dict | None = None, timeout_s: float = 30.0):
        from kafka import KafkaConsumer, TopicPartition

        servers, topic = parse_kafka_url(url)
        self.topic, self.fields, self.timeout_s = topic, fields, timeout_s
        self.decoder = message_decoder(fields)
        self._text_check = FieldCheck(fields, f"Kafka topic {topic!r}") if fields else None
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
        decoded = self.decoder.decode_record(message)
        if self._text_check is not None:
            if isinstance(decoded, DecodedMessage):
                self._text_check.found()
            elif decoded.reason == reasons.MISSING_FIELD:  # a JSON object without the document: which fields?
                self._text_check.see(load_object(message.value.decode("utf-8")))
        return archive_item(decoded, f"{self.topic}[{message.partition}]@{message.offset}")

    def progress(self):
        done = sum(self._next.values())
        total = sum(self._end.values())
        return done, total, "msgs"

    @property
    def name(self) -> str:
        return self.topic


def message_decoder(fields: Fields | None) -> MessageDecoder:
    """The consumer service's decoder (:class:`~consumers.messages.MessageDecoder`) set as the
    replay's options say: without ``fields`` every value is text, with them a JSON object."""
    if fields is None:
        return MessageDecoder("text", id_field=None, timestamp_field=None)
    return MessageDecoder("json", fields.text, id_field=fields.id, timestamp_field=fields.time,
                          time_format=fields.time_format)


def archive_item(decoded: DecodedMessage | Rejection, where: str) -> Record | Malformed:
    """A decoded message as an archive's item: a Record (a message key as text), or a Malformed at ``where``."""
    if isinstance(decoded, Rejection):
        return Malformed(where, decoded.reason, decoded.detail)
    key = text_key(decoded.key) if isinstance(decoded.key, bytes) else decoded.key
    return Record(decoded.document, key, decoded.timestamp)


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://host:port[,host:port]/topic`` -> (servers, topic)."""
    if not url.startswith("kafka://") or "/" not in url[len("kafka://"):]:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    servers, topic = url[len("kafka://"):].split("/", 1)
    if not servers or not topic:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    return servers, topic
