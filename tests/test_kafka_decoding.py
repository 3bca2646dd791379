"""The consumer service and the replay of a ``kafka://`` topic decode a message the same way:
the same document, key and time, or the same reason to reject it (one decoder,
:mod:`consumers.messages`). No broker: the messages are built here."""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from consumers import reasons
from consumers.consumer_config import ConsumerConfig
from consumers.messages import text_key
from consumers.records import Malformed, Record
from consumers.sources import Fields, KafkaSource
from consumers.sources.fields import FieldCheck
from consumers.sources.kafka_topic import message_decoder
from streamtopics import Rejection


class Message(NamedTuple):
    """What kafka-python's ConsumerRecord carries that decoding reads."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = 1_700_000_000_000  # milliseconds; -1: none
    partition: int = 0
    offset: int = 0


class OfflineTopic(KafkaSource):
    """A KafkaSource that decodes without a broker (its __init__ would connect)."""

    def __init__(self, fields: Fields | None):
        self.topic, self.fields = "news", fields
        self.decoder = message_decoder(fields)
        self._text_check = FieldCheck(fields, "Kafka topic 'news'") if fields else None


HOSTILE = [
    Message(b"plain text about a goal"),
    Message(b"caf\xe9 au lait"),  # not UTF-8
    Message(None),  # a tombstone
    Message(b""),
    Message(b"text with a key", key=b"k7"),
    Message(b"text with a key that is not UTF-8", key=b"\xff\xfe"),
    Message(b"no message time", timestamp=-1),
    Message(b"a message time far in the future", timestamp=2 ** 62),
    Message(b"x" * 1_048_577),  # oversized
    Message(b'{"body": "a JSON document", "id": "a1", "time": "2024-03-01T00:00:00Z"}', key=b"k"),
    Message(b'{"body": "no time field: the message time"}'),
    Message(b'{"title": "no body"}'),  # JSON without the text
    Message(b'{"body": "unterminated'),
    Message(b"[1, 2, 3]"),  # JSON, not an object
    Message(b'{"body": 42}'),
    Message(b'{"body": null}'),
    Message(b'{"body": "a huge time", "time": ' + b"9" * 400 + b"}"),
    Message(b'{"body": "an impossible time", "time": 1e300}'),
    Message(b'{"body": "a time that is no time", "time": "soon"}'),
    Message(b'{"body": "a list id", "id": [1]}'),
    Message(b'{"body": "a true id", "id": true}'),
    Message(b'{"body": "a lone surrogate \\ud800"}'),
    Message(b'{"body": "x", "id": "\\udc00"}'),
    Message(b'{"tokens": ["goal", "match"]}'),
    Message(b'{"counts": {"goal": 2}}'),
    Message(b'{"body": "' + b"[" * 5000 + b'"}'),
    Message(b"[" * 5000 + b"]" * 5000),
    Message(json.dumps({"body": "nested", "extra": {"a": [[[[[]]]]]}}).encode()),
]


def consumed(config: ConsumerConfig, message: Message):
    """What the consumer service makes of ``message`` (TopicModelConsumer._absorb's decoding)."""
    decoded = config.message_decoder().decode_record(message)
    if isinstance(decoded, Rejection):
        return decoded.reason, decoded.detail
    key = text_key(decoded.key) if isinstance(decoded.key, bytes) else decoded.key
    return decoded.document, key, decoded.timestamp


def replayed(topic: OfflineTopic, message: Message):
    """What ``streamtopics replay kafka://...`` makes of ``message``."""
    item = topic._decode(message)
    if isinstance(item, Malformed):
        assert item.where == "news[0]@0"
        return item.reason, item.detail
    assert isinstance(item, Record)
    return item.document, item.key, item.timestamp


@pytest.mark.parametrize("consumer, fields", [
    (dict(message_format="json", text_field="body", id_field="id", timestamp_field="time"),
     Fields(text=("body",), id="id", time="time")),
    (dict(message_format="text", id_field="", timestamp_field=""), None),
], ids=["json", "text"])
def test_the_consumer_and_the_replay_agree_on_every_message(consumer, fields):
    config = ConsumerConfig(topics=["news"], **consumer)
    topic = OfflineTopic(fields)
    outcomes = set()
    for message in HOSTILE:
        got = replayed(topic, message)
        assert got == consumed(config, message), message.value[:80] if message.value else message
        outcomes.add(got[0] if isinstance(got[0], str) and got[0] in reasons.MESSAGES else "decoded")
    assert {"decoded", reasons.NOT_UTF8, reasons.UNDECODABLE, reasons.OVERSIZED} <= outcomes
    if fields is not None:
        assert {reasons.MISSING_FIELD, reasons.MALFORMED_JSON} <= outcomes


def test_the_replay_reads_several_text_fields_joined_as_before():
    topic = OfflineTopic(Fields(text=("title", "body"), id="id", time="time", time_format="%d-%b-%Y"))
    item = topic._decode(Message(b'{"title": "Goal", "body": "late winner", "id": 7, "time": "26-Feb-1987"}'))
    assert item == Record("Goal\nlate winner", 7, 541_296_000.0)
    assert topic._decode(Message(b'{"body": "only the body"}')).document == "only the body"
