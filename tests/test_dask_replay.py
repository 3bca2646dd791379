"""Dask replay (issue 18): on a LocalCluster of 2 worker processes, the snapshots of a real corpus
equal those of the sequential replay with the same options -- anchors, topic ids, events and
positions identical, matrices within 1e-9 -- also when a worker is killed mid-run."""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from consumers.cli import main
from consumers.dask_replay import DASK_MISSING, DaskReplay, connect
from consumers.records import SourceError
from consumers.replay import Replay, read_checkpoint
from consumers.sources import open_source
from streamtopics import StreamingTopicModel, TopicSnapshot

REUTERS = Path(__file__).resolve().parents[2] / "shared" / "data" / "reuters21578" / "reuters21578.jsonl.gz"
N_DOCS = 3000
FIELDS = dict(text_fields=["title", "body"], time_field="date", time_format="%d-%b-%Y %H:%M:%S.%f")
DAY = 86400.0


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The first 3,000 Reuters-21578 stories (dated, not in date order) as plain JSON Lines, with
    two malformed lines and a blank one among them."""
    lines = []
    with gzip.open(REUTERS, "rt", encoding="utf-8") as corpus:
        for i, line in enumerate(corpus):
            if i == N_DOCS:
                break
            lines.append(line.rstrip("\n"))
            if i in (700, 1501):
                lines.append("{not json")
            if i == 1200:
                lines.append("")
    path = tmp_path_factory.mktemp("corpus") / "reuters.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def client():
    client = connect("local:2")
    yield client
    client.close()


def new_model(**settings) -> StreamingTopicModel:
    return StreamingTopicModel(6, vocabulary_size=800, warmup_documents=400, seed=3, **settings)


def sequential(archive: Path, out: Path, settings=None, **schedule):
    return Replay(new_model(**settings or {}), open_source(str(archive), **FIELDS), out, **schedule).run()


def assert_same_snapshots(expected_dir: Path, actual_dir: Path) -> int:
    expected = sorted(expected_dir.glob("snapshot-*.json"))
    actual = sorted(actual_dir.glob("snapshot-*.json"))
    assert [p.name for p in actual] == [p.name for p in expected]
    for e_path, a_path in zip(expected, actual):
        e, a = TopicSnapshot.load(e_path), TopicSnapshot.load(a_path)
        assert (a.version, a.documents_seen, a.position, a.stream_time) == \
               (e.version, e.documents_seen, e.position, e.stream_time), a_path.name
        assert a.anchors == e.anchors and a.topic_ids == e.topic_ids and a.vocabulary == e.vocabulary
        assert_same_events(e.events, a.events)
        for name in ("topic_word", "prevalence", "alpha", "background"):
            np.testing.assert_allclose(getattr(a, name), getattr(e, name), rtol=0, atol=1e-9, err_msg=name)
    return len(expected)


def assert_same_events(expected: list[dict], actual: list[dict]) -> None:
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        assert set(a) == set(e)
        for key, value in e.items():
            if isinstance(value, float):
                assert a[key] == pytest.approx(value, rel=0, abs=1e-9), (key, e)
            else:
                assert a[key] == value, (key, e)


def assert_same_final_statistics(expected_dir: Path, actual_dir: Path) -> None:
    """The checkpointed models: counts exact, float sums to rounding (another addition order)."""
    e = StreamingTopicModel.load(read_checkpoint(expected_dir).state_path).statistics()
    a = StreamingTopicModel.load(read_checkpoint(actual_dir).state_path).statistics()
    assert a.n_docs == e.n_docs
    np.testing.assert_array_equal(a.document_frequency, e.document_frequency)
    np.testing.assert_array_equal(a.word_counts, e.word_counts)
    np.testing.assert_allclose(a.packed, e.packed, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("schedule", [
    {"every_documents": 500},
    {"every_documents": 700, "every_seconds": DAY},
], ids=["every-500-documents", "every-700-documents-and-every-day-of-stream-time"])
def test_dask_replay_equals_the_sequential_replay(archive, client, tmp_path, schedule):
    expected = sequential(archive, tmp_path / "sequential", **schedule)
    malformed = []
    progress = []
    replay = DaskReplay(new_model(), open_source(str(archive), **FIELDS), tmp_path / "dask", client, unit_size=450,
                        on_malformed=malformed.append, on_progress=lambda done, total: progress.append((done, total)),
                        **schedule)
    actual = replay.run()
    assert actual.units >= 6 and actual.pieces > actual.units  # units are cut at snapshot positions
    assert assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask") >= 6
    assert (actual.documents, actual.absorbed, actual.malformed, actual.rejected) == \
           (expected.documents, expected.absorbed, expected.malformed, expected.rejected)
    assert actual.malformed == {"malformed_json": 2}
    assert [m.where.rsplit(":", 1)[1] for m in malformed] == ["702", "1505"]  # file:line, in archive order
    assert progress[-1] == (N_DOCS, N_DOCS)
    assert read_checkpoint(tmp_path / "dask").archive == read_checkpoint(tmp_path / "sequential").archive
    assert read_checkpoint(tmp_path / "dask").counters == read_checkpoint(tmp_path / "sequential").counters
    assert_same_final_statistics(tmp_path / "sequential", tmp_path / "dask")


def test_with_the_carried_refinement_too(archive, client, tmp_path):
    """The client refreshes one model window after window, so the refinement's carried state goes
    on from one snapshot to the next as in the sequential replay (and the sums differ only by
    rounding, far below what the challenges between carried and restarted refinements weigh)."""
    carry = {"refine_carry": True, "reservoir_size": 1000}
    sequential(archive, tmp_path / "sequential", carry, every_documents=500)
    DaskReplay(new_model(**carry), open_source(str(archive), **FIELDS), tmp_path / "dask", client, unit_size=450,
               every_documents=500).run()
    assert assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask") >= 5
    carried = StreamingTopicModel.load(read_checkpoint(tmp_path / "dask").state_path).lineage.carried
    assert carried.keys is not None and carried.restarted_at > 0


def test_a_worker_killed_mid_run_costs_only_its_units(archive, client, tmp_path):
    sequential(archive, tmp_path / "sequential", every_documents=500)
    killed = []

    def kill_a_busy_worker(snapshot, path):
        if snapshot.version != 1:
            return
        holding = {address: len(keys) for address, keys in client.has_what().items()}
        victim = max(holding, key=holding.get)
        assert holding[victim] > 0  # it holds partial states of later windows
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        killed.append(victim)

    replay = DaskReplay(new_model(), open_source(str(archive), **FIELDS), tmp_path / "dask", client, unit_size=300,
                        every_documents=500, on_snapshot=kill_a_busy_worker)
    replay.run()
    assert killed and killed[0] not in client.nthreads()  # the nanny started a new worker in its place
    assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask")
    assert_same_final_statistics(tmp_path / "sequential", tmp_path / "dask")


@pytest.mark.parametrize("shape", ["truncated-gzip", "directory"])
def test_other_archive_shapes_split_the_same_way(archive, client, tmp_path, shape):
    """A gzip archive cut short (each unit decompresses from the start; the break is reported once)
    and a directory of one document per file (units are ranges of files)."""
    if shape == "truncated-gzip":
        compressed = gzip.compress(archive.read_bytes(), mtime=0)
        path = tmp_path / "cut.jsonl.gz"
        path.write_bytes(compressed[: len(compressed) * 4 // 5])
        fields = FIELDS
    else:
        path = tmp_path / "stories"
        path.mkdir()
        for i, line in enumerate(archive.read_text(encoding="utf-8").splitlines()[:1500]):
            if line.startswith("{\""):
                row = json.loads(line)
                (path / f"{i:05d}.txt").write_text(f"{row.get('title', '')}\n{row.get('body', '')}", encoding="utf-8")
        fields = {}
    expected = Replay(new_model(), open_source(str(path), **fields), tmp_path / "sequential", every_documents=400).run()
    actual = DaskReplay(new_model(), open_source(str(path), **fields), tmp_path / "dask", client, unit_size=350,
                        every_documents=400).run()
    assert assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask") >= 3
    assert (actual.documents, actual.malformed) == (expected.documents, expected.malformed)
    if shape == "truncated-gzip":
        assert actual.malformed["truncated_archive"] == 1 and actual.units >= 6


def test_the_cli_replays_on_a_local_cluster_and_prints_the_dashboard(archive, tmp_path):
    options = ["--text-field", "title", "--text-field", "body", "--time-field", "date",
               "--time-format", "%d-%b-%Y %H:%M:%S.%f", "--n-topics", "6", "--vocabulary-size", "800",
               "--warmup-documents", "400", "--seed", "3", "--snapshot-every", "1000", "-q"]
    runner = CliRunner()
    plain = runner.invoke(main, ["replay", str(archive), "--out", str(tmp_path / "sequential"), *options])
    assert plain.exit_code == 0, plain.output
    result = runner.invoke(main, ["replay", str(archive), "--out", str(tmp_path / "dask"), "--dask", "local:2",
                                  *options])
    assert result.exit_code == 0, result.output
    assert "Dask: 2 workers (2 threads); dashboard http://" in result.output
    assert "replayed 3,000 documents" in result.output and "malformed_json" in result.output
    assert assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask") == 3


def test_the_cli_refuses_what_the_dask_replay_cannot_split(archive, tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["replay", str(archive), "--dask", "local:2", "--speed", "60", "--time-field", "date",
                                  "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "--dask replays a whole archive with exact sums: drop --speed" in result.output
    uci = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci-kos"
    result = runner.invoke(main, ["replay", str(uci), "--dask", "local:2", "--out", str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "the Dask replay splits jsonl, lines, csv, tsv, dir archives into work units, not uci" in result.output


def test_without_dask_installed_the_error_names_the_extra(archive, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an environment without it raises: ImportError
    with pytest.raises(ImportError, match=r"pip install 'streamtopics\[dask\]'"):
        connect("local:1")
    result = CliRunner().invoke(main, ["replay", str(archive), "--dask", "local:1", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and result.output.strip().endswith(DASK_MISSING)


def test_models_whose_state_depends_on_the_whole_order_are_refused(archive, tmp_path):
    source = open_source(str(archive), **FIELDS)
    with pytest.raises(ValueError, match="half_life"):
        DaskReplay(StreamingTopicModel(6, half_life=1000), source, tmp_path, client=None, every_documents=500)
    with pytest.raises(SourceError, match="not uci"):
        DaskReplay(new_model(), open_source(str(REUTERS.parents[1] / "uci-kos")), tmp_path, client=None)


def test_dask_replay_clamps_future_dated_documents_as_the_sequential_replay(archive, client, tmp_path):
    """Documents dated years ahead (issue 47, item 3) move the stream clock by at most the model's
    ``max_time_skew`` each: the plan runs the same clock over the scanned times, so the snapshot
    grid, the stream times and the count of clamped times equal the sequential replay's."""
    lines = archive.read_text(encoding="utf-8").splitlines()
    for i in (900, 1800, 1801, 2500):
        row = json.loads(lines[i])
        row["date"] = "26-FEB-1991 15:01:01.79"
        lines[i] = json.dumps(row)
    dated = tmp_path / "future-dated.jsonl"
    dated.write_text("\n".join(lines) + "\n", encoding="utf-8")
    schedule = {"every_documents": 700, "every_seconds": DAY}
    expected = sequential(dated, tmp_path / "sequential", **schedule)
    actual = DaskReplay(new_model(), open_source(str(dated), **FIELDS), tmp_path / "dask", client, unit_size=450,
                        **schedule).run()
    assert actual.times_clamped == expected.times_clamped == 4
    assert assert_same_snapshots(tmp_path / "sequential", tmp_path / "dask") >= 6
    assert read_checkpoint(tmp_path / "dask").counters == read_checkpoint(tmp_path / "sequential").counters
    assert read_checkpoint(tmp_path / "dask").counters["stream_time"] < 560_000_000  # 1987-09, not 1991
