"""The Kafka consumer service against a real broker: exact statistics end to end, crash safety
(SIGKILL at random points), broker restart, dead letters, corrupt checkpoints.

Statistics are compared with a StreamingTopicModel fed the same documents in-process. With
several partitions the consumer interleaves them in fetch order, and float sums taken in another
order differ in the last bits, so counts are compared exactly and float sums to rtol 1e-12 (all
terms are positive: ~2,000 of them in another order move a cell by at most ~2e-13 relative).
With one partition the order is the corpus order and the sums are compared bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from consumers.checkpoint import CheckpointStore
from consumers.kafka_consumer import ConsumerConfig, TopicModelConsumer
from consumers.placement import commit_member
from consumers.outputs import DEFAULT_MAX_REQUEST_SIZE, DeadLetterUndelivered, record_bytes
from streamtopics import StreamingTopicModel, TopicSnapshot

sys.path.insert(0, str(Path(__file__).parent))  # kafka_helpers beside this file (importlib mode)
from kafka_helpers import (  # noqa: E402
    KAFKA_CORPUS_DOCS, N_TOPICS, ConsumerProcess, alter_topic, assert_same_statistics, committed_offsets,
    corpus_messages, create_topic, end_offsets, final_model, produce, read_topic, reference_model,
    unique,
)

N_DOCS = KAFKA_CORPUS_DOCS  # the size of the shared `corpus` fixture (conftest.py)


def make_config(broker, topic, tmp_path, vocabulary_file, **settings) -> ConsumerConfig:
    values = dict(bootstrap_servers=broker.bootstrap_servers, topics=[topic], group_id=unique("group"),
                  n_topics=N_TOPICS, vocabulary=str(vocabulary_file), checkpoint_dir=str(tmp_path / "checkpoints"),
                  poll_records=200, refresh_every_documents=0, checkpoint_every_messages=500,
                  stop_when_idle=1.0, flush_timeout_s=20.0, log_every_seconds=0)
    values.update(settings)
    return ConsumerConfig(**values)


def run_consumer(config: ConsumerConfig) -> TopicModelConsumer:
    service = TopicModelConsumer(config)
    service.run()
    return service


def start_in_thread(config: ConsumerConfig, absorbed: int, timeout: float = 60) -> tuple[TopicModelConsumer, threading.Thread]:
    """A consumer running in a thread, once it has absorbed ``absorbed`` documents."""
    service = TopicModelConsumer(config)
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while service.metrics.as_dict()["documents_absorbed"] < absorbed:
        if not thread.is_alive() or time.monotonic() > deadline:
            service.stop()
            raise AssertionError(f"absorbed {service.metrics.as_dict()['documents_absorbed']} of {absorbed}")
        time.sleep(0.05)
    return service, thread


def offsets_of(topic, ends):
    return {(topic, p): o for p, o in ends.items()}


# --------------------------------------------------------------------------- end to end


def test_end_to_end_statistics_equal_in_process(kafka_broker, corpus, reference, vocabulary_file, tmp_path):
    topic = unique("news")
    create_topic(kafka_broker, topic, partitions=4)
    produce(kafka_broker, topic, corpus_messages(corpus))
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, refresh_every_documents=900,
                         snapshot_topic=topic + "-snapshots", snapshot_dir=str(tmp_path / "snapshots"),
                         doc_topics_topic=topic + "-doc-topics", dead_letter_topic=topic + "-dead")

    service = run_consumer(config)

    ends = end_offsets(kafka_broker, topic, 4)
    assert sum(ends.values()) == N_DOCS
    model, offsets = final_model(tmp_path / "checkpoints")
    assert offsets == offsets_of(topic, ends)
    assert_same_statistics(model, reference)
    assert_same_statistics(service.model, reference)
    assert committed_offsets(kafka_broker, config.group_id, topic) == ends  # checkpoint, then commit

    metrics = service.metrics.as_dict()
    assert metrics["documents_absorbed"] == N_DOCS and metrics["rejected"] == {}
    assert metrics["total_lag"] == 0 and metrics["refreshes"] == 2 and metrics["dead_letters"] == 0

    # snapshots: full JSON files, and top words on the output topic keyed by the model name
    files = sorted((tmp_path / "snapshots").glob("snapshot-*.json"))
    assert [TopicSnapshot.load(f).version for f in files] == [1, 2]
    last = TopicSnapshot.load(files[-1])
    assert np.array_equal(last.topic_word, service.model.snapshot.topic_word)
    assert set(last.position) == {topic}
    messages = read_topic(kafka_broker, config.snapshot_topic, expected=2)
    assert [m.key for m in messages] == [b"streamtopics"] * 2
    published = json.loads(messages[-1].value)
    assert published["version"] == 2 and len(published["topics"]) == N_TOPICS
    assert len(published["topics"][0]["top_words"]) == config.snapshot_top_words

    # document topics: one message per document absorbed after the first snapshot, key = doc id
    n_mixtures = metrics["doc_topics_published"]
    assert 0 < n_mixtures < N_DOCS
    mixtures = read_topic(kafka_broker, config.doc_topics_topic, expected=n_mixtures)
    assert len(mixtures) == n_mixtures
    ids = {d["id"] for d in corpus}
    for record in mixtures[:50]:
        value = json.loads(record.value)
        assert record.key.decode() == value["key"] and value["key"] in ids
        assert value["snapshot_version"] in (1, 2)
        assert abs(sum(value["topics"].values()) - 1) < 1e-4


# --------------------------------------------------------------------------- dead letters


def test_bad_messages_go_to_the_dead_letter_topic(kafka_broker, corpus, vocabulary, vocabulary_file, tmp_path):
    topic = unique("mixed")
    create_topic(kafka_broker, topic, partitions=1)
    known = vocabulary.words[0]
    bad = [  # (expected reason, key, value); the last six pass the envelope and fail in the model
        ("oversized", b"b-oversized", json.dumps({"text": "word " * 30_000}).encode()),
        # three shapes that crashed the consumer on every restart (issue 15)
        ("malformed_json", b"b-deep", b'{"text": ' + b"[" * 1500 + b"]" * 1500 + b"}"),
        ("malformed_json", b"b-bigint", b'{"id": ' + b"9" * 5000 + b', "text": "x"}'),
        ("undecodable", b"b-surrogate", b'{"id": "\\ud800", "text": "a lone surrogate as the id"}'),
        ("not_utf8", b"b-latin1", "caf\xe9 cr\xe8me".encode("latin-1")),
        ("malformed_json", b"b-malformed", b'{"id": "m", "text": "unterminated'),
        ("missing_field", b"b-missing", b'{"id": "b-missing", "title": "no text here"}'),
        ("undecodable", b"b-tombstone", None),
        ("undecodable", b"b-wrong-type", b'{"text": 42}'),
        ("empty", b"b-empty", b'{"text": "!!! 123 -- ..."}'),
        ("too_short", b"b-short", json.dumps({"text": known}).encode()),
        ("no_known_words", b"b-unknown", b"zzyzx qwxqwx vvkvvk"),
        ("non_string_token", b"b-token", json.dumps({"tokens": [known, 7]}).encode()),
        ("invalid_count", b"b-count", json.dumps({"counts": {known: -1}}).encode()),
        ("invalid_count", b"b-huge", json.dumps({"counts": {known: 1e200, vocabulary.words[1]: 1e200}}).encode()),
    ]
    expected_bad = {key: reason for reason, key, _ in bad}
    good_docs = [d for d in corpus if len(d["text"]) < 20_000][:60]
    good = corpus_messages(good_docs)
    good += [(b"g-plain", f"plain text about {' '.join(vocabulary.words[10:30])}".encode()),
             (b"g-tokens", json.dumps({"tokens": vocabulary.words[40:60] * 2}).encode()),
             (b"g-counts", json.dumps({"counts": {w: 3 for w in vocabulary.words[60:70]}}).encode())]
    messages = []  # every bad message between two good ones
    for i, (key, value) in enumerate(good):
        messages.append((key, value))
        if i % 3 == 2 and bad:
            messages.append(bad.pop(0)[1:])
    assert not bad
    produce(kafka_broker, topic, messages)
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, max_message_bytes=100_000,
                         dead_letter_topic=topic + "-dead")

    service = run_consumer(config)

    letters = read_topic(kafka_broker, config.dead_letter_topic, expected=len(expected_bad))
    assert len(letters) == len(expected_bad)
    offsets = {key: offset for offset, (key, _) in enumerate(messages)}
    for letter in letters:
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["streamtopics.reason"] == expected_bad[letter.key], headers
        assert headers["streamtopics.topic"] == topic and headers["streamtopics.partition"] == "0"
        assert int(headers["streamtopics.offset"]) == offsets[letter.key]
        original = dict(messages)[letter.key]
        if headers["streamtopics.reason"] == "oversized":
            assert headers["streamtopics.truncated"] == "true" and original.startswith(letter.value)
        else:
            assert letter.value == original

    # the good messages around them are all absorbed, in order: bit-identical sums
    reference = StreamingTopicModel(N_TOPICS, vocabulary)
    for d in good_docs:
        reference.learn_one(d["text"], d["id"])
    reference.learn_one(good[-3][1].decode(), "g-plain")
    reference.learn_one(vocabulary.words[40:60] * 2, "g-tokens")
    reference.learn_one({w: 3 for w in vocabulary.words[60:70]}, "g-counts")
    for document in ("!!! 123 -- ...", known, "zzyzx qwxqwx vvkvvk", [known, 7], {known: -1},
                     {known: 1e200, vocabulary.words[1]: 1e200}):
        reference.learn_one(document)
    assert_same_statistics(service.model, reference, exact=True)
    assert service.model.documents_absorbed == len(good)
    rejected = service.metrics.as_dict()["rejected"]
    assert sum(rejected.values()) == service.metrics.dead_letters == len(expected_bad)
    assert rejected["undecodable"] == 3 and rejected["oversized"] == 1 and rejected["malformed_json"] == 3


def test_large_rejected_messages_all_reach_the_dead_letter_topic(kafka_broker, corpus, vocabulary_file, tmp_path):
    """Issue 15, item 2: messages just under, at and over ``max_message_bytes`` (1 MiB, the
    producer's ``max_request_size`` too), and messages with many headers, are all dead-lettered:
    cut to fit the producer's limit with room for the headers, and the headers say so."""
    topic = unique("large")
    create_topic(kafka_broker, topic, partitions=1, config={"max.message.bytes": str(16 * 1024 * 1024)})
    limit = 1_048_576
    many = [(f"h{i}", b"x" * 1000) for i in range(300)]       # 300 kB of headers
    too_many = [(f"h{i}", b"y" * 1000) for i in range(1100)]  # more headers than fit in a record
    bad = [  # (expected reason, key, value, headers)
        ("malformed_json", b"b-under", b'{"text": "' + b"a" * (limit - 11), []),
        ("not_utf8", b"b-at", b"\xff" * limit, []),
        ("oversized", b"b-over", b"z" * (limit + 1), []),
        ("oversized", b"b-far-over", b"z" * (3 * limit), []),
        ("not_utf8", b"b-headers" + b"k" * 2000, b"\xfe" * (limit - 2000), many),
        ("not_utf8", b"b-too-many-headers", b"\xfe" * 10, too_many),
        ("malformed_json", b"b-under-headers", b'{"text": "' + b"a" * (limit - 200), many[:20]),
    ]
    good = corpus_messages([d for d in corpus if len(d["text"]) < 5000][:len(bad) + 1])
    messages = [good[0]]
    for (_, key, value, headers), g in zip(bad, good[1:]):
        messages += [(key, value, headers), g]
    produce(kafka_broker, topic, messages)
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, dead_letter_topic=topic + "-dead",
                         poll_records=3)
    assert config.max_message_bytes == limit == DEFAULT_MAX_REQUEST_SIZE

    service = run_consumer(config)

    letters = read_topic(kafka_broker, config.dead_letter_topic, expected=len(bad), timeout=90)
    originals = {m[0]: (offset, m) for offset, m in enumerate(messages)}
    assert sorted(letter.key for letter in letters) == sorted(key for _, key, _, _ in bad)
    reasons = {key: reason for reason, key, _, _ in bad}
    for letter in letters:
        offset, (key, value, headers) = originals[letter.key]
        ours = {k[len("streamtopics."):]: v.decode() for k, v in letter.headers if k.startswith("streamtopics.")}
        theirs = [(k, v) for k, v in letter.headers if not k.startswith("streamtopics.")]
        assert ours["reason"] == reasons[letter.key] and int(ours["offset"]) == offset, ours
        assert record_bytes(letter.key, letter.value, letter.headers) <= limit
        assert value.startswith(letter.value)
        if len(letter.value) < len(value):
            assert ours["truncated"] == "true" and int(ours["original_bytes"]) == len(value), ours
        if letter.key == b"b-too-many-headers":
            assert theirs == [] and ours["headers_dropped"] == str(len(too_many))
        else:
            assert theirs == list(headers)
    metrics = service.metrics.as_dict()
    assert metrics["dead_letters"] == len(bad) and metrics["output_errors"] == 0
    assert service.model.documents_absorbed == len(good)
    assert committed_offsets(kafka_broker, config.group_id, topic) == {0: len(messages)}


def test_an_undeliverable_dead_letter_stops_the_consumer_before_its_offset(
        kafka_broker, corpus, vocabulary, vocabulary_file, tmp_path):
    """Issue 15, item 2: a dead letter the broker refuses (the dead-letter topic's
    ``max.message.bytes`` is tiny) is not counted as sent, and neither a checkpoint nor a commit
    passes over its message: the consumer stops with DeadLetterUndelivered. Once the topic is
    fixed, a restart delivers it and goes on with nothing lost or counted twice."""
    topic, dead = unique("undeliverable"), unique("tiny-dead")
    create_topic(kafka_broker, topic, partitions=1)
    create_topic(kafka_broker, dead, partitions=1, config={"max.message.bytes": "200"})
    docs = [d for d in corpus if len(d["text"]) < 5000][:100]
    messages = corpus_messages(docs)
    bad_offset = 50
    messages.insert(bad_offset, (b"b-latin1", "caf\xe9".encode("latin-1")))
    produce(kafka_broker, topic, messages)
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, dead_letter_topic=dead,
                         poll_records=10, checkpoint_every_messages=20)

    service = TopicModelConsumer(config)
    with pytest.raises(DeadLetterUndelivered, match=dead):
        service.run()

    metrics = service.metrics.as_dict()
    assert metrics["dead_letters"] == 0 and metrics["output_errors"] == 1
    assert committed_offsets(kafka_broker, config.group_id, topic).get(0, 0) <= bad_offset
    _, offsets = final_model(tmp_path / "checkpoints")
    assert 0 < offsets[(topic, 0)] <= bad_offset
    assert read_topic(kafka_broker, dead, expected=0, timeout=5) == []

    alter_topic(kafka_broker, dead, {"max.message.bytes": "1048588"})
    service = run_consumer(config)
    letters = read_topic(kafka_broker, dead, expected=1)
    assert [(letter.key, dict(letter.headers)["streamtopics.offset"]) for letter in letters] == [
        (b"b-latin1", str(bad_offset).encode())]
    assert committed_offsets(kafka_broker, config.group_id, topic) == {0: len(messages)}
    model, offsets = final_model(tmp_path / "checkpoints")
    assert offsets == {(topic, 0): len(messages)}
    assert_same_statistics(model, reference_model(docs, vocabulary), exact=True)


def test_a_restarted_consumer_keeps_its_refresh_schedule(kafka_broker, corpus, vocabulary_file, tmp_path):
    """Issue 15, item 4: the schedule counts from the last refresh saved in the state, not from
    the documents absorbed at start-up, so a consumer restarted more often than every N
    documents still refreshes every N (five runs of N/2 documents: two refreshes, as one run)."""
    topic = unique("schedule")
    create_topic(kafka_broker, topic, partitions=1)
    messages = corpus_messages(corpus)
    chunk = len(messages) // 5
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, refresh_every_documents=2 * chunk)
    for start in range(0, 5 * chunk, chunk):
        produce(kafka_broker, topic, messages[start:start + chunk])
        service = run_consumer(config)  # a restart: a new process would do the same
    assert service.model.snapshot is not None and service.model.snapshot.version == 2


# --------------------------------------------------------------------------- crash safety


def test_sigkill_at_random_points_then_restart_is_exact(kafka_broker, corpus, reference, vocabulary_file, tmp_path):
    topic = unique("crash")
    create_topic(kafka_broker, topic, partitions=3)
    produce(kafka_broker, topic, corpus_messages(corpus))
    checkpoints = tmp_path / "checkpoints"
    args = ["--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic,
            "--group-id", unique("group"), "--group-instance-id", "crash-test-member",
            "--n-topics", str(N_TOPICS), "--vocabulary", str(vocabulary_file), "--checkpoint-dir", str(checkpoints),
            "--poll-records", "40", "--checkpoint-every-messages", "120", "--refresh-every-documents", "700",
            "--snapshot-dir", str(tmp_path / "snapshots"), "--stop-when-idle", "1.5", "--log-level", "INFO"]
    log_path = tmp_path / "consumer.log"
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)

    def newest():
        return max((int(p.name[5:15]) for p in checkpoints.glob("ckpt-*.json")), default=0)

    def interrupt(signum):
        """Start the consumer, let it write one more checkpoint, wait a random moment, signal
        it. Returns its exit status, or None when it finished the stream before the signal."""
        before = newest()
        process = ConsumerProcess(args, log_path)
        deadline = time.monotonic() + 60
        while newest() <= before:
            if process.proc.poll() is not None:  # nothing left to read: a clean end, no checkpoint
                assert process.proc.returncode == 0, f"consumer failed (seed {seed}):\n{process.log_tail()}"
                return None
            assert time.monotonic() < deadline, f"no checkpoint in 60 s (seed {seed}):\n{process.log_tail()}"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.5))
        if process.proc.poll() is not None:
            assert process.proc.returncode == 0, f"consumer failed (seed {seed}):\n{process.log_tail()}"
            return None
        return process.kill(signum)

    # The graceful stop comes first, while most of the stream is unread, so it is sure to land
    # mid-stream; later kills may find the stream finished (then the consumer ends cleanly).
    assert interrupt(signal.SIGTERM) == 0  # graceful: finish the batch, checkpoint, commit
    kills = [interrupt(signal.SIGKILL) for _ in range(3)]
    assert set(kills) <= {-signal.SIGKILL, None} and -signal.SIGKILL in kills, kills
    final = ConsumerProcess(args, log_path)
    assert final.wait(timeout=120) == 0, final.log_tail()

    ends = end_offsets(kafka_broker, topic, 3)
    model, offsets = final_model(checkpoints)
    assert offsets == offsets_of(topic, ends), f"seed {seed}"
    assert model.documents_absorbed == N_DOCS, f"seed {seed}"
    assert_same_statistics(model, reference)


# --------------------------------------------------------------------------- broker restart


def test_broker_restart_mid_stream_loses_nothing(kafka_broker, corpus, reference, vocabulary_file, tmp_path):
    topic = unique("restart")
    create_topic(kafka_broker, topic, partitions=2)
    half = N_DOCS // 2
    produce(kafka_broker, topic, corpus_messages(corpus[:half]))
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, stop_when_idle=0.0, poll_records=50,
                         checkpoint_every_messages=300, reconnect_backoff_max_s=2.0)
    service, thread = start_in_thread(config, absorbed=300)
    try:
        kafka_broker.restart()
        produce(kafka_broker, topic, corpus_messages(corpus[half:]))
        deadline = time.monotonic() + 120
        while service.metrics.as_dict()["documents_absorbed"] < N_DOCS:
            assert thread.is_alive() and time.monotonic() < deadline, service.metrics.as_dict()
            time.sleep(0.1)
    finally:
        service.stop()
        thread.join(timeout=120)
    assert not thread.is_alive()

    model, offsets = final_model(tmp_path / "checkpoints")
    assert offsets == offsets_of(topic, end_offsets(kafka_broker, topic, 2))
    assert_same_statistics(model, reference)
    assert service.metrics.checkpoints >= 3


def test_the_offset_commit_is_bounded_while_the_broker_is_down(kafka_broker, corpus, reference, vocabulary_file,
                                                              tmp_path):
    """Issue 15, item 7: with the broker down, the commit after a checkpoint gives up after
    ``commit_timeout_s`` (default 5 s) instead of holding the consumer for ``flush_timeout_s``
    (60 s); the checkpoint is written first, so the next start resumes from it, not from the
    commit that failed."""
    topic = unique("commit")
    create_topic(kafka_broker, topic, partitions=1)
    produce(kafka_broker, topic, corpus_messages(corpus))
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, stop_when_idle=0.0, flush_timeout_s=60.0,
                         checkpoint_every_messages=0, checkpoint_every_wall_seconds=0.0)
    service, thread = start_in_thread(config, absorbed=N_DOCS, timeout=120)
    try:
        kafka_broker.stop()
        t0 = time.monotonic()
        service.stop()  # the final checkpoint and its commit, with no broker to commit to
        thread.join(timeout=120)
        seconds = time.monotonic() - t0
    finally:
        service.stop()
        kafka_broker.start()
    assert not thread.is_alive()
    assert seconds < 25, f"stopping took {seconds:.1f} s with the broker down"
    assert service.metrics.as_dict()["commit_failures"] == 1
    model, offsets = final_model(tmp_path / "checkpoints")
    assert offsets == {(topic, 0): N_DOCS}  # checkpoint first: it holds everything absorbed
    assert committed_offsets(kafka_broker, config.group_id, topic).get(0, 0) < N_DOCS
    again = run_consumer(dataclasses.replace(config, stop_when_idle=1.0))
    assert again.metrics.messages_consumed == 0  # resumes from the checkpoint, not the failed commit
    assert_same_statistics(model, reference, exact=True)


def test_a_broker_outage_bounds_the_output_flush_and_the_shutdown(kafka_broker, corpus, reference, vocabulary_file,
                                                                  tmp_path, caplog):
    """Issue 47, item 4: with document topics and dead letters waiting for a broker that is down,
    the flush before a checkpoint and the idle check give up after seconds (they took 60 s and
    30 s), and stopping takes seconds, not minutes. No checkpoint passes over the outputs that
    were not acknowledged, so the next start, once the broker is back, re-reads their messages
    and sends them again: every mixture and dead letter arrives at least once, no document is
    counted twice."""
    topic = unique("outage")
    create_topic(kafka_broker, topic, partitions=1)
    messages = corpus_messages(corpus)
    for offset in (300, 900, 1500):  # undecodable: dead letters before and after the outage
        messages.insert(offset, (f"bad-{offset}".encode(), "caf\xe9".encode("latin-1")))
    produce(kafka_broker, topic, messages)
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, poll_records=100, stop_when_idle=1.0,
                         refresh_every_documents=500, checkpoint_every_messages=400,
                         doc_topics_topic=topic + "-doc-topics", dead_letter_topic=topic + "-dead")
    config = dataclasses.replace(config, flush_timeout_s=ConsumerConfig.flush_timeout_s)  # the default
    service = TopicModelConsumer(config)
    absorb, held, outage = service._absorb, threading.Event(), threading.Event()

    def absorb_during_the_outage(batch):
        """Hold a batch already fetched until the broker is down: its outputs cannot be delivered."""
        if service.model.documents_absorbed >= 700 and not outage.is_set():
            held.set()
            outage.wait()
        absorb(batch)

    service._absorb = absorb_during_the_outage
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        assert held.wait(timeout=120), service.metrics.as_dict()
        at_outage, held_at = service.metrics.as_dict()["documents_absorbed"], service.positions[(topic, 0)]
        kafka_broker.stop()
        outage.set()
        deadline = time.monotonic() + 30
        while service.metrics.as_dict()["documents_absorbed"] == at_outage:
            assert time.monotonic() < deadline, "the held batch was not absorbed"
            time.sleep(0.05)
        time.sleep(3 * config.stop_when_idle)  # idle: the loop asks for the end offsets it cannot get
        t0 = time.monotonic()
        with caplog.at_level(logging.INFO, logger="streamtopics.consumer"):
            service.stop()
            thread.join(timeout=300)
        seconds = time.monotonic() - t0
    finally:
        outage.set()
        service.stop()
        kafka_broker.start()
    assert not thread.is_alive()
    assert seconds < 20, f"stopping took {seconds:.1f} s with the broker down"
    assert service.metrics.as_dict()["checkpoints_postponed"] >= 1  # the final one at least
    assert "final checkpoint skipped" in caplog.text and "not delivered" in caplog.text
    _, offsets = final_model(tmp_path / "checkpoints")
    assert offsets[(topic, 0)] <= held_at  # no checkpoint passed over the undelivered outputs

    again = run_consumer(dataclasses.replace(config, flush_timeout_s=20.0))
    assert again.metrics.messages_consumed == len(messages) - offsets[(topic, 0)]
    model, offsets = final_model(tmp_path / "checkpoints")
    assert offsets == {(topic, 0): len(messages)}
    assert_same_statistics(model, reference, exact=True)  # nothing counted twice
    bad = {i for i, (key, _) in enumerate(messages) if key.startswith(b"bad-")}
    mixtures = read_topic(kafka_broker, config.doc_topics_topic,
                          expected=end_offsets(kafka_broker, config.doc_topics_topic, 1)[0])
    sources = {json.loads(record.value)["source"]["offset"] for record in mixtures}
    first = min(sources)
    assert first <= 700 and sources == set(range(first, len(messages))) - bad, "a mixture was lost"
    letters = read_topic(kafka_broker, config.dead_letter_topic, expected=len(bad))
    assert {int(dict(letter.headers)["streamtopics.offset"]) for letter in letters} == bad


# --------------------------------------------------------------------------- corrupt checkpoints


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_latest_checkpoint_falls_back_and_reconsumes(kafka_broker, corpus, reference, vocabulary_file,
                                                             tmp_path, caplog, damage):
    topic = unique("corrupt")
    create_topic(kafka_broker, topic, partitions=2)
    first = 1200
    produce(kafka_broker, topic, corpus_messages(corpus[:first]))
    config = make_config(kafka_broker, topic, tmp_path, vocabulary_file, checkpoint_every_messages=0,
                         checkpoint_every_wall_seconds=0.0)  # only the final checkpoint of each run
    run_consumer(config)
    produce(kafka_broker, topic, corpus_messages(corpus[first:]))
    run_consumer(config)
    with CheckpointStore(config.checkpoint_dir) as store:
        latest, previous = store.checkpoints()[:2]
    assert sum(previous.offsets.values()) == first and sum(latest.offsets.values()) == N_DOCS

    data = bytearray(latest.state_path.read_bytes())
    if damage == "flip":  # same size, a few bytes changed inside the co-occurrence sums
        middle = len(data) // 2
        data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    else:  # a torn write
        data = data[: len(data) // 3]
    latest.state_path.write_bytes(bytes(data))

    with caplog.at_level(logging.ERROR, logger="streamtopics.checkpoint"):
        service = run_consumer(config)
    assert [sequence for sequence, _ in service.restored.skipped] == [latest.sequence]
    assert service.restored.checkpoint.sequence == previous.sequence
    assert f"checkpoint {latest.sequence}" in caplog.text and "damaged" in caplog.text
    assert latest.state_path.with_name(latest.state_path.name + ".corrupt").exists()
    assert service.metrics.messages_consumed == N_DOCS - first  # re-read since the previous checkpoint
    model, offsets = final_model(tmp_path / "checkpoints")
    assert sum(offsets.values()) == N_DOCS
    assert_same_statistics(model, reference)


# --------------------------------------------------------------------------- no broker needed


def test_config_file_then_environment_then_arguments(tmp_path):
    path = tmp_path / "consume.toml"
    path.write_text('[consume]\ntopics = ["a", "b"]\nn_topics = 7\ngroup_id = "from-file"\n'
                    'consumer_options = { session_timeout_ms = 6000 }\n')
    environ = {"STREAMTOPICS_N_TOPICS": "9", "STREAMTOPICS_SSL_CHECK_HOSTNAME": "false",
               "STREAMTOPICS_ANCHOR_MIN_DF": "12", "STREAMTOPICS_KAFKA_DIR": "/ignored"}
    config = ConsumerConfig.load(path, environ=environ, group_id="from-flag", seed=None)
    assert config.topics == ["a", "b"] and config.n_topics == 9 and config.group_id == "from-flag"
    assert config.ssl_check_hostname is False and config.anchor_min_df == 12 and config.seed == 0
    assert config.consumer_settings()["session_timeout_ms"] == 6000
    with pytest.raises(ValueError, match="unknown consumer setting"):
        ConsumerConfig.from_dict({"topics": "a", "n_topic": 3})


def test_fetches_wait_at_most_100_ms_for_data_unless_configured():
    """The bound on a fetch's wait (ConsumerConfig.consumer_settings says why), and a
    consumer_options setting still wins over it."""
    assert ConsumerConfig(topics=["a"]).consumer_settings()["fetch_max_wait_ms"] == 100
    configured = ConsumerConfig(topics=["a"], consumer_options={"fetch_max_wait_ms": 500})
    assert configured.consumer_settings()["fetch_max_wait_ms"] == 500


def test_damaged_manifest_is_skipped_and_old_checkpoints_pruned(vocabulary, tmp_path):
    model = StreamingTopicModel(N_TOPICS, vocabulary.words[:50])
    with CheckpointStore(tmp_path, keep=2) as store:
        for i in range(4):
            model.learn_one(" ".join(vocabulary.words[i:i + 10]))
            store.save(model, {("t", 0): i + 1})
        assert [c.sequence for c in store.checkpoints()] == [4, 3]
        manifest = tmp_path / "ckpt-0000000004.json"
        manifest.write_text(manifest.read_text().replace('"documents_absorbed": 4', '"documents_absorbed": 5'))
        restored = store.restore()
        assert restored.checkpoint.sequence == 3 and restored.model.documents_absorbed == 3
        assert restored.skipped[0][0] == 4 and "checksum" in restored.skipped[0][1]
        assert store.save(model, {("t", 0): 4}).sequence == 5  # a set-aside sequence is never reused
        with pytest.raises(RuntimeError, match="in use"):
            CheckpointStore(tmp_path)


def test_a_consumer_without_native_crc32c_says_so(vocabulary_file, tmp_path, caplog, monkeypatch):
    import kafka.record.util

    import consumers.kafka_consumer as kafka_consumer

    # the check names the package that kafka-python itself picks up
    assert kafka_consumer.native_kafka_crc() == (kafka.record.util.crc32c_c is not None)
    config = ConsumerConfig(bootstrap_servers="127.0.0.1:1", topics=["t"], n_topics=N_TOPICS,
                            vocabulary=str(vocabulary_file), checkpoint_dir=str(tmp_path / "checkpoints"))
    for native in (True, False):
        monkeypatch.setattr(kafka_consumer, "native_kafka_crc", lambda: native)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="streamtopics.consumer"):
            TopicModelConsumer(dataclasses.replace(config, checkpoint_dir=str(tmp_path / str(native)))).store.close()
        assert ("crc32c package is missing" in caplog.text) is not native


def test_hostile_commit_metadata_names_no_member():
    """Any member of the group may write a commit's metadata: brackets nested 3,000 deep made
    json.loads raise RecursionError, which stopped every consumer of the group on every start
    (issue 47, item 5). It now names no member, as any other unreadable metadata does."""
    assert commit_member(json.dumps({"member": "news-0"})) == "news-0"
    assert commit_member("[" * 3000 + "]" * 3000) is None
    assert commit_member('{"member": ' + "[" * 3000 + "]" * 3000 + "}") is None
    assert commit_member(None) is None and commit_member("not json") is None
