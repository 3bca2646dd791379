"""Replay an archived stream through a model: snapshots on a schedule, resumable, reproducible.

A :class:`Replay` reads a :class:`~consumers.records.Source` flat out, or paced by the
documents' timestamps (``speed=60``: one hour of stream per minute), and runs every document
through the stream driver (:class:`~consumers.stream.StreamDriver`, shared with the Kafka
consumer): learn, refresh every N documents and/or every interval of *stream* time
(an aligned :class:`~streamtopics.schedule.RefreshSchedule`: the same documents however the run
was interrupted and resumed), each snapshot written to the run directory, a
:class:`~consumers.snapshot_directory.SnapshotDirectory` (``snapshot-000001.json``, ...); a final
one covers the end of the archive. Nothing in a snapshot depends on the wall clock, so the same
archive and options give byte-identical snapshot files.

Documents are queued in the driver and learned together (:meth:`StreamDriver.queue
<consumers.stream.StreamDriver.queue>`: compiled raw-text batches) up to the next event -- a
snapshot, a checkpoint, a progress call, a malformed record, a wait of the pacing, the end -- which
finds them all learned: the same statistics, rejections, snapshots and checkpoints as one
document at a time.

A checkpoint is written at the end, on :meth:`Replay.stop`, after ``stop_after`` documents and
every ``checkpoint_every`` documents, in the driver's commit order, to ``checkpoints/`` in the
run directory: a :class:`~consumers.checkpoint.CheckpointStore`, the Kafka consumer's format
(``ckpt-NNNNNNNNNN.state``: the model saved with :meth:`StreamingTopicModel.save`;
``ckpt-NNNNNNNNNN.json``: the manifest with the archive's source and position, the replay's
counters and a checksum). :meth:`Replay.resume` continues from the newest good one (a damaged one
is set aside and the previous one used); the result equals an uninterrupted replay. A checkpoint
that cannot be resumed raises :class:`CheckpointError` ("bad checkpoint ...").

Malformed records are skipped, reported through ``on_malformed`` and counted by reason.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.schedule import RefreshSchedule

from .checkpoint import ArchivePosition, Checkpoint, CheckpointError, CheckpointStore, Restored
from .records import Malformed, Source
from .run_record import clear_run_record, write_run_record
from .snapshot_directory import SnapshotDirectory
from .sources import open_source
from .stream import StreamDriver

__all__ = ["CHECKPOINTS", "CheckpointError", "Replay", "ReplaySummary", "checkpoint_dir", "model_path",
           "read_checkpoint", "restore_checkpoint"]

CHECKPOINTS = "checkpoints"  # the run directory's CheckpointStore


@dataclass
class ReplaySummary:
    """What a replay did. ``documents`` counts records handed to the model (the model may
    still reject some: ``rejected``); ``malformed`` counts records that could not be read;
    ``times_clamped`` the documents dated more than the model's ``max_time_skew`` after the
    stream clock (absorbed, counted as dated that far: :mod:`streamtopics.stream_clock`)."""

    documents: int = 0
    absorbed: int = 0
    times_clamped: int = 0
    malformed: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    snapshots: list[Path] = field(default_factory=list)
    checkpoint: Path | None = None  # the manifest of the latest checkpoint
    stopped: bool = False
    elapsed_s: float = 0.0
    refresh_s: float = 0.0
    checkpoint_s: float = 0.0
    paused_s: float = 0.0  # waits on purpose: pacing (``speed``, :meth:`Replay.pause`)
    documents_this_run: int = 0

    @property
    def ingest_rate(self) -> float:
        """Documents per second of this run while ingesting: refreshes, checkpoints and pauses
        excluded (a paced run would otherwise report its pace, not its speed)."""
        busy = self.elapsed_s - self.refresh_s - self.checkpoint_s - self.paused_s
        return self.documents_this_run / busy if busy > 0 else 0.0


class Replay:
    """Feed ``source`` to ``model``, writing snapshots and checkpoints to ``out_dir``.

    Parameters
    ----------
    every_documents
        Refresh after every this many documents (counted from the start of the archive).
    every_seconds
        Refresh whenever the documents' timestamps cross a multiple of this many seconds of
        stream time (before the first document past the boundary is absorbed).
    speed
        Pace the replay: this many seconds of stream time per second of wall time (None: as
        fast as possible). Needs timestamps.
    checkpoint_every
        Also checkpoint after every this many documents.
    on_snapshot
        ``on_snapshot(snapshot, path)`` after each snapshot is written; its ``events`` are the
        births, deaths and changes since the previous one.
    on_malformed
        ``on_malformed(item)`` for each :class:`~consumers.records.Malformed` record.
    keep_checkpoints
        Checkpoints kept in ``out_dir/checkpoints``: the newest and the fall-backs used if it
        turns out damaged. The directory is locked while :meth:`run` runs.

    Scheduled refreshes (at every multiple of ``every_documents`` counted from the start of the
    archive, and whenever stream time enters a new interval of ``every_seconds``: an aligned
    :class:`~streamtopics.schedule.RefreshSchedule`) wait until the model has built its vocabulary
    (``warmup_documents``); the final one does not. The replay owns the refresh schedule: leave
    the model's own ``refresh_every`` at None.
    """

    def __init__(self, model: StreamingTopicModel, source: Source, out_dir, *,
                 every_documents: int | None = None, every_seconds: float | None = None,
                 speed: float | None = None, checkpoint_every: int | None = None,
                 on_snapshot: Callable[[TopicSnapshot, Path], None] | None = None,
                 on_malformed: Callable[[Malformed], None] | None = None, keep_checkpoints: int = 2,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        for name, value in (("every_documents", every_documents), ("every_seconds", every_seconds),
                            ("speed", speed), ("checkpoint_every", checkpoint_every)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.model, self.source, self.out_dir = model, source, Path(out_dir)
        self.snapshots = SnapshotDirectory(self.out_dir)
        self.checkpoint_dir, self.keep_checkpoints = checkpoint_dir(self.out_dir), int(keep_checkpoints)
        self.driver = StreamDriver(model, None, self.snapshots, clock=clock)  # its store: opened by run()
        self.every_documents, self.every_seconds = every_documents, every_seconds
        self.schedule = RefreshSchedule(every_documents, every_seconds, aligned=True)
        self.speed, self.checkpoint_every = speed, checkpoint_every
        self.on_snapshot, self.on_malformed = on_snapshot, on_malformed
        self._clock, self._sleep = clock, sleep
        self.documents = 0
        self.malformed: Counter = Counter()
        self.since_snapshot = 0  # documents learned since the latest snapshot
        self._stop = False
        self._paused = 0.0  # seconds waited on purpose in this run

    @property
    def stream_time(self) -> float | None:
        """The latest document time learned."""
        return self.driver.stream_time

    # ------------------------------------------------------------------ run
    def run(self, stop_after: int | None = None,
            on_progress: Callable[["Replay"], None] | None = None) -> ReplaySummary:
        """Replay to the end of the source, or until ``stop_after`` documents of this run or a
        call to :meth:`stop`; then checkpoint and write the run's record
        (:mod:`consumers.run_record`). ``on_progress(replay)`` is called now and then."""
        clear_run_record(self.out_dir)
        with CheckpointStore(self.checkpoint_dir, keep=self.keep_checkpoints) as store:
            self.driver.checkpoints = store
            try:
                summary = self._run(stop_after, on_progress)
            finally:
                self.driver.checkpoints = None
        snapshot = self.model.snapshot
        write_run_record(self.out_dir, summary, snapshot and snapshot.version, snapshot and snapshot.documents_seen)
        return summary

    def _run(self, stop_after: int | None, on_progress: Callable[["Replay"], None] | None) -> ReplaySummary:
        summary = ReplaySummary(malformed=self.malformed)
        started = self._clock()
        self._paused = 0.0
        paced_from: tuple[float, float] | None = None
        position = self.source.position
        for item in self.source:  # documents are queued; the driver learns them before any event
            if isinstance(item, Malformed):
                self.driver.absorb()  # reported after the documents before it, as they were learned
                self.malformed[item.reason] += 1
                if self.on_malformed is not None:
                    self.on_malformed(item)
                position = self.source.position
                if self._stop:
                    summary.stopped = True
                    break
                continue
            timestamp = self.driver.dated(item.timestamp)  # what the model will count it as
            if self._interval_crossed(timestamp) and self.since_snapshot:
                self._snapshot(position, summary, scheduled=True)
            if timestamp is not None and self.speed:
                if paced_from is None:
                    paced_from = (timestamp, self._clock())
                self._wait_until(paced_from[1] + (timestamp - paced_from[0]) / self.speed)
            self.driver.queue(item.document, item.key, item.timestamp)
            position = self.source.position
            self.documents += 1
            self.since_snapshot += 1
            summary.documents_this_run += 1
            if self._count_reached():
                self._snapshot(position, summary, scheduled=True)
            if self.checkpoint_every and self.documents % self.checkpoint_every == 0:
                self._checkpoint(position, summary)
            if on_progress is not None and self.documents % 256 == 0:
                self.driver.absorb()
                on_progress(self)
            if self._stop or (stop_after is not None and summary.documents_this_run >= stop_after):
                summary.stopped = True
                break
        self.driver.absorb()
        if not summary.stopped and self.since_snapshot and self.documents > self.model.documents_rejected:
            self._snapshot(position, summary)
        self._checkpoint(position, summary)
        if on_progress is not None:
            on_progress(self)
        summary.documents = self.documents
        summary.absorbed = self.model.documents_absorbed
        summary.rejected = Counter(self.model.rejections)
        summary.times_clamped = self.model.times_clamped
        summary.elapsed_s = self._clock() - started
        summary.paused_s = self._paused
        self._stop = False
        return summary

    def stop(self) -> None:
        """Ask :meth:`run` to stop after the current document (safe from a signal handler); the
        documents read so far are learned and checkpointed."""
        self._stop = True

    def _wait_until(self, deadline: float) -> None:
        """Sleep until ``deadline``, having learned the documents read so far (pacing: none is
        learned before its time)."""
        while not self._stop and (delay := deadline - self._clock()) > 0:
            self.driver.absorb()
            self.pause(min(delay, 0.25))

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` on purpose (pacing, e.g. so that a dashboard can be watched
        changing); callable from the callbacks. The run's ingest rate does not count it."""
        started = self._clock()
        self._sleep(seconds)
        self._paused += self._clock() - started

    # ------------------------------------------------------------------ snapshots
    def _interval_crossed(self, timestamp: float | None) -> bool:
        """Whether ``timestamp`` (of the document about to be learned) starts a new stream-time
        interval; the schedule then moves to it (the first time seen starts the first interval)."""
        schedule = self.schedule
        if timestamp is None or not schedule.every_stream_seconds:
            return False
        due = schedule.due(self.documents, timestamp)
        if schedule.interval(timestamp) > schedule.stream_mark:
            schedule.restart(self.documents, timestamp)
        return due

    def _count_reached(self) -> bool:
        """Whether the documents learned reached the next multiple of ``every_documents``."""
        due = self.schedule.due(self.documents)
        if due:
            self.schedule.restart(self.documents)
        return due

    def _snapshot(self, position, summary: ReplaySummary, scheduled: bool = False) -> None:
        self.driver.absorb()  # the queued documents may end the warm-up
        if scheduled and self.model.vocabulary is None:
            return  # still warming up: refreshing now would freeze the vocabulary early
        snapshot, path, seconds = self.driver.refresh({"documents": self.documents, "archive": position})
        self.since_snapshot = 0
        summary.snapshots.append(path)
        summary.refresh_s += seconds
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot, path)

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint(self, position, summary: ReplaySummary) -> None:
        t0 = self._clock()
        counters = {
            "documents": self.documents, "malformed": dict(self.malformed), "stream_time": self.stream_time,
            "bucket": self.schedule.stream_mark, "since_snapshot": self.since_snapshot,
            "schedule": {"every_documents": self.every_documents, "every_seconds": self.every_seconds,
                         "speed": self.speed, "checkpoint_every": self.checkpoint_every},
        }
        saved = self.driver.checkpoint(ArchivePosition(self.source.spec, position), counters)
        summary.checkpoint = saved.manifest_path
        summary.checkpoint_s += self._clock() - t0

    def restore(self, state: dict) -> None:
        """Take up the counters of a checkpoint of this replay (checked: :func:`restore_checkpoint`)."""
        self.documents = state["documents"]
        self.malformed = Counter(state["malformed"])
        self.driver.advance(state["stream_time"])
        self.schedule.load_state_dict({"documents_mark": self.schedule.grid_point(self.documents),
                                       "stream_mark": state["bucket"]})
        self.since_snapshot = state["since_snapshot"]

    @classmethod
    def resume(cls, out_dir, source: Source | None = None, *, checkpoint: Restored | None = None,
               **options) -> "Replay":
        """Continue the replay checkpointed in ``out_dir``: the model, the archive position,
        the counters and the schedule of its newest good checkpoint come back
        (:func:`restore_checkpoint`, or ``checkpoint`` if already restored); ``source``
        defaults to reopening the one the checkpoint names. ``options`` are the callbacks (and
        ``clock``/``sleep``). :class:`CheckpointError` if there is no checkpoint to resume."""
        restored = checkpoint if checkpoint is not None else restore_checkpoint(out_dir)
        archive = restored.checkpoint.archive
        if source is None:
            source = _reopen(archive, out_dir, restored.checkpoint.sequence)
        elif source.spec != archive.source:
            raise CheckpointError(f"{out_dir} holds a replay of {_describe(archive.source)}, "
                                  f"not of {_describe(source.spec)}")
        if source.position != archive.position:
            raise CheckpointError(f"source is at {source.position!r}, the checkpoint at {archive.position!r}")
        state = restored.checkpoint.counters
        replay = cls(restored.model, source, out_dir, **state["schedule"], **options)
        replay.restore(state)
        return replay


def checkpoint_dir(out_dir) -> Path:
    """Where a replay in run directory ``out_dir`` keeps its checkpoints."""
    return Path(out_dir) / CHECKPOINTS


def restore_checkpoint(out_dir) -> Restored:
    """The newest good checkpoint of the replay in ``out_dir``, model loaded and counters
    checked (:meth:`CheckpointStore.restore`: damaged newer ones are set aside as ``*.corrupt``).
    :class:`CheckpointError` if there is none ("no checkpoint") or none that can be resumed
    ("bad checkpoint")."""
    directory = checkpoint_dir(out_dir)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint in {out_dir}")
    with CheckpointStore(directory) as store:
        restored = store.restore()
    if restored.checkpoint is None:
        if restored.skipped:
            raise CheckpointError(f"bad checkpoint in {out_dir}: {restored.skipped[0][1]} "
                                  f"(set aside as *.corrupt; no earlier good checkpoint)")
        if any(directory.glob("*.corrupt")):
            raise CheckpointError(f"bad checkpoint in {out_dir}: only damaged checkpoints (*.corrupt) are left")
        raise CheckpointError(f"no checkpoint in {out_dir}")
    _check_replay_checkpoint(restored.checkpoint, out_dir)
    return restored


def read_checkpoint(out_dir) -> Checkpoint:
    """The newest checkpoint of the replay in ``out_dir`` whose manifest is sound, read only
    (its state file neither loaded nor set aside); :class:`CheckpointError` if there is none."""
    directory = checkpoint_dir(out_dir)
    checkpoint = CheckpointStore.reader(directory).latest() if directory.is_dir() else None
    if checkpoint is None:
        raise CheckpointError(f"no checkpoint in {out_dir}")
    _check_replay_checkpoint(checkpoint, out_dir)
    return checkpoint


_SCHEDULE = {"every_documents": int, "every_seconds": (int, float), "speed": (int, float), "checkpoint_every": int}


def _check_replay_checkpoint(checkpoint: Checkpoint, out_dir) -> None:
    """A replay's checkpoint: an archive position (the store checked it) and the replay's
    counters, each of its type and range; CheckpointError("bad checkpoint ...") otherwise."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"bad checkpoint in {out_dir}: checkpoint {checkpoint.sequence} {why}")

    if checkpoint.archive is None:
        raise bad("holds Kafka offsets, not an archive position")
    state = checkpoint.counters

    def number(value, kind=(int, float)) -> bool:
        return isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)

    checks = {
        "documents": number(state.get("documents"), int) and state["documents"] >= 0,
        "malformed": isinstance(state.get("malformed"), dict) and all(
            isinstance(k, str) and number(v, int) and v >= 0 for k, v in state["malformed"].items()),
        "stream_time": state.get("stream_time", 0.0) is None or number(state.get("stream_time")),
        "bucket": state.get("bucket", 0) is None or number(state.get("bucket"), int),
        "since_snapshot": number(state.get("since_snapshot"), int) and 0 <= state["since_snapshot"],
        "schedule": isinstance(state.get("schedule"), dict) and set(state["schedule"]) == set(_SCHEDULE) and all(
            value is None or (number(value, _SCHEDULE[name]) and value > 0) for name, value in state["schedule"].items()),
    }
    wrong = [name for name, ok in checks.items() if not ok]
    if wrong:
        raise bad(f"has a missing or invalid {', '.join(wrong)}")


def _reopen(archive: ArchivePosition, out_dir, sequence: int) -> Source:
    """The checkpointed source, positioned where the checkpoint left it; its spec must be the
    whole of what reopens it (CheckpointError "bad checkpoint" if not)."""
    try:
        source = open_source(**archive.source, start=archive.position)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"bad checkpoint in {out_dir}: checkpoint {sequence} has a bad source "
                              f"({type(error).__name__}: {error})") from None
    if source.spec != archive.source:
        missing = sorted(set(source.spec) - set(archive.source))
        raise CheckpointError(f"bad checkpoint in {out_dir}: checkpoint {sequence} has an incomplete source"
                              + (f" (no {', '.join(missing)})" if missing else f" ({archive.source!r})"))
    return source


def model_path(path) -> Path:
    """The model file to load for ``path``: a model file itself, or a run directory's
    newest checkpointed model."""
    path = Path(path)
    if path.is_dir():
        return read_checkpoint(path).state_path
    return path


def _describe(spec: dict) -> str:
    return f"{spec.get('path')} ({spec.get('format')})"
