"""Times have bounds (issue 47, item 3): a time outside 0001..2199 (epoch milliseconds among them)
is rejected with a reason, and one document dated far ahead of the stream clock moves it at most
``max_time_skew`` (clamped, counted). Before, a year past 9999 or an epoch-milliseconds time
made a replay exit 1 at its first snapshot with no checkpoint, and under stream-time forgetting
one future-dated document erased 95 % of the model's history."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from consumers import reasons
from consumers.messages import MessageDecoder
from consumers.records import Malformed, Record
from consumers.replay import read_checkpoint
from consumers.sources import Fields, JsonLinesSource
from consumers.times import ImplausibleTime, parse_time
from streamtopics import StreamingTopicModel
from streamtopics.stream_clock import StreamClock

DAY = 86400.0
START = 1_600_000_000.0
WORDS = [f"word{a}{b}" for a in "abc" for b in "abcdefghij"]


def test_times_outside_the_plausible_range_are_rejected_and_milliseconds_are_named():
    assert parse_time("1787-09-17") < 0 and parse_time(0) == 0.0  # history and small synthetic clocks stay
    with pytest.raises(ImplausibleTime, match=r"epoch milliseconds\? \(2020-09-13T12:26:40Z\)"):
        parse_time(1_600_000_000_000)
    with pytest.raises(ImplausibleTime, match="after 2200-01-01"):
        parse_time(253_402_300_800)  # 10000-01-01 in seconds: past anything a datetime shows
    with pytest.raises(ImplausibleTime):
        parse_time("2500-01-01T00:00:00Z")
    decoder = MessageDecoder()
    assert decoder.decode(b'{"text": "a b c", "timestamp": 1600000000000}').reason == reasons.IMPLAUSIBLE_TIME
    broker = SimpleNamespace(value=b"a b c", key=None, timestamp=1_600_000_000_000_000)  # microseconds as ms
    assert decoder.decode_record(broker).reason == reasons.IMPLAUSIBLE_TIME
    broker.timestamp = 1_600_000_000_000  # milliseconds, as Kafka keeps them
    assert decoder.decode_record(broker).timestamp == 1_600_000_000.0


def test_an_archive_counts_implausible_times_by_their_own_reason(tmp_path):
    archive = tmp_path / "times.jsonl"
    archive.write_text('{"text": "a b c", "t": 1600000000000}\n{"text": "a b c", "t": 1600000000}\n')
    first, second = JsonLinesSource(archive, Fields(time="t"))
    assert isinstance(first, Malformed) and first.reason == "implausible_time" and "milliseconds" in first.detail
    assert isinstance(second, Record) and second.timestamp == 1_600_000_000.0


def test_the_clock_moves_at_most_max_skew_per_document():
    clock = StreamClock(max_skew=DAY)
    dated = [clock.advance(t) for t in (START, START + 3600, START + 400 * DAY, START + 7200, None, START + 1.5 * DAY)]
    assert dated == [START, START + 3600, START + 3600 + DAY, START + 7200, None, START + 1.5 * DAY]
    assert (clock.time, clock.clamped) == (START + 1.5 * DAY, 1)  # a later document moves it on
    unbounded = StreamClock(None)
    unbounded.advance(START)
    assert unbounded.advance(START + 400 * DAY) == START + 400 * DAY and unbounded.clamped == 0


def _texts(n: int) -> list[str]:
    return [" ".join(WORDS[(i % 3) * 10 + (i + j) % 10] for j in range(8)) for i in range(n)]


@pytest.mark.parametrize("batched", [True, False], ids=["learn_many", "learn_one"])
def test_one_future_dated_document_does_not_erase_the_history(batched):
    """Under a 30-day half-life in stream time, a document dated 130 days ahead erased 95 % of
    the history (2^-130/30); clamped to 7 days ahead it fades it by at most 15 %."""
    texts = _texts(600)
    times = [START + i * DAY / 20 for i in range(600)]

    def weight(future_dated: bool, **settings) -> StreamingTopicModel:
        model = StreamingTopicModel(3, WORDS, anchor_min_df=1, half_life=30 * DAY, half_life_unit="stream",
                                    refine_iterations=0, **settings)
        docs, stamps = list(texts), list(times)
        if future_dated:
            docs.insert(590, texts[0])
            stamps.insert(590, times[589] + 130 * DAY)
        if batched:
            model.learn_many(docs, stream_times=stamps)
        else:
            for doc, t in zip(docs, stamps):
                model.learn_one(doc, stream_time=t)
        return model

    reference = weight(False).statistics().effective_documents
    bounded = weight(True)
    assert bounded.times_clamped == 1 and bounded.ingest.stream_time == times[589] + 7 * DAY
    assert bounded.statistics().effective_documents > 0.8 * reference
    assert weight(True, max_time_skew=None).statistics().effective_documents < 0.1 * reference  # the bug


def test_the_count_of_clamped_times_survives_a_checkpoint(tmp_path):
    model = StreamingTopicModel(3, WORDS, anchor_min_df=1, refine_iterations=0)
    for i, t in enumerate((START, START + 100 * DAY, START + 200 * DAY)):
        model.learn_one(_texts(3)[i], stream_time=t)
    model.save(tmp_path / "model.state")
    loaded = StreamingTopicModel.load(tmp_path / "model.state")
    assert (loaded.times_clamped, loaded.ingest.stream_time, loaded.max_time_skew) == (2, START + 14 * DAY, 7 * DAY)


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "consumers.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_a_replay_with_year_10000_and_epoch_milliseconds_completes_and_its_run_reads(tmp_path):
    """On main: ``Error: ValueError: year 10000 is out of range``, exit 1, no checkpoint."""
    rows = [{"id": i, "text": text, "t": START + i * 600} for i, text in enumerate(_texts(300))]
    rows[120]["t"] = 253_402_300_800  # 10000-01-01T00:00:00Z in epoch seconds
    rows[121]["t"] = 1000 * rows[121]["t"]  # epoch milliseconds
    rows[200]["t"] = START + 3 * 365 * DAY  # plausible, but 3 years ahead of the stream: clamped to 7 days
    archive = tmp_path / "times.jsonl"
    archive.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = tmp_path / "run"
    result = _cli("replay", archive, "--out", run, "--time-field", "t", "--snapshot-interval", "6h",
                  "--n-topics", "3", "--vocabulary-size", "30", "--warmup-documents", "60")
    assert result.returncode == 0, result.stderr
    assert "implausible time (time field 't': 253402300800 is after 2200-01-01" in result.stderr
    assert "epoch milliseconds?" in result.stderr
    assert " 2  implausible_time" in result.stdout and " 1  times more than --max-time-skew" in result.stdout
    checkpoint = read_checkpoint(run)
    assert checkpoint.counters["documents"] == 298
    assert checkpoint.counters["stream_time"] == START + 199 * 600 + 7 * DAY
    assert json.loads((run / "run.json").read_text())["times_clamped"] == 1
    for command in (("topics", run), ("events", run), ("plot", run, "--out", tmp_path / "prevalence.png")):
        shown = _cli(*command)
        assert shown.returncode == 0, (command, shown.stderr)
    assert (tmp_path / "prevalence.png").stat().st_size > 0


def test_an_archive_all_in_milliseconds_says_so(tmp_path):
    archive = tmp_path / "ms.jsonl"
    archive.write_text("".join(json.dumps({"text": text, "t": int(1000 * (START + i))}) + "\n"
                               for i, text in enumerate(_texts(20))))
    result = _cli("replay", archive, "--out", tmp_path / "run", "--time-field", "t", "--snapshot-interval", "1h")
    assert result.returncode == 2
    assert "no readable record (20 malformed, e.g. 'implausible_time'; hint: times are epoch seconds" in result.stderr
