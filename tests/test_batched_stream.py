"""The replay and the Kafka consumer queue their documents in the stream driver and learn them in
batches (``StreamDriver.queue``/``absorb``: one ``learn_many`` each). Everything must end where
learning one document at a time ends: statistics to the bit, rejections and dead letters per
document and in order, snapshots at the same documents and stream times, checkpoints at the same
positions, pacing and stops as before. The references here learn one document at a time."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from consumers.kafka_consumer import ConsumerConfig, TopicModelConsumer
from consumers.replay import Replay, checkpoint_dir
from consumers.sources import open_source
from consumers.stream import StreamDriver
from streamtopics import Rejection, StreamingTopicModel, TopicSnapshot

sys.path.insert(0, str(Path(__file__).parent))  # kafka_helpers beside this file (importlib mode)
from kafka_helpers import assert_same_statistics, corpus_messages, create_topic, produce, read_topic, unique  # noqa: E402

THEMES = [
    "apple pear plum cherry orchard harvest fruit juice".split(),
    "goal match striker keeper league referee stadium penalty".split(),
    "planet orbit rocket comet galaxy telescope asteroid launch".split(),
]
ODD = ["!!! 123 --", "apple", "zzyzx qwxqwx vvkvv", "naïve café apple pear plum orchard", "",
       "x", "Goal MATCH goal, striker!"]  # rejected (empty, too short, unknown), non-ASCII, shared objects
START = 1_600_000_000


def archive_lines(n: int, seed: int = 3) -> list[str]:
    """n documents every 600 s of stream time (now and then one dated earlier), every seventh an
    odd one (rejected, non-ASCII, ...), every 97th line malformed."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        theme = rng.choice(THEMES)
        text = ODD[(i // 7) % len(ODD)] if i % 7 == 6 else " ".join(
            [rng.choice(theme) for _ in range(rng.randint(4, 12))] + [rng.choice(rng.choice(THEMES))])
        time = START + 600 * i - (5_000 if i % 11 == 10 else 0)
        lines.append(json.dumps({"id": f"doc-{i}", "text": text, "time": time}))
        if i % 97 == 96:
            lines.append('{"text": broken')
    return lines


def new_model(on_reject) -> StreamingTopicModel:
    return StreamingTopicModel(n_topics=3, vocabulary_size=100, warmup_documents=40, batch_size=16,
                               half_life=20 * 3600.0, half_life_unit="stream", reservoir_size=200, on_reject=on_reject)


def rejections_into(events: list):
    """An ``on_reject`` that notes each rejection in ``events``."""
    def on_reject(rejection, document, key):
        events.append(("reject", rejection.reason, key, document if isinstance(document, str) else None))
    return on_reject


def run_replay(archive: Path, out: Path, stops=(), **options) -> tuple[list, StreamingTopicModel]:
    """Replay ``archive`` into ``out``, stopped after each of ``stops`` documents and resumed.
    Returns every callback in order (rejections, malformed records, snapshots, progress, sleeps;
    a stop's own summary and last progress call left out) and the model."""
    events: list = []
    now = [0.0]

    def sleep(seconds):
        events.append(("sleep", replay.model.documents_absorbed + replay.model.documents_rejected, now[0]))
        now[0] += seconds

    def progress(r):
        events.append(("progress", r.documents, r.model.documents_absorbed, r.model.documents_rejected, r.stream_time))

    callbacks = dict(
        on_snapshot=lambda s, path: events.append(("snapshot", s.version, s.documents_seen, s.position,
                                                   s.stream_time, path.read_bytes())),
        on_malformed=lambda item: events.append(("malformed", item.reason, item.where)),
        clock=lambda: now[0], sleep=sleep, keep_checkpoints=100)
    replay = Replay(new_model(rejections_into(events)), open_source(archive, time_field="time"), out,
                    **options, **callbacks)
    for stop_after in stops:
        summary = replay.run(stop_after=stop_after, on_progress=progress)
        assert summary.stopped and events.pop()[0] == "progress"
        replay = Replay.resume(out, **callbacks)
        replay.model.ingest.on_reject = rejections_into(events)
    summary = replay.run(on_progress=progress)
    events.append(("end", summary.documents, summary.absorbed, dict(summary.rejected), dict(summary.malformed)))
    return events, replay.model


def checkpoints(out: Path) -> list:
    """Every checkpoint kept: sequence, archive position and the replay's counters."""
    manifests = sorted(checkpoint_dir(out).glob("ckpt-*.json"))
    return [(m.name, (b := json.loads(m.read_text()))["archive"], b["counters"]) for m in manifests]


EVENTS = dict(every_documents=50, every_seconds=12 * 3600, checkpoint_every=70)  # the first: mid warm-up


@pytest.mark.parametrize("schedule, stops", [
    (EVENTS, ()), (EVENTS, (130, 333)),  # snapshots by documents and stream time, checkpoints
    ({}, ()), ({}, (600,)),  # no event: the queue fills (one compiled pass) and is learned
    (dict(every_documents=100, speed=600.0), ()),  # paced: no document learned before its time
], ids=["events", "events, stopped and resumed", "full queues", "full queues, stopped and resumed", "paced"])
@pytest.mark.slow
def test_a_batched_replay_is_the_replay_one_document_at_a_time(tmp_path, monkeypatch, schedule, stops):
    archive = tmp_path / "a.jsonl"
    archive.write_text("\n".join(archive_lines(1300)) + "\n")
    batched, model = run_replay(archive, tmp_path / "batched", stops, **schedule)
    with monkeypatch.context() as one_at_a_time:  # the driver as it was: learn_one per document
        one_at_a_time.setattr(StreamDriver, "queue", StreamDriver.learn)
        reference, reference_model = run_replay(archive, tmp_path / "reference", stops, **schedule)
    # the same callbacks in the same order, snapshot files byte for byte
    assert batched == reference
    assert sum(e[0] == "snapshot" for e in reference) >= (3 if schedule else 1)
    assert sum(e[0] == "reject" for e in reference) > 100 and any(e[0] == "malformed" for e in reference)
    if "speed" in schedule:
        assert sum(e[0] == "sleep" for e in reference) > 100
    assert checkpoints(tmp_path / "batched") == checkpoints(tmp_path / "reference")
    assert_same_statistics(model, reference_model, exact=True)


def test_a_batched_replay_learns_what_learn_one_learns(tmp_path):
    """Against the model itself: every record's document, key and time through learn_one."""
    lines = archive_lines(700)
    archive = tmp_path / "a.jsonl"
    archive.write_text("\n".join(lines) + "\n")
    batched_events, model = run_replay(archive, tmp_path / "run")
    events: list = []
    reference = new_model(rejections_into(events))
    for line in lines:
        if "broken" not in line:
            record = json.loads(line)
            reference.learn_one(record["text"], record["id"], stream_time=record["time"])
    assert [e for e in batched_events if e[0] == "reject"] == events
    reference.refresh()  # as the replay's final snapshot (it rescales the forgetting sums)
    assert_same_statistics(model, reference, exact=True)
    assert model.ingest.stream_time == reference.ingest.stream_time == START + 600 * 699


# --------------------------------------------------------------------------- Kafka


def kafka_messages(corpus: list[dict], vocabulary) -> list[tuple[bytes, bytes]]:
    """Posts with a time each (now and then an earlier one), envelope rejections and documents
    the model rejects among them, and documents sharing one object (CPython's '' and 'x')."""
    rng = random.Random(5)
    known = vocabulary.words[0]
    odd = [json.dumps({"text": t}).encode() for t in ("!!! 123 --", known, "", "x",
                                                      "naïve café " + " ".join(vocabulary.words[5:15]))]
    odd += [b'{"text": broken', b'{"title": "no text"}', "caf\xe9".encode("latin-1"), b"plain text " + known.encode()]
    odd.append(None)  # words seen nowhere else: no known word
    messages = []
    for i, (key, value) in enumerate(corpus_messages(corpus)):
        body = json.loads(value)
        body["timestamp"] = START + 60 * i - (3_000 if i % 13 == 12 else 0)
        messages.append((key, json.dumps(body).encode()))
        if i % 5 == 4:
            value = odd[(i // 5) % len(odd)] or " ".join(
                "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(9)) for _ in range(4)).encode()
            messages.append((f"odd-{i}".encode(), value))
    return messages


def test_the_consumer_batches_a_poll_with_the_statistics_and_dead_letters_of_one_at_a_time(
        kafka_broker, corpus, vocabulary, tmp_path):
    """One partition, warm-up inside the stream, forgetting by stream time, polls larger than
    one compiled pass, refreshes between polls: statistics bit-identical to learn_one in offset
    order (refreshed after the same documents), every rejection a dead letter in offset order
    (warm-up documents rejected at the freeze where the reference rejects them), mixtures for
    the absorbed messages only."""
    topic = unique("batched")
    create_topic(kafka_broker, topic, partitions=1)
    create_topic(kafka_broker, topic + "-dead", partitions=1)
    docs = corpus[:1200]
    messages = kafka_messages(docs, vocabulary)
    # the records' own timestamps follow the stream's clock, so that a message without a time field
    # (the odd ones) is dated where it stands, not years after the documents (max_time_skew clamps that)
    stamps, latest = [], START
    for _, value in messages:
        try:
            latest = json.loads(value)["timestamp"]
        except (TypeError, ValueError, KeyError):
            pass
        stamps.append(int(latest * 1000))
    produce(kafka_broker, topic, messages, timestamps_ms=stamps)
    config = ConsumerConfig(
        bootstrap_servers=kafka_broker.bootstrap_servers, topics=[topic], group_id=unique("group"), n_topics=10,
        vocabulary_size=2000, warmup_documents=300, model_options={"half_life": 3600.0, "half_life_unit": "stream"},
        checkpoint_dir=str(tmp_path / "checkpoints"), poll_records=700, refresh_every_documents=400,
        checkpoint_every_messages=700, stop_when_idle=1.0, flush_timeout_s=20.0, log_every_seconds=0,
        dead_letter_topic=topic + "-dead", doc_topics_topic=topic + "-doc-topics", snapshot_dir=str(tmp_path / "snap"),
        consumer_options={"fetch_max_bytes": 64 * 1024 * 1024, "max_partition_fetch_bytes": 64 * 1024 * 1024})
    service = TopicModelConsumer(config)
    service.run()

    rejected: list = []  # (reason, offset; None for a warm-up document rejected at the freeze), in order
    current: dict = {}
    reference = config.new_model(on_reject=lambda rejection, document, key: rejected.append(
        (rejection.reason, current["offset"] if document is current["document"] else None)))
    decoder = config.message_decoder()
    # a refresh settles the forgetting sums: the reference refreshes after the same documents
    refreshed_at = {TopicSnapshot.load(f).documents_seen for f in (tmp_path / "snap").glob("snapshot-*.json")}
    assert refreshed_at
    for record in read_topic(kafka_broker, topic, expected=len(messages)):
        decoded = decoder.decode(record.value, record.key)
        if isinstance(decoded, Rejection):
            rejected.append((decoded.reason, record.offset))
            continue
        current.update(offset=record.offset, document=decoded.document)
        time = decoded.timestamp if decoded.timestamp is not None else record.timestamp / 1000
        reference.learn_one(decoded.document, decoded.key, stream_time=time)
        if reference.documents_absorbed in refreshed_at:
            refreshed_at.remove(reference.documents_absorbed)
            reference.refresh()
    assert_same_statistics(service.model, reference, exact=True)
    assert service.model.ingest.stream_time == reference.ingest.stream_time

    letters = read_topic(kafka_broker, config.dead_letter_topic, expected=len(rejected))
    got = []
    for letter in letters:
        headers = {k: v.decode() for k, v in letter.headers}
        origin = int(headers["streamtopics.offset"]) if "streamtopics.offset" in headers else None
        got.append((headers["streamtopics.reason"], origin))
    assert got == rejected and len(got) > 150
    assert None in {where for _, where in got} and {"empty", "too_short", "no_known_words"} <= {r for r, _ in got}
    metrics = service.metrics.as_dict()
    assert metrics["dead_letters"] == len(got)

    # mixtures only for the messages the model took, none for a rejected one
    mixtures = read_topic(kafka_broker, config.doc_topics_topic, expected=metrics["doc_topics_published"])
    published = {json.loads(m.value)["source"]["offset"] for m in mixtures}
    assert published and not published & {where for _, where in got}
