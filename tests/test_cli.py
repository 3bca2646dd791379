"""The `streamtopics` command line through its real entry point: output and exit codes."""

import gzip
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from consumers.replay import model_path
from consumers.sources import open_source
from consumers.times import parse_time
from streamtopics import StreamingTopicModel

THEMES = [
    "apple pear plum cherry orchard harvest fruit juice".split(),
    "goal match striker keeper league referee stadium penalty".split(),
    "planet orbit rocket comet galaxy telescope asteroid launch".split(),
]
SMALL = ["--n-topics", "3", "--vocabulary-size", "100", "--warmup-documents", "40"]


def cli(*args, stdin=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "consumers.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def write_archive(path: Path, n=200, seed=3) -> Path:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        theme = rng.choice(THEMES)
        text = " ".join(rng.choice(theme) for _ in range(rng.randint(6, 14)))
        rows.append(json.dumps({"id": i, "text": text, "time": f"2024-03-01T00:{i // 60:02d}:{i % 60:02d}Z"}))
    path.write_text("\n".join(rows) + "\n")
    return path


def replayed(tmp_path_factory, name: str, *options):
    """``streamtopics replay`` of the test archive into a new folder's run/: (run dir, result)."""
    tmp = tmp_path_factory.mktemp(name)
    archive = write_archive(tmp / "news.jsonl")
    result = cli("replay", archive, "--out", tmp / "run", *options, *SMALL)
    assert result.returncode == 0, result.stderr
    return tmp / "run", result


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One replay shared by the read-only commands."""
    return replayed(tmp_path_factory, "cli", "--snapshot-every", "80", "--burn-in", "0")


def test_replay_prints_snapshots_events_and_summary(run_dir):
    out, result = run_dir
    assert "snapshot 1 | 80 documents | 3 births, 0 deaths, 0 changes" in result.stdout
    assert "snapshot 3 | 200 documents" in result.stdout
    assert "replayed 200 documents from news.jsonl: 200 absorbed, 0 rejected, 0 malformed" in result.stdout
    assert sorted(p.name for p in out.glob("snapshot-*.json")) == [f"snapshot-00000{i}.json" for i in (1, 2, 3)]
    assert sorted(p.name for p in (out / "checkpoints").glob("ckpt-*")) == ["ckpt-0000000001.json",
                                                                         "ckpt-0000000001.state"]
    assert "\r" not in result.stdout + result.stderr  # no progress bar when stdout is not a terminal


def test_replay_stop_resume_and_force(tmp_path):
    archive = write_archive(tmp_path / "news.jsonl")
    straight = cli("replay", archive, "--out", tmp_path / "a", "--snapshot-every", "50", *SMALL)
    assert straight.returncode == 0, straight.stderr
    stopped = cli("replay", archive, "--out", tmp_path / "b", "--snapshot-every", "50", "--stop-after", "70", *SMALL)
    assert stopped.returncode == 0 and "continue with: streamtopics replay --resume" in stopped.stdout
    resumed = cli("replay", "--resume", "--out", tmp_path / "b")
    assert resumed.returncode == 0, resumed.stderr
    assert "replayed 200 documents" in resumed.stdout
    files = sorted(p.name for p in (tmp_path / "a").glob("snapshot-*.json"))
    assert files == sorted(p.name for p in (tmp_path / "b").glob("snapshot-*.json")) and len(files) == 4
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    forced = cli("replay", archive, "--out", tmp_path / "a", "--force", "--snapshot-every", "1000", *SMALL)
    assert forced.returncode == 0 and len(list((tmp_path / "a").glob("snapshot-*.json"))) == 1


def test_replay_half_life_in_stream_time(tmp_path):
    """--half-life-time 30s over an archive stamped one document per second: the checkpointed
    model forgets by the archive's clock (the newest document weighs 1, one 30 s older 1/2)."""
    archive = write_archive(tmp_path / "news.jsonl")
    result = cli("replay", archive, "--out", tmp_path / "run", "--time-field", "time", "--half-life-time", "30s",
                 *SMALL)
    assert result.returncode == 0, result.stderr
    model = StreamingTopicModel.load(model_path(tmp_path / "run"))
    assert (model.half_life, model.half_life_unit) == (30.0, "stream")
    assert model.statistics().effective_documents == pytest.approx(sum(2.0 ** (-k / 30) for k in range(200)))
    both = cli("replay", archive, "--out", tmp_path / "x", "--half-life", "50", "--half-life-time", "1h", *SMALL)
    assert both.returncode == 2 and "not both" in both.stderr
    untimed = cli("replay", archive, "--out", tmp_path / "y", "--half-life-time", "1h", *SMALL)
    assert untimed.returncode == 2 and "--half-life-time needs timestamps" in untimed.stderr


def test_the_carried_refinement_and_its_challenges_are_on_unless_switched_off(tmp_path):
    from click.testing import CliRunner

    from consumers.cli import main

    archive = write_archive(tmp_path / "news.jsonl")
    for switch, carry, challenge in ((None, True, True), ("--no-refine-carry", False, True),
                                     ("--refine-carry", True, True), ("--no-refine-fill-restarts", True, False)):
        out = tmp_path / str(switch)
        result = CliRunner().invoke(main, ["replay", str(archive), "--out", str(out), *SMALL,
                                           *([switch] if switch else [])])
        assert result.exit_code == 0, result.output
        config = StreamingTopicModel.load(model_path(out)).config
        assert (config.refine_carry, config.refine_fill_restarts) == (carry, challenge)


def test_replay_reports_malformed_records_and_finishes(tmp_path):
    lines = write_archive(tmp_path / "ok.jsonl", n=100).read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl.gz"
    packed = gzip.compress(b"".join(lines[:60] + [b"{not json\n", b'{"title": "x"}\n', b'{"text": "\xff"}\n']
                                    + lines[60:]))
    bad.write_bytes(packed[: len(packed) * 3 // 4])
    result = cli("replay", bad, "--out", tmp_path / "run", *SMALL)
    assert result.returncode == 0, result.stderr
    assert f"{bad}:61: bad JSON" in result.stderr
    assert f"{bad}:62: missing field (text field 'text')" in result.stderr
    assert f"{bad}:63: not UTF-8" in result.stderr
    assert "truncated or corrupt archive" in result.stderr
    assert "4 malformed records skipped" in result.stdout
    for reason in ("malformed_json", "missing_field", "not_utf8", "truncated_archive"):
        assert re.search(rf"^  malformed +1  {reason}$", result.stdout, re.M)


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """A replay stopped after 70 documents: one checkpoint, in run/checkpoints."""
    return replayed(tmp_path_factory, "stopped", "--snapshot-every", "50", "--stop-after", "70")[0]


def _reseal(body: dict) -> dict:
    """The manifest with the checksum its writer would give it (schema damage must be caught
    by more than the checksum)."""
    body.pop("checksum", None)
    return dict(body, checksum=hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest())


@pytest.mark.parametrize("damage", ["missing keys", "negative position", "tampered manifest", "corrupt state file",
                                    "incomplete source", "not JSON"])
def test_resume_from_a_bad_checkpoint_exits_2(stopped_run, tmp_path, damage):
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    manifest, state = run / "checkpoints" / "ckpt-0000000001.json", run / "checkpoints" / "ckpt-0000000001.state"
    body = json.loads(manifest.read_text())
    if damage == "missing keys":
        del body["counters"]["documents"], body["counters"]["bucket"]
        manifest.write_text(json.dumps(_reseal(body)))
    elif damage == "negative position":
        body["archive"]["position"] = -5
        manifest.write_text(json.dumps(_reseal(body)))
    elif damage == "tampered manifest":
        body["archive"]["position"] = 0
        manifest.write_text(json.dumps(body))
    elif damage == "corrupt state file":
        state.write_bytes(state.read_bytes()[:-100] + bytes(100))
    elif damage == "incomplete source":
        del body["archive"]["source"]["time_field"]
        manifest.write_text(json.dumps(_reseal(body)))
    else:
        manifest.write_text("{not json")
    result = cli("replay", "--resume", "--out", run)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert any("bad checkpoint" in line for line in result.stderr.splitlines()), result.stderr
    assert "Traceback" not in result.stderr and "replayed" not in result.stdout


def test_a_run_whose_model_file_is_gone_says_no_such_file(stopped_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    state = run / "checkpoints" / "ckpt-0000000001.state"
    state.unlink()
    result = cli("infer", "--model", run, stdin="apple pear\n")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"Error: {state}: no such file"]


def test_a_wrong_time_format_is_one_line_not_a_screen_of_warnings(tmp_path):
    archive = write_archive(tmp_path / "news.jsonl")
    result = cli("replay", archive, "--time-field", "time", "--time-format", "%d-%b-%Y", "--out", tmp_path / "run")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"Error: {archive}: --time-format '%d-%b-%Y' reads none of the first 20 "
                                          "times in field 'time' (e.g. '2024-03-01T00:00:00Z')"]


@pytest.mark.parametrize("args, message", [
    (["replay", "missing.jsonl"], "no such file or directory: missing.jsonl"),
    (["replay", "news.jsonl", "--format", "xml"], "Invalid value for '--format'"),
    (["replay", "news.csv", "--text-field", "body"], "news.csv: no column 'body' (columns: id, text)"),
    (["replay", "news.jsonl", "--speed", "60"], "--speed paces by timestamps: give --time-field"),
    (["replay", "news.jsonl", "--text-field", "body"],
     "news.jsonl: no text field 'body' in the first 100 records (their fields: id, text, time)"),
    (["replay", "news.txt"], "news.txt: the lines are JSON objects, not text: read it with --format jsonl"),
    (["replay", "headless.csv"], "headless.csv: the first row looks like data, not a header row"),
    (["replay", "--resume", "--out", "nowhere"], "no checkpoint in nowhere"),
    (["replay", "news.jsonl", "--out", "busy"], "busy already holds a replay: add --resume to continue it or --force"),
    (["topics", "news.jsonl"], "news.jsonl: not a snapshot file"),
    (["infer", "--model", "news.jsonl"], "unreadable state file"),
    (["produce", "news.jsonl", "http://localhost/topic"], "a Kafka source is kafka://HOST:PORT/TOPIC"),
])
def test_bad_input_exits_2_with_one_clear_line(tmp_path, args, message):
    write_archive(tmp_path / "news.jsonl")
    (tmp_path / "news.csv").write_text("id,text\n1,hello world\n")
    (tmp_path / "news.txt").write_text((tmp_path / "news.jsonl").read_text())
    (tmp_path / "headless.csv").write_text("".join(f'{i},"document {i}, with a comma"\n' for i in range(30)))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "snapshot-000001.json").write_text("{}")
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert any(message in line for line in result.stderr.splitlines())  # on one line
    assert "Traceback" not in result.stderr


def test_help_documents_exit_codes():
    result = cli("--help")
    assert result.returncode == 0
    for line in ("0    success", "1    runtime failure", "2    usage error or bad input", "130  interrupted"):
        assert line in result.stdout
    for command in ("replay", "consume", "demo", "topics", "events", "infer", "produce", "bench"):
        assert command in result.stdout


def test_topics_table(run_dir):
    out, _ = run_dir
    result = cli("topics", out, "--words", "8")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("snapshot 3 | 200 documents") and lines[1].split() == ["id", "share", "label", "anchor", "top", "words"]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 3
    assert sorted(sorted(row[4:]) for row in rows) == sorted(sorted(t) for t in THEMES)
    assert all(row[2] == "_".join(row[4:6]) for row in rows)  # the label: the first two words shown
    assert sum(float(row[1].rstrip("%")) for row in rows) == pytest.approx(100, abs=0.2)
    as_json = json.loads(cli("topics", out / "snapshot-000001.json", "--json", "--words", "2").stdout)
    assert as_json["version"] == 1 and all(len(t["top_words"]) == 2 for t in as_json["topics"])


def test_events_across_snapshots(run_dir):
    out, _ = run_dir
    result = cli("events", out)
    assert result.returncode == 0
    headings = [line for line in result.stdout.splitlines() if line.startswith("snapshot")]
    assert len(headings) == 3 and headings[0].startswith("snapshot 1 | 80 documents | 3 births")
    assert result.stdout.count("+ birth") >= 3
    events = [json.loads(line) for line in cli("events", out, "--json", "--type", "birth").stdout.splitlines()]
    assert events[:3] == [{"snapshot": 1, "documents": 80, "stream_time": None, "type": "birth", "topic": t,
                           "label": events[t]["label"], "anchor": events[t]["anchor"], "words": events[t]["words"]} for t in range(3)]
    assert all(len(e["words"]) == 8 and e["anchor"] in e["words"] for e in events[:3])  # a birth says what it is
    assert all(e["label"] == "_".join(e["words"][:2]) for e in events[:3])


def test_events_of_a_run_that_ended_inside_the_burn_in_say_so_and_show_its_topics(tmp_path_factory):
    out, _ = replayed(tmp_path_factory, "forming", "--snapshot-every", "80", "--burn-in", "10")
    result = cli("events", out)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all("topics forming" in line for line in lines if line.startswith("snapshot"))
    start = lines.index("the run ended inside the burn-in (its topics still formed): no events yet; its 3 topics:")
    assert lines[start + 1].split()[:3] == ["id", "share", "label"] and len(lines) == start + 5


def test_infer_from_stdin_and_from_an_archive(run_dir, tmp_path):
    out, _ = run_dir
    result = cli("infer", "--model", out, "--top", "1",
                 stdin="apple pear plum cherry\n\nrocket comet orbit\nunknown words only\n")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["key"] for r in rows] == [1, 3, 4]
    assert rows[0]["topics"][0][1] > 0.9 and rows[1]["topics"][0][1] > 0.9
    assert rows[0]["topics"][0][0] != rows[1]["topics"][0][0]
    labels = {t["id"]: t["label"] for t in json.loads(cli("topics", out, "--json").stdout)["topics"]}
    assert all(label == labels[topic] for r in rows[:2] for topic, _, label in r["topics"])
    assert rows[2] == {"key": 4, "topics": [], "no_known_words": True}  # flagged, not given the prior
    assert "1 document had no word the model knows" in result.stderr
    archive = write_archive(tmp_path / "more.jsonl", n=5, seed=9)
    result = cli("infer", archive, "--model", out, "--top", "0")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["key"] for r in rows] == [0, 1, 2, 3, 4]
    assert all(len(r["topics"]) == 3 and sum(w for _, w, _ in r["topics"]) == pytest.approx(1, abs=1e-3) for r in rows)


def test_bench(tmp_path):
    archive = write_archive(tmp_path / "news.jsonl", n=300)
    result = cli("bench", archive, "--documents", "300", *SMALL)
    assert result.returncode == 0, result.stderr
    assert "300 documents from news.jsonl" in result.stdout
    for stage in ("tokenize", "learn from raw documents", "learn from pre-indexed counts", "refresh"):
        assert stage in result.stdout


def test_demo_is_the_main_job(tmp_path):
    result = cli("demo", "--out", tmp_path / "demo", "--snapshot-every", "2000")
    assert result.returncode == 0, result.stderr
    assert "replaying the docstrings of the Python" in result.stdout
    # some are rejected; the first topics form before events are announced (the burn-in)
    assert re.search(r"^snapshot 1 \| 1,9\d\d documents \| topics forming \(events wait for the burn-in\)",
                     result.stdout, re.M)
    assert "final topics:" in result.stdout
    assert f"snapshots, checkpoint and model are in {tmp_path / 'demo'}" in result.stdout
    snapshots = sorted((tmp_path / "demo").glob("snapshot-*.json"))
    assert len(snapshots) == 3
    final = result.stdout.split("final topics:")[1].splitlines()[2:22]
    assert len({row.split()[2] for row in final}) == 20  # 20 distinct anchors


def test_produce_then_replay_from_kafka(kafka_broker, tmp_path):
    archive = write_archive(tmp_path / "news.jsonl", n=120)
    url = f"kafka://{kafka_broker.bootstrap_servers}/replay-{uuid.uuid4().hex[:8]}"
    produced = cli("produce", archive, url, "--time-field", "time")
    assert produced.returncode == 0, produced.stderr
    assert "produced 120 messages" in produced.stdout
    from_kafka = cli("replay", url, "--out", tmp_path / "kafka", "--snapshot-every", "1000", *SMALL)
    assert from_kafka.returncode == 0, from_kafka.stderr
    assert "replayed 120 documents" in from_kafka.stdout
    kafka_model = StreamingTopicModel.load(model_path(tmp_path / "kafka"))
    file_model = StreamingTopicModel(n_topics=3, vocabulary_size=100, warmup_documents=40)
    for record in open_source(archive):
        file_model.learn_one(record.document, record.key)
    assert np.array_equal(kafka_model.statistics().packed, file_model.statistics().packed)
    tail = [r.key for r in open_source(url, kafka_start=100)]
    assert tail == [str(i) for i in range(100, 120)]
    later = [r.timestamp for r in open_source(url, kafka_start=parse_time("2024-03-01T00:01:50Z"))]
    assert later == [parse_time("2024-03-01T00:01:50Z") + i for i in range(10)]


def test_a_full_disk_names_the_file_it_could_not_write(tmp_path, monkeypatch):
    """No space left (or any write error without a file name) says which file, in one line."""
    import errno

    from click.testing import CliRunner

    import streamtopics.state
    from consumers.cli import main

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(streamtopics.state.os, "fsync", full)
    with pytest.raises(OSError, match=r"No space left on device: '.*model\.state'"):
        streamtopics.state.write_state(tmp_path / "model.state", {"a": np.zeros(3)}, {})
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone too
    result = CliRunner().invoke(main, ["replay", str(write_archive(tmp_path / "a.jsonl")), "--out", str(tmp_path / "run"),
                                       "--snapshot-every", "100", "-q"])
    assert result.exit_code == 1
    line = result.output.strip().splitlines()[-1]
    assert re.fullmatch(r"Error: .*/run/\S+: No space left on device", line), result.output


def test_input_too_small_for_the_topics_is_a_usage_error_in_words(tmp_path):
    """Exit 2 and one line in words, like every other usage error (not exit 1 with a class name)."""
    archive = tmp_path / "tiny.jsonl"
    archive.write_text("".join(json.dumps({"id": i, "text": "apple pear plum"}) + "\n" for i in range(30)))
    result = cli("replay", str(archive), "--out", str(tmp_path / "run"), "--n-topics", "5",
                 "--warmup-documents", "10", "-q")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "Error: a vocabulary of 3 words cannot hold 5 topics"
