"""Replay an archived stream through a model: snapshots on a schedule, resumable, reproducible.

A :class:`Replay` reads a :class:`~consumers.records.Source` flat out, or paced by the
documents' timestamps (``speed=60``: one hour of stream per minute), feeds every document to a
:class:`~streamtopics.StreamingTopicModel`, and refreshes it every N documents and/or every
interval of *stream* time. Each refresh is written to the run directory, a
:class:`~consumers.snapshot_directory.SnapshotDirectory` (``snapshot-000001.json``, ...); a final
one covers the end of the archive. Nothing in a snapshot depends on the wall clock, so the same
archive and options give byte-identical snapshot files.

A checkpoint (the model saved with :meth:`StreamingTopicModel.save` plus the archive position
and the replay's counters, in ``checkpoint.json``) is written at the end, on :meth:`Replay.stop`,
after ``stop_after`` documents and every ``checkpoint_every`` documents. :meth:`Replay.resume`
continues from it; the result equals an uninterrupted replay. The model file is written first
under a new name and ``checkpoint.json`` then points at it, so a crash leaves a consistent pair.

Malformed records are skipped, reported through ``on_malformed`` and counted by reason.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.state import atomic_write_bytes

from .records import Malformed, Source
from .snapshot_directory import SnapshotDirectory
from .sources import open_source

CHECKPOINT = "checkpoint.json"
CHECKPOINT_FORMAT = "streamtopics-replay-checkpoint"
CHECKPOINT_VERSION = 1


class CheckpointError(ValueError):
    """A run directory without a usable checkpoint, or one made from another source."""


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


def _bucket(timestamp: float, interval: float) -> int:
    return math.floor(timestamp / interval)


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

    Scheduled refreshes wait until the model has built its vocabulary (``warmup_documents``);
    the final one does not. The replay owns the refresh schedule: leave the model's own
    ``refresh_every`` at None.
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
        self.every_documents, self.every_seconds = every_documents, every_seconds
        self.speed, self.checkpoint_every = speed, checkpoint_every
        self.on_snapshot, self.on_malformed = on_snapshot, on_malformed
        self._clock, self._sleep = clock, sleep
        self.documents = 0
        self.malformed: Counter = Counter()
        self.stream_time: float | None = None
        self._bucket: int | None = None
        self._since_snapshot = 0
        self._stop = False

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
            if timestamp is not None and self.every_seconds:
                bucket = _bucket(timestamp, self.every_seconds)
                if self._bucket is not None and bucket > self._bucket and self._since_snapshot:
                    self._snapshot(position, summary, scheduled=True)
                self._bucket = bucket if self._bucket is None else max(bucket, self._bucket)
            if timestamp is not None and self.speed:
                if paced_from is None:
                    paced_from = (timestamp, self._clock())
                self._wait_until(paced_from[1] + (timestamp - paced_from[0]) / self.speed)
            self.model.learn_one(item.document, item.key, stream_time=timestamp)
            position = self.source.position
            self.documents += 1
            self._since_snapshot += 1
            summary.documents_this_run += 1
            if timestamp is not None:
                self.stream_time = timestamp if self.stream_time is None else max(self.stream_time, timestamp)
            if self.every_documents and self.documents % self.every_documents == 0:
                self._snapshot(position, summary, scheduled=True)
            if self.checkpoint_every and self.documents % self.checkpoint_every == 0:
                self._checkpoint(position, summary)
            if on_progress is not None and self.documents % 256 == 0:
                on_progress(self)
            if self._stop or (stop_after is not None and summary.documents_this_run >= stop_after):
                summary.stopped = True
                break
        if not summary.stopped and self._since_snapshot and self.documents > self.model.documents_rejected:
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
        t0 = self._clock()
        snapshot = self.model.refresh(position={"documents": self.documents, "archive": position},
                                      stream_time=self.stream_time)
        path = self.snapshots.save(snapshot)
        self._since_snapshot = 0
        summary.snapshots.append(path)
        summary.refresh_s += self._clock() - t0
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot, path)

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint(self, position, summary: ReplaySummary) -> None:
        t0 = self._clock()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        model_file = self.out_dir / f"checkpoint-{self.documents:010d}.npz"
        self.model.save(model_file)
        state = {
            "format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
            "model": model_file.name, "source": self.source.spec, "position": position,
            "documents": self.documents, "malformed": dict(self.malformed),
            "stream_time": self.stream_time, "bucket": self._bucket, "since_snapshot": self._since_snapshot,
            "schedule": {"every_documents": self.every_documents, "every_seconds": self.every_seconds,
                         "speed": self.speed, "checkpoint_every": self.checkpoint_every},
        }
        path = atomic_write_bytes(self.out_dir / CHECKPOINT, json.dumps(state, indent=1).encode("utf-8"))
        for old in self.out_dir.glob("checkpoint-*.npz"):
            if old != model_file:
                old.unlink(missing_ok=True)
        summary.checkpoint = path
        summary.checkpoint_s += self._clock() - t0

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
        replay.documents = state["documents"]
        replay.malformed = Counter(state["malformed"])
        replay.stream_time = state["stream_time"]
        replay._bucket = state["bucket"]
        replay._since_snapshot = state["since_snapshot"]
        return replay


def read_checkpoint(out_dir) -> dict:
    """The state saved in ``out_dir/checkpoint.json``; :class:`CheckpointError` if there is
    none or it is not one."""
    path = Path(out_dir) / CHECKPOINT
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint in {out_dir} (no {CHECKPOINT})") from None
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path}: unreadable checkpoint ({error})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a replay checkpoint")
    if state.get("format_version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported checkpoint version {state.get('format_version')!r}")
    return state


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
