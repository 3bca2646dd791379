"""Replay: scheduled snapshots, byte-identical reruns, exact resume, pacing, malformed input."""

import gzip
import hashlib
import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest

from consumers.records import Source
from consumers.replay import CheckpointError, Replay, model_path, read_checkpoint
from consumers.sources import open_source
from streamtopics import StreamingTopicModel, TopicSnapshot

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
THEMES = [
    "apple pear plum cherry orchard harvest fruit juice".split(),
    "goal match striker keeper league referee stadium penalty".split(),
    "planet orbit rocket comet galaxy telescope asteroid launch".split(),
]


def write_archive(path: Path, n=300, seed=1, step=600) -> Path:
    """n documents, one every ``step`` seconds of stream time, each mostly from one theme."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        theme = rng.choice(THEMES)
        words = [rng.choice(theme) for _ in range(rng.randint(6, 14))] + [rng.choice(rng.choice(THEMES))]
        lines.append(json.dumps({"id": f"doc-{i}", "text": " ".join(words), "time": 1_600_000_000 + step * i}))
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def new_model():
    return StreamingTopicModel(n_topics=3, vocabulary_size=100, warmup_documents=40, batch_size=16)


def replay(archive, out, **options):
    source = open_source(archive, time_field="time")
    return Replay(new_model(), source, out, **options)


def snapshot_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("snapshot-*.json"))}


def test_snapshots_every_n_documents_and_at_the_end(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl", n=250)
    seen = []
    engine = replay(archive, tmp_path / "run", every_documents=100,
                    on_snapshot=lambda snapshot, path: seen.append((snapshot.version, path.name, snapshot.events)))
    summary = engine.run()
    assert [(v, name) for v, name, _ in seen] == [
        (1, "snapshot-000001.json"), (2, "snapshot-000002.json"), (3, "snapshot-000003.json")]
    assert seen[0][2] == []  # the first topics form (the burn-in): no events yet
    assert summary.documents == 250 and summary.absorbed == 250 and not summary.malformed
    last = TopicSnapshot.load(tmp_path / "run" / "snapshot-000003.json")
    assert last.documents_seen == 250 and last.position == {"documents": 250, "archive": 250}
    assert last.stream_time == 1_600_000_000 + 600 * 249
    themes = sorted(sorted(w for w, _ in words[:8]) for words in last.top_words(8).values())
    assert themes == sorted(sorted(t) for t in THEMES)


def test_replaying_twice_gives_byte_identical_snapshots(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl.gz", n=260)
    for run in ("one", "two"):
        replay(archive, tmp_path / run, every_documents=60).run()
    one, two = snapshot_bytes(tmp_path / "one"), snapshot_bytes(tmp_path / "two")
    assert len(one) == 5 and one == two


@pytest.mark.parametrize("stops", [[25], [130], [60, 61, 7]])
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, stops):
    archive = write_archive(tmp_path / "a.jsonl", n=260)
    replay(archive, tmp_path / "straight", every_documents=60, every_seconds=86400).run()
    engine = replay(archive, tmp_path / "resumed", every_documents=60, every_seconds=86400)
    for stop_after in stops:
        summary = engine.run(stop_after=stop_after)
        assert summary.stopped and summary.documents_this_run == stop_after
        engine = Replay.resume(tmp_path / "resumed")
    summary = engine.run()
    assert not summary.stopped and summary.documents == 260
    assert snapshot_bytes(tmp_path / "resumed") == snapshot_bytes(tmp_path / "straight")
    straight = StreamingTopicModel.load(model_path(tmp_path / "straight")).statistics()
    resumed = StreamingTopicModel.load(model_path(tmp_path / "resumed")).statistics()
    assert np.array_equal(straight.packed, resumed.packed) and straight.n_docs == resumed.n_docs
    # one checkpoint per stop and one at the end; only the newest two are kept, each a complete pair
    newest = read_checkpoint(tmp_path / "resumed").sequence
    assert newest == len(stops) + 1
    kept = {f"ckpt-{s:010d}.{kind}" for s in (newest, newest - 1) for kind in ("state", "json")}
    assert {p.name for p in (tmp_path / "resumed" / "checkpoints").glob("*ckpt-*")} == kept


def test_snapshots_every_interval_of_stream_time(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl", n=200, step=900)  # 4 documents an hour
    summary = replay(archive, tmp_path / "run", every_seconds=12 * 3600).run()
    snapshots = [TopicSnapshot.load(p) for p in summary.snapshots]
    times = [1_600_000_000 + 900 * i for i in range(200)]
    first, last = times[0] // 43200 + 1, times[-1] // 43200
    before = [sum(t < b * 43200 for t in times) for b in range(first, last + 1)]
    # a boundary crossed during the 40-document warm-up gives no snapshot; the end gives one
    assert [s.documents_seen for s in snapshots] == [n for n in before if n >= 40] + [200]
    for snapshot in snapshots[:-1]:
        assert snapshot.stream_time == times[snapshot.documents_seen - 1]


def test_paced_replay_follows_timestamps(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl", n=50, step=60)
    now = [0.0]
    engine = replay(archive, tmp_path / "run", speed=30, clock=lambda: now[0],
                    sleep=lambda s: now.__setitem__(0, now[0] + s))
    engine.run()
    assert now[0] == pytest.approx(49 * 60 / 30)


class Costly(Source):
    """``source``, each document costing ``seconds`` on the fake clock ``now`` (work to time)."""

    def __init__(self, source, now: list, seconds: float):
        self.source, self.now, self.seconds = source, now, seconds
        self.spec = source.spec

    @property
    def position(self):
        return self.source.position

    def __iter__(self):
        for item in self.source:
            self.now[0] += self.seconds
            yield item


def test_the_ingest_rate_leaves_out_pacing(tmp_path):
    """Issue 48, item 7: the demo's 2 s pauses after each snapshot (and a --speed replay's waits)
    counted as ingest time: a paced run reported its pace, not its speed. 50 documents of 10 ms
    each are 100 documents/s however long the run waited on purpose."""
    archive = write_archive(tmp_path / "a.jsonl", n=50, step=60)
    for paced in ("speed", "pause"):
        now = [0.0]
        clock, sleep = (lambda: now[0]), (lambda s: now.__setitem__(0, now[0] + s))
        source = Costly(open_source(archive, time_field="time"), now, 0.01)
        if paced == "speed":  # 2 s of wall time between documents
            engine = Replay(new_model(), source, tmp_path / paced, speed=30, clock=clock, sleep=sleep)
        else:  # what the served demo does: a pause after each snapshot (2 here, after the warm-up)
            engine = Replay(new_model(), source, tmp_path / paced, every_documents=10, clock=clock, sleep=sleep,
                            on_snapshot=lambda snapshot, path: engine.pause(2.0))
        summary = engine.run()
        assert summary.ingest_rate == pytest.approx(100), paced
        assert summary.paused_s >= 4 and summary.paused_s == pytest.approx(summary.elapsed_s - 0.5), paced


def test_malformed_records_are_counted_and_the_replay_finishes(tmp_path):
    good = write_archive(tmp_path / "good.jsonl", n=120).read_bytes().splitlines(keepends=True)
    lines = good[:50] + [b'{"text": broken\n', b'{"body": "no text"}\n', b'{"text": "caf\xe9"}\n'] + good[50:]
    packed = gzip.compress(b"".join(lines))
    archive = tmp_path / "bad.jsonl.gz"
    archive.write_bytes(packed[: int(len(packed) * 0.8)])
    reported = []
    summary = Replay(new_model(), open_source(archive), tmp_path / "run", every_documents=50,
                     on_malformed=reported.append).run()
    assert [(m.where.rsplit(":", 1)[1], m.reason) for m in reported[:3]] == [
        ("51", "malformed_json"), ("52", "missing_field"), ("53", "not_utf8")]
    assert reported[-1].reason == "truncated_archive" and reported[-1].where.startswith(str(archive))
    assert summary.malformed == {"malformed_json": 1, "missing_field": 1, "not_utf8": 1, "truncated_archive": 1}
    assert 50 < summary.documents < 120
    assert TopicSnapshot.load(summary.snapshots[-1]).documents_seen == summary.documents


def test_resume_checks_the_checkpoint(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl", n=80)
    other = write_archive(tmp_path / "b.jsonl", n=80, seed=2)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        Replay.resume(tmp_path / "run")
    replay(archive, tmp_path / "run").run(stop_after=30)
    state = read_checkpoint(tmp_path / "run")
    assert state.archive.position == 30 and state.counters["documents"] == 30
    with pytest.raises(CheckpointError, match="holds a replay of"):
        Replay.resume(tmp_path / "run", open_source(other, time_field="time", start=30))
    state.manifest_path.write_text("{}")
    with pytest.raises(CheckpointError, match="bad checkpoint in .*unreadable manifest"):
        Replay.resume(tmp_path / "run")
    assert state.manifest_path.with_name(state.manifest_path.name + ".corrupt").exists()
    with pytest.raises(CheckpointError, match="bad checkpoint in .*only damaged checkpoints"):
        Replay.resume(tmp_path / "run")


def rewrite_manifest(path: Path, change, checksum=True) -> None:
    """Apply ``change`` to the manifest at ``path``; ``checksum``: seal it again as the writer
    would (a schema error must be caught by more than the checksum)."""
    body = json.loads(path.read_text())
    del body["checksum"]
    change(body)
    if checksum:
        body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path.write_text(json.dumps(body))


def damage_state(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["state", "torn state", "manifest", "missing keys", "negative position",
                                    "deeply nested manifest", "position behind the documents"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, damage, caplog):
    archive = write_archive(tmp_path / "a.jsonl", n=200)
    replay(archive, tmp_path / "straight", every_documents=60).run()
    replay(archive, tmp_path / "run", every_documents=60, checkpoint_every=50).run(stop_after=120)
    newest = read_checkpoint(tmp_path / "run")  # checkpoints after 50, 100 and 120 documents: 100 and 120 kept
    assert newest.archive.position == 120
    if damage == "state":
        damage_state(newest.state_path)
    elif damage == "torn state":
        newest.state_path.write_bytes(newest.state_path.read_bytes()[:1000])
    elif damage == "manifest":  # tampered: the checksum no longer matches
        rewrite_manifest(newest.manifest_path, lambda body: body["archive"].update(position=0), checksum=False)
    elif damage == "missing keys":
        rewrite_manifest(newest.manifest_path, lambda body: body.pop("state_bytes"))
    elif damage == "position behind the documents":  # sealed again: only the schema can tell (issue 47, item 7)
        rewrite_manifest(newest.manifest_path, lambda body: body["archive"].update(position=0))
    elif damage == "deeply nested manifest":  # json.loads raised RecursionError (issue 47, item 5)
        newest.manifest_path.write_text('{"archive": ' + "[" * 5000 + "]" * 5000 + "}")
    else:
        rewrite_manifest(newest.manifest_path, lambda body: body["archive"].update(position=-5))
    with caplog.at_level(logging.ERROR, logger="streamtopics.checkpoint"):
        engine = Replay.resume(tmp_path / "run")
    assert f"checkpoint {newest.sequence}" in caplog.text and "damaged" in caplog.text
    assert engine.documents == 100 and engine.source.position == 100
    assert newest.manifest_path.with_name(newest.manifest_path.name + ".corrupt").exists()
    assert engine.run().documents == 200
    assert snapshot_bytes(tmp_path / "run") == snapshot_bytes(tmp_path / "straight")
    straight = StreamingTopicModel.load(model_path(tmp_path / "straight")).statistics()
    resumed = StreamingTopicModel.load(model_path(tmp_path / "run")).statistics()
    assert np.array_equal(straight.packed, resumed.packed) and straight.n_docs == resumed.n_docs


@pytest.mark.parametrize("change, why", [
    (lambda body: body["archive"].pop("position"), "bad archive"),
    (lambda body: body["archive"].update(position=-5), "non-negative"),
    (lambda body: body["archive"].update(position="30"), "non-negative"),
    (lambda body: body["archive"]["source"].pop("path"), "no 'path'"),
    (lambda body: body.update(archive=None), "Kafka offsets"),
    (lambda body: body.update(state_file="../../elsewhere.state"), "bad state_file"),
    (lambda body: body["archive"]["source"].pop("text_fields"), "incomplete source .no text_fields"),
    (lambda body: body["archive"]["source"].update(colour="red"), "bad source"),
    (lambda body: body["counters"].pop("documents"), "missing or invalid documents"),
    (lambda body: body["counters"].update(since_snapshot=-1), "missing or invalid since_snapshot"),
    (lambda body: body["counters"]["schedule"].update(every_documents=0), "missing or invalid schedule"),
])
def test_a_checkpoint_that_cannot_be_resumed_is_refused(tmp_path, change, why):
    """Only checkpoint, sealed with a valid checksum but not what a replay wrote: refused."""
    archive = write_archive(tmp_path / "a.jsonl", n=80)
    replay(archive, tmp_path / "run", every_documents=60).run(stop_after=30)
    rewrite_manifest(read_checkpoint(tmp_path / "run").manifest_path, change)
    with pytest.raises(CheckpointError, match=f"bad checkpoint in .*{why}"):
        Replay.resume(tmp_path / "run")


def test_stop_is_clean_and_resumable(tmp_path):
    archive = write_archive(tmp_path / "a.jsonl", n=100)
    engine = replay(archive, tmp_path / "run", every_documents=50)
    engine.on_snapshot = lambda snapshot, path: engine.stop()
    summary = engine.run()
    assert summary.stopped and summary.documents == 50
    assert Replay.resume(tmp_path / "run").run().documents == 100


def test_real_newsgroups_prefix(tmp_path):
    """The first 500 posts of 20 Newsgroups replayed from the shared gzip archive."""
    archive = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
    model = StreamingTopicModel(n_topics=5, vocabulary_size=1500, warmup_documents=200)
    summary = Replay(model, open_source(archive), tmp_path / "run", every_documents=250).run(stop_after=500)
    assert summary.documents == 500 and summary.absorbed + sum(summary.rejected.values()) == 500
    assert [p.name for p in summary.snapshots] == ["snapshot-000001.json", "snapshot-000002.json"]
    snapshot = TopicSnapshot.load(summary.snapshots[-1])
    assert snapshot.n_topics == 5 and snapshot.documents_seen == summary.absorbed
    assert np.allclose(snapshot.topic_word.sum(axis=0), 1.0)
