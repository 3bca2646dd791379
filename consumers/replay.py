"""Replay an archived stream through a model: snapshots on a schedule, resumable, reproducible.

A :class:`Replay` reads a :class:`~consumers.records.Source` flat out, or paced by the
documents' timestamps (``speed=60``: one hour of stream per minute), and runs every document
through the stream driver (:class:`~consumers.stream.StreamDriver`, shared with the Kafka
consumer): learn, refresh every N documents and/or every interval of *stream* time
(:class:`RefreshGrid`, on the model's :class:`~streamtopics.policy.RefreshPolicy`), each
snapshot written to the run directory, a
:class:`~consumers.snapshot_directory.SnapshotDirectory` (``snapshot-000001.json``, ...); a final
one covers the end of the archive. Nothing in a snapshot depends on the wall clock, so the same
archive and options give byte-identical snapshot files.

A checkpoint (:class:`~consumers.checkpoint.ArchiveCheckpoint`: the model saved with
:meth:`StreamingTopicModel.save` plus the archive position and the replay's counters, in
``checkpoint.json``) is written at the end, on :meth:`Replay.stop`, after ``stop_after``
documents and every ``checkpoint_every`` documents, in the driver's commit order.
:meth:`Replay.resume` continues from it; the result equals an uninterrupted replay.

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
from streamtopics.policy import RefreshPolicy

from .checkpoint import ArchiveCheckpoint, CheckpointError
from .records import Malformed, Source
from .snapshot_directory import SnapshotDirectory
from .sources import open_source
from .stream import StreamDriver

__all__ = ["CheckpointError", "RefreshGrid", "Replay", "ReplaySummary", "model_path", "read_checkpoint",
           "reopen_source"]


@dataclass
class ReplaySummary:
    """What a replay did. ``documents`` counts records handed to the model (the model may
    still reject some: ``rejected``); ``malformed`` counts records that could not be read."""

    documents: int = 0
    absorbed: int = 0
    malformed: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    snapshots: list[Path] = field(default_factory=list)
    checkpoint: Path | None = None
    stopped: bool = False
    elapsed_s: float = 0.0
    refresh_s: float = 0.0
    checkpoint_s: float = 0.0
    documents_this_run: int = 0

    @property
    def ingest_rate(self) -> float:
        """Documents per second of this run, refreshes and checkpoints excluded."""
        busy = self.elapsed_s - self.refresh_s - self.checkpoint_s
        return self.documents_this_run / busy if busy > 0 else 0.0


class RefreshGrid:
    """A replay's refresh schedule: at every multiple of ``every_documents`` documents (counted
    from the start of the archive) and whenever stream time crosses a multiple of
    ``every_seconds``. The model's :class:`~streamtopics.policy.RefreshPolicy` decides, its
    stream clock counting intervals (so a boundary is an exact integer comparison); after every
    decision it restarts from the grid point last passed, so refreshes fall on the same
    documents however the run was interrupted and resumed.

    ``bucket`` is the index of the stream-time interval last seen (None before the first
    timestamp), what a checkpoint records."""

    def __init__(self, every_documents: int | None = None, every_seconds: float | None = None,
                 bucket: int | None = None, documents: int = 0):
        self.every_documents, self.every_seconds = every_documents, every_seconds
        self.policy = RefreshPolicy(every_documents, 1 if every_seconds else None, clock="stream")
        self.bucket = bucket
        self.restart(documents)

    def _grid_documents(self, documents: int) -> int:
        return documents - documents % self.every_documents if self.every_documents else documents

    def restart(self, documents: int) -> None:
        """Count from the grid points at or before ``documents`` and the current interval."""
        self.policy.restart(self._grid_documents(documents), self.bucket if self.every_seconds else None)

    def crossed(self, timestamp: float | None, documents: int) -> bool:
        """Whether ``timestamp`` (of the document about to be learned) is past the current
        interval; the interval then moves on to it."""
        if timestamp is None or not self.every_seconds:
            return False
        bucket = math.floor(timestamp / self.every_seconds)
        if self.bucket is None:
            self.bucket = bucket
            self.restart(documents)
            return False
        due = self.policy.due(self._grid_documents(documents), bucket)
        if bucket > self.bucket:
            self.bucket = bucket
            self.restart(documents)
        return due

    def counted(self, documents: int) -> bool:
        """Whether ``documents`` (just learned) reached the next multiple of ``every_documents``."""
        if not self.every_documents:
            return False
        due = self.policy.due(documents)
        if due:
            self.restart(documents)
        return due


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

    Scheduled refreshes (:class:`RefreshGrid`) wait until the model has built its vocabulary
    (``warmup_documents``); the final one does not. The replay owns the refresh schedule: leave
    the model's own ``refresh_every`` at None.
    """

    def __init__(self, model: StreamingTopicModel, source: Source, out_dir, *,
                 every_documents: int | None = None, every_seconds: float | None = None,
                 speed: float | None = None, checkpoint_every: int | None = None,
                 on_snapshot: Callable[[TopicSnapshot, Path], None] | None = None,
                 on_malformed: Callable[[Malformed], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        for name, value in (("every_documents", every_documents), ("every_seconds", every_seconds),
                            ("speed", speed), ("checkpoint_every", checkpoint_every)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.model, self.source, self.out_dir = model, source, Path(out_dir)
        self.snapshots = SnapshotDirectory(self.out_dir)
        self.driver = StreamDriver(model, ArchiveCheckpoint(self.out_dir, source.spec), self.snapshots, clock=clock)
        self.every_documents, self.every_seconds = every_documents, every_seconds
        self.schedule = RefreshGrid(every_documents, every_seconds)
        self.speed, self.checkpoint_every = speed, checkpoint_every
        self.on_snapshot, self.on_malformed = on_snapshot, on_malformed
        self._clock, self._sleep = clock, sleep
        self.documents = 0
        self.malformed: Counter = Counter()
        self.since_snapshot = 0  # documents learned since the latest snapshot
        self._stop = False

    @property
    def stream_time(self) -> float | None:
        """The latest document time learned."""
        return self.driver.stream_time

    # ------------------------------------------------------------------ run
    def run(self, stop_after: int | None = None,
            on_progress: Callable[["Replay"], None] | None = None) -> ReplaySummary:
        """Replay to the end of the source, or until ``stop_after`` documents of this run or a
        call to :meth:`stop`; then checkpoint. ``on_progress(replay)`` is called now and then."""
        summary = ReplaySummary(malformed=self.malformed)
        started = self._clock()
        paced_from: tuple[float, float] | None = None
        position = self.source.position
        for item in self.source:
            if isinstance(item, Malformed):
                self.malformed[item.reason] += 1
                if self.on_malformed is not None:
                    self.on_malformed(item)
                position = self.source.position
                if self._stop:
                    summary.stopped = True
                    break
                continue
            timestamp = item.timestamp
            if self.schedule.crossed(timestamp, self.documents) and self.since_snapshot:
                self._snapshot(position, summary, scheduled=True)
            if timestamp is not None and self.speed:
                if paced_from is None:
                    paced_from = (timestamp, self._clock())
                self._wait_until(paced_from[1] + (timestamp - paced_from[0]) / self.speed)
            self.driver.learn(item.document, item.key, timestamp)
            position = self.source.position
            self.documents += 1
            self.since_snapshot += 1
            summary.documents_this_run += 1
            if self.schedule.counted(self.documents):
                self._snapshot(position, summary, scheduled=True)
            if self.checkpoint_every and self.documents % self.checkpoint_every == 0:
                self._checkpoint(position, summary)
            if on_progress is not None and self.documents % 256 == 0:
                on_progress(self)
            if self._stop or (stop_after is not None and summary.documents_this_run >= stop_after):
                summary.stopped = True
                break
        if not summary.stopped and self.since_snapshot and self.documents > self.model.documents_rejected:
            self._snapshot(position, summary)
        self._checkpoint(position, summary)
        if on_progress is not None:
            on_progress(self)
        summary.documents = self.documents
        summary.absorbed = self.model.documents_absorbed
        summary.rejected = Counter(self.model.rejections)
        summary.elapsed_s = self._clock() - started
        self._stop = False
        return summary

    def stop(self) -> None:
        """Ask :meth:`run` to stop after the current document (safe from a signal handler)."""
        self._stop = True

    def _wait_until(self, deadline: float) -> None:
        while not self._stop and (delay := deadline - self._clock()) > 0:
            self._sleep(min(delay, 0.25))

    # ------------------------------------------------------------------ snapshots
    def _snapshot(self, position, summary: ReplaySummary, scheduled: bool = False) -> None:
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
            "bucket": self.schedule.bucket, "since_snapshot": self.since_snapshot,
            "schedule": {"every_documents": self.every_documents, "every_seconds": self.every_seconds,
                         "speed": self.speed, "checkpoint_every": self.checkpoint_every},
        }
        summary.checkpoint = self.driver.checkpoint(position, counters)
        summary.checkpoint_s += self._clock() - t0

    def restore(self, state: dict) -> None:
        """Take up the counters of a checkpoint (:func:`read_checkpoint`) of this replay."""
        self.documents = state["documents"]
        self.malformed = Counter(state["malformed"])
        self.driver.advance(state["stream_time"])
        self.schedule = RefreshGrid(self.every_documents, self.every_seconds, state["bucket"], self.documents)
        self.since_snapshot = state["since_snapshot"]

    @classmethod
    def resume(cls, out_dir, source: Source | None = None, **options) -> "Replay":
        """Continue the replay checkpointed in ``out_dir``: the model, the archive position,
        the counters and the schedule come back; ``source`` defaults to reopening the one
        the checkpoint names. ``options`` are the callbacks (and ``clock``/``sleep``)."""
        state = read_checkpoint(out_dir)
        if source is None:
            source = reopen_source(state)
        elif source.spec != state["source"]:
            raise CheckpointError(f"{out_dir} holds a replay of {_describe(state['source'])}, "
                                  f"not of {_describe(source.spec)}")
        if source.position != state["position"]:
            raise CheckpointError(f"source is at {source.position!r}, the checkpoint at {state['position']!r}")
        model = StreamingTopicModel.load(Path(out_dir) / state["model"])
        replay = cls(model, source, out_dir, **state["schedule"], **options)
        replay.restore(state)
        return replay


def read_checkpoint(out_dir) -> dict:
    """The state saved in ``out_dir/checkpoint.json``; :class:`CheckpointError` if there is
    none or it is not one."""
    return ArchiveCheckpoint.read(out_dir)


def reopen_source(state: dict) -> Source:
    """The checkpointed source, positioned where the checkpoint left it."""
    return open_source(**state["source"], start=state["position"])


def model_path(path) -> Path:
    """The model file to load for ``path``: a model file itself, or a run directory's
    checkpointed model."""
    path = Path(path)
    if path.is_dir():
        return path / read_checkpoint(path)["model"]
    return path


def _describe(spec: dict) -> str:
    return f"{spec.get('path')} ({spec.get('format')})"
