"""JSON that comes from outside: every way a value fails to be a usable JSON object, as one error.

``json.loads`` raises more than ``JSONDecodeError`` on hostile input: ``RecursionError`` for
values nested about a thousand deep (a 2 kB message), ``ValueError`` for an integer of more than
4,300 digits (Python's integer-string limit). And a JSON string may hold a lone UTF-16 surrogate
(``"\\ud800"``), which is no Unicode text at all: it cannot be encoded back to UTF-8 (the key
hash, a dead letter's headers, the doc-topics output would fail on it). :func:`load_object`
turns all of these into :class:`BadJSON` with one of :mod:`consumers.reasons`' codes, so every
decoder (Kafka messages, JSON Lines archives, a Kafka topic replayed) rejects them alike.

>>> load_object('{"text": "ok"}')
{'text': 'ok'}
>>> try:
...     load_object("[" * 5000 + "]" * 5000)
... except BadJSON as error:
...     print(error.reason, "-", error.detail)
malformed_json - nested too deeply
"""

from __future__ import annotations

import json

from . import reasons


class BadJSON(ValueError):
    """Why a JSON value is not a usable object: ``reason`` (a code of :mod:`consumers.reasons`)
    and ``detail``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def load_object(text: str) -> dict:
    """The JSON object in ``text``, or :class:`BadJSON`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadJSON(reasons.MALFORMED_JSON, f"{error.msg} at column {error.colno}") from None
    except RecursionError:
        raise BadJSON(reasons.MALFORMED_JSON, "nested too deeply") from None
    except ValueError as error:  # e.g. an integer past the digit limit
        raise BadJSON(reasons.MALFORMED_JSON, str(error).split(";")[0]) from None
    if not isinstance(value, dict):
        raise BadJSON(reasons.UNDECODABLE, f"a JSON {type(value).__name__}, not an object")
    return value


def check_text(name: str, value) -> None:
    """:class:`BadJSON` if ``value`` (a string, or the strings of a list or of a dict's keys)
    holds a lone surrogate."""
    strings = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, dict)) else []
    for string in strings:
        if isinstance(string, str):
            try:
                string.encode("utf-8")
            except UnicodeEncodeError as error:
                raise BadJSON(reasons.UNDECODABLE, f"field {name!r} holds a lone surrogate at "
                                                   f"character {error.start}") from None
