"""Kafka message values -> documents for :class:`~streamtopics.StreamingTopicModel`.

A value is either a JSON object or plain UTF-8 text. A JSON object carries the document in one
of three configurable fields, tried in this order: a text field (``"text"``), a token list
(``"tokens"``) or a ``{word: count}`` map (``"counts"``); optional fields give the document's
id (used as its key instead of the Kafka message key) and its timestamp. With
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

from streamtopics.documents import Rejection

from . import reasons
from .times import parse_time
from .untrusted_json import BadJSON, check_text, load_object

FORMATS = ("auto", "json", "text")


class DecodedMessage(NamedTuple):
    """A message turned into something :meth:`StreamingTopicModel.learn_one` takes (a named
    tuple, not a frozen dataclass: one is built per message, in half the time)."""

    document: str | list | dict
    key: bytes | str | int | None
    timestamp: float | None  # seconds since the epoch, from the timestamp field


class MessageDecoder:
    """Decode message values (see the module docstring).

    Parameters
    ----------
    format
        ``"auto"``, ``"json"`` (every value must be a JSON object) or ``"text"`` (every value
        is plain text, even one that looks like JSON).
    text_field, tokens_field, counts_field
        Names of the JSON fields holding the document.
    id_field, timestamp_field
        Optional JSON fields: the document key (string or integer) and the document time
        (seconds since the epoch, as a number or a string, or ISO 8601). ``None`` ignores them.
    max_bytes
        Larger values are rejected as ``"oversized"`` before any decoding.
    """

    def __init__(self, format: str = "auto", text_field: str = "text", tokens_field: str = "tokens",
                 counts_field: str = "counts", id_field: str | None = "id",
                 timestamp_field: str | None = "timestamp", max_bytes: int = 1_048_576):
        if format not in FORMATS:
            raise ValueError(f"message format must be one of {FORMATS}, got {format!r}")
        self.format = format
        self.document_fields = (text_field, tokens_field, counts_field)
        self.id_field = id_field
        self.timestamp_field = timestamp_field
        self.max_bytes = int(max_bytes)

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
        for field, expected in zip(self.document_fields, (str, list, dict)):
            if field in data:
                break
        else:
            return Rejection(reasons.MISSING_FIELD, f"none of {list(self.document_fields)} present")
        document = data[field]
        if not isinstance(document, expected):
            return Rejection(reasons.UNDECODABLE, f"field {field!r} must be {expected.__name__}, "
                                                  f"got {type(document).__name__}")
        if self.id_field is not None and data.get(self.id_field) is not None:
            key = data[self.id_field]
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                return Rejection(reasons.UNDECODABLE, f"id field {self.id_field!r} must be a string or integer")
        timestamp = None
        if self.timestamp_field is not None and data.get(self.timestamp_field) is not None:
            try:
                timestamp = parse_time(data[self.timestamp_field])
            except ValueError as error:
                return Rejection(reasons.UNDECODABLE, f"timestamp field {self.timestamp_field!r}: {error}")
        check_text(self.id_field or "id", key)
        check_text(field, document)
        return DecodedMessage(document, key, timestamp)

