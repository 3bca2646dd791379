"""The one stream driver: learn -> refresh trigger -> snapshot directory -> checkpoint.

Both stream drivers of this package run their documents through a :class:`StreamDriver`: the
archive :class:`~consumers.replay.Replay` and the Kafka
:class:`~consumers.kafka_consumer.TopicModelConsumer`. What differs is only what the caller
brings: how records are read and decoded (:mod:`consumers.sources`, :mod:`consumers.messages`),
what a stream position is (the archive position; Kafka offsets per partition), when a refresh is
due (a :class:`~streamtopics.schedule.RefreshSchedule`: on the wall clock for the consumer, aligned
on document counts and stream-time intervals for the replay), where checkpoints go (a
:class:`~consumers.checkpoint.CheckpointStore`, one format for both: the consumer's checkpoint
directory with Kafka offsets, a replay's ``checkpoints/`` with its archive position) and what is
flushed and committed around them.

Commit order -- the exactly-once argument, in the style of Quix Streams' checkpoints (state
first, position last). :meth:`StreamDriver.checkpoint` is its only implementation:

1. flush the outputs, so every output derived from the documents about to be checkpointed
   (snapshots, document topics, dead letters) is delivered (Kafka: the producer; an archive
   replay: nothing to flush);
2. write the model's state file (:meth:`StreamingTopicModel.save`: statistics, vocabulary,
   configuration, latest snapshot; atomic, SHA-256 per array);
3. write the manifest that names the state file and the stream position it reflects,
   atomically and only once the state file is on disk, so a manifest marks a complete
   checkpoint;
4. drop the checkpoints beyond those kept;
5. commit the same position upstream (Kafka: the consumer group's offsets, tagged with this
   member's id; an archive: nothing).

On start the newest good checkpoint is restored and the stream resumes from *its* position, not
from anything committed upstream. A crash before step 3 loses only in-memory work, which is read
again from the previous checkpoint's position; a crash between 3 and 5 leaves the committed
position behind the checkpoint, which is harmless because the checkpoint wins. So no document is
lost or counted twice. Outputs are at-least-once: those produced after the last checkpoint are
produced again after a crash.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Protocol

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.ingest import TEXT_BATCH
from streamtopics.stream_clock import StreamClock

from .snapshot_directory import SnapshotDirectory


class Checkpoints(Protocol):
    """Where a driver's checkpoints go: steps 2-4 of the commit order, in that order."""

    def save(self, model: StreamingTopicModel, position, counters: dict | None = None):
        ...


class StreamDriver:
    """``model`` fed documents in stream order, refreshed into ``snapshots`` and checkpointed to
    ``checkpoints`` (see the module docstring; may be set later, before the first checkpoint).
    ``stream_time`` is the latest document time learned or queued (None until one had a time),
    bounded by the model's ``max_time_skew`` as the model bounds it (:mod:`streamtopics.stream_clock`).

    Documents are either learned at once (:meth:`learn`) or queued (:meth:`queue`) and learned
    together by :meth:`absorb`, through :meth:`StreamingTopicModel.learn_many`: raw text then
    takes its compiled batch path, with the statistics and rejections of one document at a time.
    :meth:`refresh` and :meth:`checkpoint` absorb the queue first, so neither can miss a queued
    document; whoever reads the model otherwise between documents calls :meth:`absorb` first."""

    def __init__(self, model: StreamingTopicModel, checkpoints: Checkpoints | None, snapshots: SnapshotDirectory | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.model = model
        self.checkpoints = checkpoints
        self.snapshots = snapshots
        self.clock = clock
        self.stream_clock = StreamClock(model.config.max_time_skew)  # the model's rule, one document ahead
        self._documents: list = []  # the queue, as learn_many's three columns
        self._keys: list = []
        self._times: list = []

    @property
    def stream_time(self) -> float | None:
        return self.stream_clock.time

    # ------------------------------------------------------------------ learn
    def dated(self, timestamp: float | None) -> float | None:
        """The time the next document, dated ``timestamp``, will count as (at most
        ``max_time_skew`` after the clock): what a schedule or the pacing should look at."""
        return self.stream_clock.bound(timestamp)

    def advance(self, timestamp: float | None) -> None:
        """Stream time moves to ``timestamp``, a reading of this clock (a checkpoint's), if it
        is later (it never goes back)."""
        self.stream_clock.catch_up(timestamp)

    def learn(self, document, key=None, timestamp: float | None = None) -> None:
        """Feed one decoded document now (the model may reject it: its ``on_reject`` says so)."""
        self.absorb()
        self.stream_clock.advance(timestamp)
        self.model.learn_one(document, key, stream_time=timestamp)

    def queue(self, document, key=None, timestamp: float | None = None) -> None:
        """Queue one decoded document behind those queued before it; a full queue
        (``TEXT_BATCH`` documents, one compiled pass) is absorbed at once."""
        self.stream_clock.advance(timestamp)
        self._documents.append(document)
        self._keys.append(key)
        self._times.append(timestamp)
        if len(self._documents) >= TEXT_BATCH:
            self.absorb()

    def absorb(self) -> None:
        """Learn the queued documents, in order, each with its key and time (the model may reject
        some: its ``on_reject`` says so, in queue order)."""
        if self._documents:
            documents, keys, times = self._documents, self._keys, self._times
            self._documents, self._keys, self._times = [], [], []
            self.model.learn_many(documents, keys, times)

    # ------------------------------------------------------------------ refresh
    def refresh(self, position) -> tuple[TopicSnapshot, Path | None, float]:
        """Refresh the topics now, recording ``position`` and the stream time in the snapshot,
        and write it to the snapshot directory. Returns the snapshot, its file (None without a
        directory) and the seconds it took."""
        self.absorb()
        t0 = self.clock()
        snapshot = self.model.refresh(position=position, stream_time=self.stream_time)
        path = None if self.snapshots is None else self.snapshots.save(snapshot)
        return snapshot, path, self.clock() - t0

    # ------------------------------------------------------------------ checkpoint
    def checkpoint(self, position, counters: dict | None = None, *, flush: Callable[[], None] | None = None,
                   commit: Callable[[object], None] | None = None):
        """Checkpoint the model at ``position``: the commit order of the module docstring.
        ``flush`` is step 1, ``commit(saved)`` step 5; returns what the store saved."""
        self.absorb()
        if flush is not None:
            flush()                                                       # 1
        saved = self.checkpoints.save(self.model, position, counters)     # 2, 3, 4
        if commit is not None:
            commit(saved)                                                 # 5
        return saved
