"""Kafka messages -> documents for :class:`~streamtopics.StreamingTopicModel`: the one decoder of
both Kafka paths, the consumer service (:mod:`consumers.kafka_consumer`) and the replay of a topic
(:mod:`consumers.sources.kafka_topic`), so that the two agree on every message.

A value is either a JSON object or plain UTF-8 text. A JSON object carries the document in one
of three configurable fields, tried in this order: a text field (``"text"``), a token list
(``"tokens"``) or a ``{word: count}`` map (``"counts"``); optional fields give the document's
id (used as its key instead of the Kafka message key) and its timestamp (else the message's). With
``format="auto"`` (the default) a value whose first non-blank character is ``{`` is JSON and
anything else is text.

What this module checks is the message *envelope*; the model checks the document itself (empty
after tokenization, too short, unknown words, bad tokens or counts) and rejects it with its own
reason. A bad envelope becomes a :class:`~streamtopics.Rejection` with a code of
:mod:`consumers.reasons`, never an exception, so the stream goes on.

>>> decoder = MessageDecoder()
>>> decoder.decode(b'{"id": "a1", "text": "Goal! A late goal wins the match"}')
DecodedMessage(document='Goal! A late goal wins the match', key='a1', timestamp=None)
>>> decoder.decode(b"plain text, no JSON", key=b"k7").key
b'k7'
>>> decoder.decode(b'{"text": "unterminated').reason
'malformed_json'
>>> decoder.decode(b"\\xff\\xfe").reason
'not_utf8'
"""

from __future__ import annotations

from typing import NamedTuple

from streamtopics.text.rejection import Rejection

from . import reasons
from .times import ImplausibleTime, parse_time, plausible
from .untrusted_json import BadJSON, check_text, load_object

FORMATS = ("auto", "json", "text")


class DecodedMessage(NamedTuple):
    """A message turned into something :meth:`StreamingTopicModel.learn_one` takes (a named
    tuple, not a frozen dataclass: one is built per message, in half the time)."""

    document: str | list | dict
    key: bytes | str | int | None
    timestamp: float | None  # seconds since the epoch, from the timestamp field (decode_record: else the message's)


class MessageDecoder:
    """Decode message values (see the module docstring).

    Parameters
    ----------
    format
        ``"auto"``, ``"json"`` (every value must be a JSON object) or ``"text"`` (every value
        is plain text, even one that looks like JSON).
    text_field, tokens_field, counts_field
        Names of the JSON fields holding the document. ``text_field`` may be several names (a
        title and a body): those present are joined with a newline.
    id_field, timestamp_field
        Optional JSON fields: the document key (string or integer) and the document time
        (seconds since the epoch, as a number or a string, ISO 8601, or ``time_format``).
        ``None`` ignores them.
    time_format
        ``strptime`` format of the timestamp field's strings (default: epoch seconds or ISO 8601).
    max_bytes
        Larger values are rejected as ``"oversized"`` before any decoding.
    """

    def __init__(self, format: str = "auto", text_field: str | tuple[str, ...] = "text", tokens_field: str = "tokens",
                 counts_field: str = "counts", id_field: str | None = "id",
                 timestamp_field: str | None = "timestamp", max_bytes: int = 1_048_576,
                 time_format: str | None = None):
        if format not in FORMATS:
            raise ValueError(f"message format must be one of {FORMATS}, got {format!r}")
        self.format = format
        self.text_fields = (text_field,) if isinstance(text_field, str) else tuple(text_field)
        self.document_fields = (*self.text_fields, tokens_field, counts_field)
        self.id_field = id_field
        self.timestamp_field = timestamp_field
        self.time_format = time_format
        self.max_bytes = int(max_bytes)

    def decode_record(self, record) -> DecodedMessage | Rejection:
        """:meth:`decode` of a Kafka record (``value``, ``key``, ``timestamp`` in milliseconds): the
        document's time is its own, else the record's."""
        decoded = self.decode(record.value, record.key)
        if isinstance(decoded, Rejection) or decoded.timestamp is not None or record.timestamp < 0:
            return decoded
        try:
            return decoded._replace(timestamp=plausible(record.timestamp / 1000))
        except ImplausibleTime as error:
            return Rejection(reasons.IMPLAUSIBLE_TIME, f"message timestamp {record.timestamp} ms: {error}")

    def decode(self, value: bytes | None, key: bytes | None = None) -> DecodedMessage | Rejection:
        """The document in ``value`` keyed by ``key`` (the Kafka message key), or why not."""
        if value is None:
            return Rejection(reasons.UNDECODABLE, "no value (tombstone)")
        if len(value) > self.max_bytes:
            return Rejection(reasons.OVERSIZED, f"{len(value)} bytes > {self.max_bytes}")
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            return Rejection(reasons.NOT_UTF8, f"invalid UTF-8 at byte {error.start}")
        if self.format == "text" or (self.format == "auto" and not text.lstrip().startswith("{")):
            return DecodedMessage(text, key, None)
        try:
            return self._from_object(load_object(text), key)
        except BadJSON as error:
            return Rejection(error.reason, error.detail)

    def _from_object(self, data: dict, key) -> DecodedMessage | Rejection:
        """The document of a JSON object, or why not; :class:`BadJSON` for a lone surrogate in
        the key or the document (checked last, so that a message with several faults is
        rejected for the same one as before)."""
        kinds = (str,) * len(self.text_fields) + (list, dict)
        for field, expected in zip(self.document_fields, kinds):
            if field in data:
                break
        else:
            return Rejection(reasons.MISSING_FIELD, f"none of {list(self.document_fields)} present")
        texts = [name for name in self.text_fields if name in data] if expected is str else [field]
        for name in texts:
            if not isinstance(data[name], expected):
                return Rejection(reasons.UNDECODABLE, f"field {name!r} must be {expected.__name__}, "
                                                      f"got {type(data[name]).__name__}")
        document = "\n".join(data[name] for name in texts) if len(texts) > 1 else data[field]
        if self.id_field is not None and data.get(self.id_field) is not None:
            key = data[self.id_field]
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                return Rejection(reasons.UNDECODABLE, f"id field {self.id_field!r} must be a string or integer")
        timestamp = None
        if self.timestamp_field is not None and data.get(self.timestamp_field) is not None:
            try:
                timestamp = parse_time(data[self.timestamp_field], self.time_format)
            except ImplausibleTime as error:
                return Rejection(reasons.IMPLAUSIBLE_TIME, f"timestamp field {self.timestamp_field!r}: {error}")
            except ValueError as error:
                return Rejection(reasons.UNDECODABLE, f"timestamp field {self.timestamp_field!r}: {error}")
        check_text(self.id_field or "id", key)
        for name in texts:
            check_text(name, data[name])
        return DecodedMessage(document, key, timestamp)


def text_key(key: bytes | str | int) -> str:
    """A message key as text (a key is any bytes: ones that are not UTF-8 read as U+FFFD)."""
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)

