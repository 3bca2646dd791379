"""RefreshSchedule: the one decision of when periodic work is due, checked against plain
reference computations written here."""

import math

import numpy as np
import pytest

from streamtopics.schedule import RefreshSchedule


def grid_run(times, every_documents, every_seconds, stop_at=None):
    """The documents at which an aligned schedule falls due, as the replay asks it (the time of the
    document about to be learned, then the count after it); with ``stop_at``, its state is saved
    there and a new schedule resumes from it."""
    schedule, due = RefreshSchedule(every_documents, every_seconds, aligned=True), []
    for documents, t in enumerate(times):
        if documents == stop_at:
            state = schedule.state_dict()
            schedule = RefreshSchedule(every_documents, every_seconds, aligned=True)
            schedule.load_state_dict(state)
        if every_seconds and schedule.due(documents, t):
            due.append(("before", documents))
        if every_seconds and (schedule.stream_mark is None or schedule.interval(t) > schedule.stream_mark):
            schedule.restart(documents, t)
        if schedule.due(documents + 1):
            due.append(("after", documents + 1))
            schedule.restart(documents + 1)
    return due


def reference_grid(times, every_documents, every_seconds):
    """Due after every multiple of every_documents, and before each document whose interval
    floor(t / every_seconds) is past the latest interval seen."""
    due, latest = [], None
    for documents, t in enumerate(times):
        interval = math.floor(t / every_seconds)
        if latest is not None and interval > latest:
            due.append(("before", documents))
        latest = interval if latest is None else max(latest, interval)
        if (documents + 1) % every_documents == 0:
            due.append(("after", documents + 1))
    return due


@pytest.mark.parametrize("seed", range(3))
def test_an_aligned_schedule_falls_due_on_the_grid_however_it_is_resumed(seed):
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(7.0, 600)) - 50 * (rng.random(600) < 0.05)  # some go back in time
    expected = reference_grid(times, 50, 60.0)
    assert grid_run(times, 50, 60.0) == expected
    assert grid_run(times, 50, 60.0, stop_at=int(rng.integers(1, 600))) == expected


def test_documents_and_stream_time_since_the_last_restart():
    schedule = RefreshSchedule(every_documents=10, every_stream_seconds=5.0)
    schedule.restart(0, stream_time=100.0)
    assert not schedule.due(9, 104.0) and schedule.documents_until_due(9) == 0  # a clock: every document checked
    assert schedule.due(10, 104.0) and schedule.last_reason == "documents"
    schedule.restart(10, 104.0)
    assert schedule.due(11, 109.0) and schedule.last_reason == "stream time"
    schedule.postpone(11)  # documents count again from 11, the clock stays
    assert schedule.due(12, 109.5) and not schedule.due(12, 108.9)


def test_documents_until_due_counts_down_without_a_clock():
    schedule = RefreshSchedule(every_documents=10)
    schedule.restart(3)
    assert [schedule.documents_until_due(d) for d in (3, 9, 13, 20)] == [10, 4, 0, 0]
    assert RefreshSchedule().documents_until_due(5) is None and not RefreshSchedule().automatic


def test_after_progress_needs_work_since_the_restart(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("streamtopics.schedule.time.monotonic", lambda: clock[0])
    schedule = RefreshSchedule(every_wall_seconds=5.0, after_progress=True)
    schedule.restart(7)
    clock[0] = 6.0
    assert not schedule.due(7) and schedule.due(8) and schedule.last_reason == "wall time"
    schedule.restart(8)
    assert schedule.wall_seconds_left() == 5.0
    clock[0] = 9.0
    assert schedule.wall_seconds_left() == 2.0


@pytest.mark.parametrize("name", ["every_documents", "every_stream_seconds", "every_wall_seconds"])
@pytest.mark.parametrize("value", [0, -1, float("nan")])
def test_a_trigger_is_positive_or_off(name, value):
    with pytest.raises(ValueError, match=name):
        RefreshSchedule(**{name: value})
