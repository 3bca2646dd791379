"""Hostile message content never raises: every decoder and the model turn it into a counted
rejection with a reason (issue 15, item 1 and 5). A seeded fuzzer over JSON values, keys and byte
strings, the three shapes that crashed the consumer and stopped replays, and huge counts."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

from consumers import reasons
from consumers.messages import DecodedMessage, MessageDecoder
from consumers.records import Malformed, Record
from consumers.times import parse_time
from consumers.sources import Fields, JsonLinesSource
from streamtopics import StreamingTopicModel
from streamtopics.text.rejection import REJECTION_REASONS, Rejection

WORDS = [f"w{i}" for i in range(30)]
KNOWN = set(reasons.MESSAGES) | set(REJECTION_REASONS)

DEEP = b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}"
HUGE_INT = b'{"id": ' + b"9" * 5000 + b', "text": "w1 w2 w3"}'
SURROGATE_ID = b'{"id": "\\ud800", "text": "w1 w2 w3"}'
SURROGATE_TEXT = b'{"text": "w1 \\udfff w2"}'
HUGE_COUNTS = b'{"counts": {"w1": 1e200, "w2": 1e200}}'
FLOAT_OVERFLOW = "1" + "0" * 309  # JSON allows it, float() raises OverflowError (under the 4,300-digit guard)
OVERFLOWING_TIME = b'{"text": "w1 w2 w3", "timestamp": ' + FLOAT_OVERFLOW.encode() + b"}"


def fuzz_values(rng: random.Random, n: int):
    """JSON-ish byte strings: valid objects with odd fields, escapes, nesting and numbers, and
    damaged or random bytes."""
    atoms = ['"w1 w2 w3"', '"\\ud800"', '"\\udc00x"', '"\\u0000"', "1e400", "-0", "null", "true", "[]", "{}",
             "9" * 4400, '"' + "w4 " * 50 + '"', '["w1", "w2"]', '["w1", 7]', '{"w1": 2}', '{"w1": -1}',
             '{"w1": 1e300}', '{"\\ud800": 1}', '"2024-01-01T00:00:00Z"', '"not a time"', FLOAT_OVERFLOW,
             '{"w1": ' + FLOAT_OVERFLOW + "}"]
    fields = ["text", "tokens", "counts", "id", "timestamp", "title"]
    for _ in range(n):
        kind = rng.random()
        if kind < 0.6:
            body = ", ".join(f'"{rng.choice(fields)}": {rng.choice(atoms)}' for _ in range(rng.randint(0, 4)))
            value = ("{" + body + "}").encode()
        elif kind < 0.75:
            depth = rng.choice([10, 999, 1001, 3000])
            value = ('{"text": ' + "[" * depth + "]" * depth + "}").encode()
        elif kind < 0.9:
            value = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
        else:
            good = b'{"text": "w1 w2 w3", "id": "k"}'
            cut = rng.randint(0, len(good))
            value = good[:cut] + bytes([rng.getrandbits(8)]) + good[cut + 1:]
        yield value


def decoded_or_reason(decoder: MessageDecoder, value: bytes, key: bytes | None):
    result = decoder.decode(value, key)
    if isinstance(result, Rejection):
        assert result.reason in KNOWN, result
        return result.reason
    assert isinstance(result, DecodedMessage)
    return result


@pytest.mark.parametrize("value, reason", [
    (DEEP, "malformed_json"), (HUGE_INT, "malformed_json"), (SURROGATE_ID, "undecodable"),
    (SURROGATE_TEXT, "undecodable"),
])
def test_the_shapes_that_crashed_the_consumer_are_rejected_with_a_reason(value, reason):
    assert decoded_or_reason(MessageDecoder(), value, b"k") == reason


def test_huge_counts_are_invalid_and_a_surrogate_key_is_hashable():
    model = StreamingTopicModel(2, WORDS, anchor_min_df=1)
    model.learn_one(json.loads(HUGE_COUNTS)["counts"])
    assert model.rejections == {"invalid_count": 1} and model.documents_absorbed == 0
    model.learn_one({"w1": 1e9, "w2": 3.0}, key="\ud800")  # the largest count allowed; any str key
    assert model.documents_absorbed == 1


def test_an_integer_too_large_for_a_float_is_a_reason_not_a_crash(tmp_path):
    """A timestamp or a count of 310 digits raised OverflowError through every reader: the
    consumer crash-looped on a 330-byte message, replays stopped (issue 47, item 1)."""
    assert decoded_or_reason(MessageDecoder(), OVERFLOWING_TIME, b"k") == "undecodable"
    archive = tmp_path / "times.jsonl"
    archive.write_bytes(OVERFLOWING_TIME + b'\n{"text": "w1 w2 w3", "timestamp": 5}\n')
    first, second = JsonLinesSource(archive, Fields(time="timestamp"))
    assert isinstance(first, Malformed) and first.reason == "undecodable" and "not a finite time" in first.detail
    assert isinstance(second, Record) and second.timestamp == 5.0
    model = StreamingTopicModel(2, WORDS, anchor_min_df=1)
    model.learn_one({"w1": int(FLOAT_OVERFLOW), "w2": 1})
    assert model.rejections == {"invalid_count": 1} and model.documents_absorbed == 0


def test_fuzzed_messages_never_raise_and_every_rejection_has_a_reason(tmp_path):
    rng = random.Random(15)
    decoder = MessageDecoder(max_bytes=100_000)
    model = StreamingTopicModel(2, WORDS, anchor_min_df=1)
    values = list(fuzz_values(rng, 1500))
    outcomes = {"decoded": 0, "rejected": 0}
    for value in values:
        key = rng.choice([None, b"k", bytes([0xff, 0xfe])])
        result = decoded_or_reason(decoder, value, key)
        if isinstance(result, DecodedMessage):
            outcomes["decoded"] += 1
            model.learn_one(result.document, key=result.key)
        else:
            outcomes["rejected"] += 1
    assert outcomes["decoded"] > 50 and outcomes["rejected"] > 500, outcomes
    assert set(model.rejections) <= set(REJECTION_REASONS)
    # the same values as the lines of a JSON Lines archive: every line a record or a reason
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(v.replace(b"\n", b" ").replace(b"\r", b" ") for v in values) + b"\n")
    items = list(JsonLinesSource(path, Fields(time="timestamp")))
    assert items and all(isinstance(i, Record) or (isinstance(i, Malformed) and i.reason in KNOWN) for i in items)


def test_replay_skips_hostile_lines_counts_them_and_exits_0(tmp_path):
    words = [f"word{a}{b}" for a in "ab" for b in "abcdefghijklmnopq"]  # WORDS are too short for the tokenizer
    good = [json.dumps({"id": i, "text": " ".join(words[(i + j) % 30] for j in range(8))}).encode() for i in range(120)]
    lines = good[:50] + [DEEP, HUGE_INT, SURROGATE_ID, HUGE_COUNTS.replace(b"counts", b"text")] + good[50:]
    archive = tmp_path / "hostile.jsonl"
    archive.write_bytes(b"\n".join(lines) + b"\n")
    result = subprocess.run([sys.executable, "-m", "consumers.cli", "replay", str(archive), "--out", str(tmp_path / "run"),
                             "--n-topics", "3", "--vocabulary-size", "30", "--warmup-documents", "40"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "120 absorbed" in result.stdout, result.stdout
    assert re.search(r"^  malformed +2  malformed_json$", result.stdout, re.M), result.stdout
    assert re.search(r"^  malformed +2  undecodable$", result.stdout, re.M), result.stdout


def plain_envelope_decode(value, key, fields=("text", "tokens", "counts"), id_field="id", timestamp_field="timestamp",
                          max_bytes=100_000):
    """The message envelope rules written out one by one (consumers/messages.py's module
    docstring), the reference the decoder's fast path must agree with: (reason, detail) or
    (document, key, timestamp)."""
    if value is None:
        return (reasons.UNDECODABLE, "no value (tombstone)")
    if len(value) > max_bytes:
        return (reasons.OVERSIZED, f"{len(value)} bytes > {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as error:
        return (reasons.NOT_UTF8, f"invalid UTF-8 at byte {error.start}")
    if not text.lstrip().startswith("{"):
        return (text, key, None)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        return (reasons.MALFORMED_JSON, f"{error.msg} at column {error.colno}")
    except RecursionError:
        return (reasons.MALFORMED_JSON, "nested too deeply")
    except ValueError as error:
        return (reasons.MALFORMED_JSON, str(error).split(";")[0])
    if not isinstance(data, dict):
        return (reasons.UNDECODABLE, f"a JSON {type(data).__name__}, not an object")
    present = [f for f in fields if f in data]
    if not present:
        return (reasons.MISSING_FIELD, f"none of {list(fields)} present")
    field, document = present[0], data[present[0]]
    expected = {fields[0]: str, fields[1]: list, fields[2]: dict}[field]
    if not isinstance(document, expected):
        return (reasons.UNDECODABLE, f"field {field!r} must be {expected.__name__}, got {type(document).__name__}")
    if data.get(id_field) is not None:
        key = data[id_field]
        if type(key) not in (str, int):
            return (reasons.UNDECODABLE, f"id field {id_field!r} must be a string or integer")
    timestamp = None
    if data.get(timestamp_field) is not None:
        try:
            timestamp = parse_time(data[timestamp_field])
        except ValueError as error:
            return (reasons.UNDECODABLE, f"timestamp field {timestamp_field!r}: {error}")
    for name, item in ((id_field, key), (field, document)):
        strings = [item] if isinstance(item, str) else list(item) if isinstance(item, (list, dict)) else []
        for string in strings:
            if isinstance(string, str):
                try:
                    string.encode("utf-8")
                except UnicodeEncodeError as error:
                    return (reasons.UNDECODABLE, f"field {name!r} holds a lone surrogate at character {error.start}")
    return (document, key, timestamp)


def test_the_decoder_agrees_with_the_plain_envelope_rules_on_fuzzed_messages():
    rng = random.Random(17)
    decoder = MessageDecoder(max_bytes=100_000)
    values = list(fuzz_values(rng, 3000)) + [DEEP, HUGE_INT, SURROGATE_ID, SURROGATE_TEXT, None, b"x" * 100_001,
                                              b'{"text": "a", "timestamp": "not a time", "id": "\\ud800"}',
                                              b'{"tokens": ["\\ud800"], "id": [1]}', b'  {"counts": {"\\udc00": 1}}']
    seen = set()
    for value in values:
        key = rng.choice([None, b"k", bytes([0xff, 0xfe])])
        result = decoder.decode(value, key)
        got = ((result.reason, result.detail) if isinstance(result, Rejection)
               else (result.document, result.key, result.timestamp))
        assert got == plain_envelope_decode(value, key), value
        seen.add(result.reason if isinstance(result, Rejection) else "decoded")
    assert seen == {"decoded", "oversized", "not_utf8", "malformed_json", "missing_field", "undecodable"}, seen
