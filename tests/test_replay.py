"""Replay: scheduled snapshots, byte-identical reruns, exact resume, pacing, malformed input."""

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

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
    assert {e["type"] for e in seen[0][2]} == {"birth"} and len(seen[0][2]) == 3
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
    assert len(list((tmp_path / "resumed").glob("checkpoint-*.npz"))) == 1


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
    assert state["position"] == 30 and state["documents"] == 30
    with pytest.raises(CheckpointError, match="holds a replay of"):
        Replay.resume(tmp_path / "run", open_source(other, time_field="time", start=30))
    (tmp_path / "run" / "checkpoint.json").write_text("{}")
    with pytest.raises(CheckpointError, match="not a replay checkpoint"):
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
