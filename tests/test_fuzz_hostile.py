"""A fuzzer of hostile input (issue 47): 100,000 generated messages through the Kafka message
decoder, the archive readers and the model API. Whatever a record carries (huge and tiny numbers,
deep nesting, lone surrogates, huge strings, wrong types, missing fields, in the id, text, tokens,
counts, timestamp, key, headers and the record's own timestamp), no exception escapes, every message is either absorbed or rejected
(absorbed + rejected = produced) and every rejection has a known reason.

The generator is a seeded ``random.Random`` (not hypothesis): 100,000 cases run in well under a
minute, and a failure names its seed and index, which regenerate the message exactly.
"""

from __future__ import annotations

import csv
import json
import random
from typing import NamedTuple

import pytest

from consumers import reasons
from consumers.messages import MessageDecoder
from consumers.sources import Malformed, Record, open_source
from consumers.stream import StreamDriver
from streamtopics import StreamingTopicModel
from streamtopics.text.rejection import REJECTION_REASONS, Rejection

pytestmark = pytest.mark.slow

WORDS = [f"{a}{b}word" for a in "abcdefgh" for b in "abcdefgh"]
KNOWN_REASONS = set(reasons.MESSAGES) | set(REJECTION_REASONS)
MESSAGES = 100_000


def hostile_number(rng: random.Random) -> str:
    """A JSON number (or a non-JSON one) a parser or ``float()`` may choke on."""
    return rng.choice([
        lambda: "1" + "0" * rng.choice([309, 400, 4_299, 4_301, 20_000]),  # overflows float, int() guards
        lambda: "-" + "9" * rng.randint(1, 400),
        lambda: rng.choice(["1e308", "1e309", "-1e400", "1e-400", "5e-324", "0", "-0", "0.0"]),
        lambda: rng.choice(["NaN", "Infinity", "-Infinity", "nan", "1.7976931348623157e308"]),
        lambda: str(rng.uniform(-1e12, 1e12)),
        lambda: str(rng.randint(-2**70, 2**70)),
        lambda: rng.choice(["1_000", "0x10", "01", "1.", ".5", "+1", "--1"]),  # not JSON
    ])()


def hostile_string(rng: random.Random) -> str:
    """A JSON string literal: lone surrogates, controls, huge, empty or ordinary text."""
    return rng.choice([
        lambda: json.dumps(" ".join(rng.choices(WORDS, k=rng.randint(0, 30)))),
        lambda: '"' + rng.choice(["\\ud800", "\\udfff", "\\ud800\\u0041", "\\udbff\\udbff"]) + ' aaword"',
        lambda: json.dumps("".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(0, 40)))),
        lambda: json.dumps("x" * rng.choice([0, 1, 70_000, 2_000_000])),
        lambda: '"' + "\\u0000" * rng.randint(1, 5) + '"',
        lambda: '"unterminated',
        lambda: json.dumps("2024-02-30T25:61:00Z") if rng.random() < 0.5 else json.dumps("9999-12-31T23:59:59Z"),
    ])()


def hostile_value(rng: random.Random, depth: int = 0) -> str:
    """Any JSON value (or almost-JSON text), nested up to a little, or very deep at random."""
    kind = rng.randrange(8)
    if kind == 0:
        return hostile_number(rng)
    if kind == 1:
        return hostile_string(rng)
    if kind == 2:
        return rng.choice(["true", "false", "null", "[]", "{}"])
    if kind == 3:
        deep = rng.choice([10, 1_000, 5_000, 100_000])
        opener = rng.choice(["[", '{"a":'])
        closer = "]" if opener == "[" else "}"
        return opener * deep + "1" + closer * (deep if rng.random() < 0.9 else deep - 1)
    if kind in (4, 5) and depth < 3:
        items = [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return "[" + ",".join(items) + "]"
    if kind == 6 and depth < 3:
        pairs = [f"{hostile_string(rng) if rng.random() < 0.3 else json.dumps(rng.choice(WORDS))}:"
                 f"{hostile_value(rng, depth + 1)}" for _ in range(rng.randint(0, 4))]
        return "{" + ",".join(pairs) + "}"
    return json.dumps(rng.choice(WORDS))


def good_counts(rng: random.Random) -> str:
    return json.dumps({w: rng.randint(1, 3) for w in rng.sample(WORDS, rng.randint(2, 8))})


def hostile_message(rng: random.Random) -> str:
    """A JSON object (or not quite) whose fields are each sometimes missing, sometimes hostile."""
    if rng.random() < 0.05:  # not an object at all
        return rng.choice([hostile_value(rng), " ".join(rng.choices(WORDS, k=rng.randint(0, 12)))])
    fields = {}
    document = rng.choice(["text", "tokens", "counts", None])
    if document == "text":
        fields["text"] = (json.dumps(" ".join(rng.choices(WORDS, k=rng.randint(2, 15)))) if rng.random() < 0.5
                          else hostile_value(rng))
    elif document == "tokens":
        fields["tokens"] = (json.dumps(rng.choices(WORDS, k=rng.randint(2, 10))) if rng.random() < 0.5
                            else "[" + ",".join(hostile_value(rng) for _ in range(rng.randint(0, 5))) + "]")
    elif document == "counts":
        fields["counts"] = (good_counts(rng) if rng.random() < 0.4 else
                            "{" + ",".join(f"{json.dumps(rng.choice(WORDS))}:{hostile_value(rng)}"
                                           for _ in range(rng.randint(0, 5))) + "}")
    for name in ("id", "timestamp"):
        if rng.random() < 0.5:
            fields[name] = hostile_value(rng) if rng.random() < 0.7 else json.dumps(rng.randint(0, 2**31))
    if rng.random() < 0.1:  # the same field twice: the last one wins in Python's json
        fields["text "] = hostile_value(rng)
    body = ",".join(f'"{name.strip()}":{value}' for name, value in fields.items())
    return "{" + body + ("}" if rng.random() < 0.97 else "")


def hostile_key(rng: random.Random) -> bytes | None:
    return rng.choice([None, b"", b"k1", bytes(rng.randrange(256) for _ in range(rng.randint(1, 20))),
                       b"\xff" * 10_000])


class KafkaRecord(NamedTuple):
    """What the consumer hands the decoder: kafka-python's record fields that it reads or carries."""
    value: bytes | None
    key: bytes | None
    timestamp: int  # milliseconds
    headers: list


def hostile_record(rng: random.Random, value: bytes) -> KafkaRecord:
    timestamp = rng.choice([-1, 0, 1_600_000_000_000, 7_258_118_400_000, 10**18, 2**63 - 1, 1_600_000_000])
    headers = [(rng.choice(["", "streamtopics.reason", "x" * 1000, "\ud800"]), rng.randbytes(rng.randint(0, 64)))
               for _ in range(rng.randint(0, 3))]
    return KafkaRecord(value, hostile_key(rng), timestamp, headers)


def check_reason(reason: str) -> None:
    assert isinstance(reason, str) and reason in KNOWN_REASONS, reason


def test_kafka_messages_through_the_decoder_and_the_model():
    rng = random.Random(47)
    rejected_by_model = []
    model = StreamingTopicModel(3, vocabulary=WORDS, on_reject=lambda r, d, k: rejected_by_model.append(r))
    driver = StreamDriver(model, None)
    decoder = MessageDecoder(max_bytes=1_048_576)
    enveloped = 0
    for index in range(MESSAGES):
        text = hostile_message(rng)
        value = text.encode("utf-8", "surrogatepass") if rng.random() < 0.98 else rng.randbytes(rng.randint(0, 50))
        try:
            decoded = decoder.decode_record(hostile_record(rng, value))
            if isinstance(decoded, Rejection):
                check_reason(decoded.reason)
                enveloped += 1
            else:
                driver.queue(decoded.document, decoded.key, decoded.timestamp)
        except Exception as error:  # noqa: BLE001 - the fuzzer's verdict names the message
            pytest.fail(f"message {index} (seed 47) raised {type(error).__name__}: {error}: {text[:300]!r}")
    driver.absorb()
    for rejection in rejected_by_model:
        check_reason(rejection.reason)
    assert model.documents_absorbed + len(rejected_by_model) + enveloped == MESSAGES
    assert model.documents_absorbed > 1_000 and enveloped > 10_000 and len(rejected_by_model) > 1_000


@pytest.mark.parametrize("suffix", [".jsonl", ".txt", ".csv"])
def test_archive_lines_through_the_readers_and_the_model(tmp_path, suffix):
    rng = random.Random(470)
    lines = MESSAGES // 10
    path = tmp_path / f"hostile{suffix}"
    with open(path, "w", encoding="utf-8", errors="surrogatepass", newline="") as out:
        rows = csv.writer(out, lineterminator="\n")  # well-formed rows of hostile fields (bad CSV: test_untrusted_input)
        if suffix == ".csv":
            rows.writerow(["id", "text", "timestamp"])
        for _ in range(lines):
            line = hostile_message(rng).replace("\n", " ").replace("\r", " ")
            line = line if line.strip() else "x"
            if suffix == ".csv":
                rows.writerow([hostile_value(rng)[:200], line, hostile_number(rng)[:200]])
            else:
                out.write(line + "\n")
    rejected_by_model = []
    model = StreamingTopicModel(3, vocabulary=WORDS, on_reject=lambda r, d, k: rejected_by_model.append(r))
    driver = StreamDriver(model, None)
    malformed = records = 0
    for item in open_source(str(path), time_field="timestamp"):
        if isinstance(item, Malformed):
            check_reason(item.reason)
            malformed += 1
        else:
            assert isinstance(item, Record)
            records += 1
            driver.queue(item.document, item.key, item.timestamp)
    driver.absorb()
    for rejection in rejected_by_model:
        check_reason(rejection.reason)
    assert records + malformed == lines
    assert model.documents_absorbed + len(rejected_by_model) == records
    assert model.documents_absorbed > 0


def hostile_document(rng: random.Random):
    """What a Python caller may hand ``learn_many`` as one document."""
    return rng.choice([
        lambda: " ".join(rng.choices(WORDS, k=rng.randint(0, 12))),
        lambda: rng.randbytes(rng.randint(0, 30)),
        lambda: " ".join(rng.choices(WORDS, k=5)).encode("utf-8"),
        lambda: rng.choices(WORDS, k=rng.randint(0, 6)) + rng.choice([[], [None], [3], [b"x"], [["n"]], ["\ud800"]]),
        lambda: {rng.choice(WORDS): rng.choice([1, 2.5, -1, 0, float("nan"), float("inf"), 1e308, 10**400, "3",
                                                None, True]) for _ in range(rng.randint(0, 5))},
        lambda: {rng.choice([1, None, b"x", "\ud800", ""]): 1, rng.choice(WORDS): 2},
        lambda: rng.choice([None, 3, 2.5, object(), [1, 2], {"a": {"b": 1}}, "\ud800\udc00 aaword", "x" * 300_000]),
    ])()


def test_python_documents_through_learn_many():
    rng = random.Random(4700)
    rejected = []
    model = StreamingTopicModel(3, vocabulary=WORDS, on_reject=lambda r, d, k: rejected.append(r))
    produced = 0
    for _ in range(20):
        batch = [hostile_document(rng) for _ in range(1_000)]
        model.learn_many(batch, stream_times=[rng.choice([None, 1e9, -1e300, float("nan"), 1e300])
                                             for _ in batch])
        produced += len(batch)
    for rejection in rejected:
        check_reason(rejection.reason)
    assert model.documents_absorbed + len(rejected) == produced
    assert model.documents_absorbed > 1_000
