"""Replay a long archive on a Dask cluster: the snapshots of a sequential replay, computed in parallel.

The model's statistics are exact sums over documents, so a window of documents can be learned
anywhere and added later. A :class:`DaskReplay` runs in four steps:

1. **Warm-up, on the client.** The first documents are learned in order until the model has
   built its vocabulary (``warmup_documents``), exactly as :class:`~consumers.replay.Replay`
   does; the vocabulary is then frozen for everyone.
2. **Scan, on the workers.** The rest of the archive is cut into
   :class:`~consumers.work_units.WorkUnit` ranges of positions; each worker counts the documents
   of its units and reads their times (:func:`~consumers.work_units.scan_unit`). From these
   summaries the client runs the stream clock over the archive in order -- the model's
   :class:`~streamtopics.stream_clock.StreamClock`, so each time is clamped as the sequential
   replay clamps it -- and places every snapshot exactly where the sequential replay's schedule
   would (the same aligned :class:`~streamtopics.schedule.RefreshSchedule`: every N documents
   and/or whenever stream time crosses a multiple of the interval).
3. **Absorb, on the workers.** Each unit is cut at the snapshot positions into pieces; each
   piece is learned into a partial model (:func:`~consumers.work_units.absorb_piece`) and the
   pieces of one window are added together on the workers, each piece's clock started where the
   plan found the sequential one
   (:func:`~consumers.work_units.merge_partials`): partial states move between workers as
   Dask futures.
4. **Prefix merge and refresh, on the client, in window order.** The client adds window *i*'s
   merged partial to its model -- so snapshot *i* reflects exactly the documents before its
   position, the same sums as the sequential replay's up to the rounding of the addition order
   -- and refreshes, carrying the lineage (warm starts, topic ids, events) from one snapshot to
   the next. Meanwhile the workers absorb later windows.

Only one merged state per window reaches the client (what its refresh needs); pieces and
per-window sums stay on the workers. The client keeps at most ``2 x threads`` pieces in flight
and at most :data:`WINDOWS_AHEAD` windows beyond the one it refreshes, so a worker (one thread)
holds about four states at a time: the piece it absorbs, a finished piece waiting to be added,
its window's sum and that sum's copy during an addition.

Exact sums only: forgetting, sliding windows, an open vocabulary, drift- or model-scheduled
refreshes are refused (their state depends on the order of the whole stream). Snapshots and the
final checkpoint go to ``out_dir`` in the sequential replay's formats.

``dask.distributed`` is an optional dependency: ``pip install 'streamtopics[dask]'``.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.schedule import RefreshSchedule
from streamtopics.stream_clock import StreamClock

from .checkpoint import ArchivePosition, CheckpointStore
from .records import Malformed, Source, SourceError
from .replay import ReplaySummary, checkpoint_dir
from .snapshot_directory import SnapshotDirectory
from .sources.archive_file import ArchiveError, ArchiveFile
from .stream import StreamDriver
from .work_units import SPLITTABLE_FORMATS, PartialRecipe, WorkUnit, absorb_piece, merge_partials, plan_units, scan_unit

__all__ = ["DASK_MISSING", "DaskReplay", "DaskReplaySummary", "WINDOWS_AHEAD", "check_replayable", "connect"]

DASK_MISSING = "the Dask replay needs dask.distributed: pip install 'streamtopics[dask]'"
WINDOWS_AHEAD = 2  # windows absorbed beyond the one the client refreshes


def connect(scheduler: str):
    """A ``distributed.Client`` for ``tcp://HOST:PORT`` (a running ``dask scheduler``) or
    ``local:N`` (a ``LocalCluster`` of N single-threaded worker processes, closed with the
    client). ImportError naming the ``dask`` extra when dask.distributed is missing."""
    try:
        from distributed import Client
    except ImportError:
        raise ImportError(DASK_MISSING) from None
    if scheduler.startswith("local:"):
        try:
            n_workers = int(scheduler[len("local:"):])
        except ValueError:
            n_workers = 0
        if n_workers < 1:
            raise ValueError(f"bad scheduler {scheduler!r}: local:N needs a number of workers N >= 1")
        # a Client given cluster arguments starts its own LocalCluster and closes it with itself
        return Client(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    return Client(scheduler)


@dataclass
class DaskReplaySummary(ReplaySummary):
    """A :class:`~consumers.replay.ReplaySummary` with where the client's time went:
    ``warmup_s`` (learning the warm-up documents), ``wait_s`` (waiting for the workers),
    ``merge_s`` (adding windows to the model); ``refresh_s`` is the refreshes'."""

    warmup_s: float = 0.0
    wait_s: float = 0.0
    merge_s: float = 0.0
    units: int = 0
    pieces: int = 0


@dataclass(frozen=True)
class _Piece:
    unit: WorkUnit
    first: int  # of the unit's documents
    count: int
    window: int
    clock: float | None  # the stream clock before its first document


@dataclass(frozen=True)
class _Close:
    """Window ``window`` ends after ``documents`` documents: a snapshot, placed as the sequential
    replay places it ("after": counted after the document; "before_next": stream time crossed an
    interval at the next one; "end": the end of the archive)."""

    window: int
    documents: int
    kind: str


@dataclass
class _Warmup:
    documents: int = 0
    latest_interval: int | None = None
    after: int = 0  # the source position after the document that froze the vocabulary
    before_next: int = 0  # ... and when the next document arrives
    end: int = 0  # the position after the last item read


class DaskReplay:
    """Replay ``source`` into ``model`` on the Dask cluster of ``client``, writing the
    snapshots and the final checkpoint of a sequential :class:`~consumers.replay.Replay` with
    the same ``every_documents`` / ``every_seconds`` to ``out_dir``.

    ``unit_size``: source positions (lines, rows, files) per work unit (None: the archive in
    about four units per worker thread, 1,000 to 200,000 each). ``on_snapshot(snapshot, path)``
    and ``on_malformed(item)`` as for :class:`~consumers.replay.Replay`;
    ``on_progress(documents, total)`` now and then (total None until every unit is scanned).

    Examples
    --------
    >>> from consumers.dask_replay import DaskReplay, connect               # doctest: +SKIP
    >>> client = connect("local:2")                                          # doctest: +SKIP
    >>> source = open_source("news.jsonl.gz", time_field="date")             # doctest: +SKIP
    >>> DaskReplay(StreamingTopicModel(20), source, "runs/news", client,
    ...            every_documents=5000).run()                               # doctest: +SKIP
    """

    def __init__(self, model: StreamingTopicModel, source: Source, out_dir, client, *,
                 every_documents: int | None = None, every_seconds: float | None = None,
                 unit_size: int | None = None,
                 on_snapshot: Callable[[TopicSnapshot, Path], None] | None = None,
                 on_malformed: Callable[[Malformed], None] | None = None,
                 on_progress: Callable[[int, int | None], None] | None = None):
        for name, value in (("every_documents", every_documents), ("every_seconds", every_seconds),
                            ("unit_size", unit_size)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        check_replayable(model, source)
        self.model, self.source, self.out_dir, self.client = model, source, Path(out_dir), client
        self.every_documents, self.every_seconds = every_documents, every_seconds
        self.schedule = RefreshSchedule(every_documents, every_seconds, aligned=True)
        self.unit_size = unit_size
        self.on_snapshot, self.on_malformed, self.on_progress = on_snapshot, on_malformed, on_progress
        self.snapshots = SnapshotDirectory(self.out_dir)
        self.driver = StreamDriver(model, None, self.snapshots)
        self.malformed: Counter = Counter()
        self.documents = 0
        self.latest_interval: int | None = None  # the latest stream-time interval (the schedule's stream_mark)
        self._total: int | None = None  # documents in the archive, once every unit is scanned

    # ------------------------------------------------------------------ run
    def run(self) -> DaskReplaySummary:
        """Replay the whole archive; then checkpoint, as a sequential replay does at its end."""
        summary = DaskReplaySummary(malformed=self.malformed)
        started = time.perf_counter()
        warmup = self._warm_up()
        self.latest_interval = warmup.latest_interval
        summary.warmup_s = time.perf_counter() - started
        position = warmup.end
        last_snapshot = 0
        if self.model.vocabulary is not None:
            position, last_snapshot = self._replay_units(warmup, summary)
        if self.documents > last_snapshot and self.documents > self.model.documents_rejected:
            self._snapshot(position, summary)
            last_snapshot = self.documents
        counters = {
            "documents": self.documents, "malformed": dict(self.malformed), "stream_time": self.driver.stream_time,
            "bucket": self.latest_interval, "since_snapshot": self.documents - last_snapshot,
            "schedule": {"every_documents": self.every_documents, "every_seconds": self.every_seconds,
                         "speed": None, "checkpoint_every": None},
        }
        t0 = time.perf_counter()
        with CheckpointStore(checkpoint_dir(self.out_dir)) as store:
            self.driver.checkpoints = store
            summary.checkpoint = self.driver.checkpoint(ArchivePosition(self.source.spec, position),
                                                        counters).manifest_path
            self.driver.checkpoints = None
        summary.checkpoint_s = time.perf_counter() - t0
        summary.documents = summary.documents_this_run = self.documents
        summary.absorbed = self.model.documents_absorbed
        summary.rejected = Counter(self.model.rejections)
        summary.times_clamped = self.model.times_clamped
        summary.elapsed_s = time.perf_counter() - started
        self._progress(self.documents, self.documents)
        return summary

    # ------------------------------------------------------------------ 1. warm-up
    def _warm_up(self) -> _Warmup:
        """Learn documents in order until the vocabulary is frozen; note where that happened
        (the workers start there) and the latest stream-time interval seen."""
        warmup = _Warmup()
        items = iter(self.source)
        for item in items:
            if isinstance(item, Malformed):
                self._malformed(item)
                warmup.end = self.source.position
                continue
            self._observe_interval(warmup, self.driver.dated(item.timestamp))
            self.driver.learn(item.document, item.key, item.timestamp)
            self.documents += 1
            warmup.end = self.source.position
            if self.model.vocabulary is not None:
                break
        warmup.documents, warmup.after = self.documents, warmup.end
        warmup.before_next = warmup.end
        if self.model.vocabulary is not None:
            for item in items:  # where the next document arrives (its malformed records: the units count them)
                if not isinstance(item, Malformed):
                    break
                warmup.before_next = self.source.position
        items.close()  # the source's file; the workers read on from warmup.after
        return warmup

    def _observe_interval(self, warmup: _Warmup, timestamp: float | None) -> None:
        if self.every_seconds and timestamp is not None:
            interval = self.schedule.interval(timestamp)
            if warmup.latest_interval is None or interval > warmup.latest_interval:
                warmup.latest_interval = interval

    def _malformed(self, item: Malformed) -> None:
        self.malformed[item.reason] += 1
        if self.on_malformed is not None:
            self.on_malformed(item)

    # ------------------------------------------------------------------ 2.-4. on the cluster
    def _units(self, start: int) -> list[WorkUnit]:
        total = self._count_positions()
        threads = max(sum(self.client.nthreads().values()), 1)
        size = self.unit_size or min(max(math.ceil((total - start) / (4 * threads)), 1000), 200_000)
        return plan_units(start, total, size)

    def _count_positions(self) -> int:
        """About how many positions the archive has (files; lines for the others)."""
        if self.source.spec["format"] == "dir":
            return self.source.progress()[1]
        archive, lines = ArchiveFile(Path(self.source.spec["path"])), 0
        try:
            for block in archive.blocks():
                lines += block.count(b"\n")
        except ArchiveError:
            pass  # a truncated archive: the unit holding the break reports it
        finally:
            archive.close()
        return lines

    def _replay_units(self, warmup: _Warmup, summary: DaskReplaySummary) -> tuple[int, int]:
        """Steps 2 to 4; returns the position at the end of the archive and the documents at the
        last snapshot."""
        client, spec = self.client, self.source.spec
        units = self._units(warmup.after)
        summary.units = len(units)
        scans = [client.submit(scan_unit, spec, unit, pure=False) for unit in units]
        # each scan's summary comes to the client; its positions stay on the workers for absorb_piece
        heads = [client.submit(_first, scan) for scan in scans]
        positions = [client.submit(_second, scan) for scan in scans]
        del scans
        recipe = PartialRecipe.of(self.model)
        limit = 2 * max(sum(client.nthreads().values()), 1)
        plan = self._plan(warmup, units, heads)
        sums: dict[int, object] = {}  # window -> future of the sum of its pieces so far
        ends: dict[int, list] = {}  # window -> futures of its pieces' PieceEnd
        in_flight: list = []  # (future of a piece added to its window's sum, the piece's documents)
        closes: deque[_Close] = deque()
        state = {"refreshing": 0, "absorbed": warmup.documents, "next": None}

        def submit_more() -> bool:
            """Submit pieces while the bounds allow; False once the plan is exhausted."""
            done = [(f, n) for f, n in in_flight if f.done()]
            if done:
                state["absorbed"] += sum(n for _, n in done)
                in_flight[:] = [(f, n) for f, n in in_flight if not f.done()]
            while True:
                if state["next"] is None:
                    state["next"] = next(plan, None)
                    if state["next"] is None:
                        return False
                step = state["next"]
                if isinstance(step, _Close):
                    closes.append(step)
                    state["next"] = None
                    continue
                if len(in_flight) >= limit or step.window - state["refreshing"] > WINDOWS_AHEAD:
                    return True
                state["next"] = None
                result = client.submit(absorb_piece, spec, step.unit, positions[step.unit.index], step.first,
                                       step.count, recipe, step.clock, pure=False)
                partial = client.submit(_first, result)
                ends.setdefault(step.window, []).append(client.submit(_second, result))
                if step.window in sums:
                    partial = client.submit(merge_partials, sums[step.window], partial, pure=False)
                sums[step.window] = partial
                in_flight.append((partial, step.count))
                summary.pieces += 1

        def wait_for(future) -> None:
            while not future.done():
                submit_more()
                self._progress(state["absorbed"], self._total)
                _wait_any([future, *(f for f, _ in in_flight)])

        position, last_snapshot, more = warmup.end, 0, True
        while closes or more:
            more = submit_more()
            if not closes:
                if more:  # bounded: let the workers catch up
                    _wait_any([f for f, _ in in_flight])
                continue
            close = closes.popleft()
            state["refreshing"] = close.window
            end = self._add_window(sums.pop(close.window, None), ends.pop(close.window, []), wait_for, summary)
            if end is None:  # the window right after the warm-up holds no document
                position = warmup.after if close.kind == "after" else warmup.before_next
            else:
                position = end.after if close.kind == "after" else end.before_next
            self.documents = close.documents
            if close.kind != "end" or self.documents > self.model.documents_rejected:
                self._snapshot(position, summary)
                last_snapshot = self.documents
            state["refreshing"] = close.window + 1
        return position, last_snapshot

    def _add_window(self, future, piece_ends: list, wait_for: Callable, summary: DaskReplaySummary):
        """Wait for a window's partial sum (the workers go on meanwhile) and add it to the model;
        returns the PieceEnd of its last piece (None for an empty window)."""
        if future is None:
            return None
        t0 = time.perf_counter()
        wait_for(future)
        partial = future.result()
        piece_ends = self.client.gather(piece_ends)
        summary.wait_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.model.merge(partial)
        latest = max((e.latest_time for e in piece_ends if e.latest_time is not None), default=None)
        self.driver.advance(latest)
        self.model.ingest.clock.catch_up(latest)
        summary.merge_s += time.perf_counter() - t0
        return piece_ends[-1]

    def _plan(self, warmup: _Warmup, units: list[WorkUnit], heads: list) -> Iterator[_Piece | _Close]:
        """The pieces and window ends in archive order, as the unit scans come in: the sequential
        replay's schedule replayed over the scans' summaries."""
        every, latest = self.every_documents, warmup.latest_interval
        documents, window, last = warmup.documents, 0, 0
        clock = StreamClock(self.model.config.max_time_skew)
        clock.catch_up(self.driver.stream_time)
        if every and documents % every == 0:
            yield _Close(window, documents, "after")
            window, last = window + 1, documents
        for unit, head in zip(units, heads):
            scan = head.result()
            for item in scan.malformed:
                self._malformed(item)
            cuts: dict[int, str] = {}
            clocks = []  # before each of the unit's documents
            for d, t in enumerate(scan.times.tolist()):
                clocks.append(clock.time)
                dated = clock.advance(None if math.isnan(t) else t)
                if self.every_seconds and dated is not None:
                    interval = self.schedule.interval(dated)
                    if latest is None:
                        latest = interval  # the first time seen: no crossing
                    elif interval > latest:
                        cuts[documents + d] = "before_next"
                        latest = interval
            # counted after the document, before the next one's time is looked at
            for d in self.schedule.grid_points(documents, documents + scan.documents):
                cuts[d] = "after"
            start = documents
            for d in sorted(c for c in cuts if c > last):
                if d > start:
                    yield _Piece(unit, start - documents, d - start, window, clocks[start - documents])
                    start = d
                yield _Close(window, d, cuts[d])
                window, last = window + 1, d
            if documents + scan.documents > start:
                yield _Piece(unit, start - documents, documents + scan.documents - start, window,
                             clocks[start - documents])
            documents += scan.documents
        self._total, self.latest_interval = documents, latest
        if documents > last:
            yield _Close(window, documents, "end")

    def _progress(self, documents: int, total: int | None) -> None:
        if self.on_progress is not None:
            self.on_progress(documents, total)

    # ------------------------------------------------------------------ snapshots
    def _snapshot(self, position: int, summary: DaskReplaySummary) -> None:
        snapshot, path, seconds = self.driver.refresh({"documents": self.documents, "archive": position})
        summary.snapshots.append(path)
        summary.refresh_s += seconds
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot, path)


def _wait_any(futures: list, seconds: float = 0.25) -> None:
    """Until one of ``futures`` is done, or ``seconds`` passed."""
    from distributed import wait

    try:
        wait(futures, timeout=seconds, return_when="FIRST_COMPLETED")
    except TimeoutError:
        pass


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def check_replayable(model: StreamingTopicModel, source: Source) -> None:
    """What the Dask replay refuses, before any cluster is started: a source it cannot split
    (:class:`SourceError`), one not at its start, a model used before, or one whose state depends
    on the order of the whole stream (ValueError)."""
    fmt = source.spec.get("format")
    if fmt not in SPLITTABLE_FORMATS:
        raise SourceError(f"the Dask replay splits {', '.join(SPLITTABLE_FORMATS)} archives into work units, "
                          f"not {fmt}: replay this one without --dask")
    if source.position:
        raise ValueError("the Dask replay reads an archive from its start")
    refused = [name for name, on in (
        ("half_life (forgetting)", model.half_life is not None), ("window", model.window is not None),
        ("max_vocabulary (open vocabulary)", model.max_vocabulary is not None),
        ("drift_threshold", model.drift_threshold is not None),
        ("refresh_every / refresh_every_stream_seconds / refresh_every_wall_seconds (the replay owns the schedule)",
         model.schedule.automatic)) if on]
    if refused:
        raise ValueError(f"the Dask replay merges exact sums: a model with {', '.join(refused)} cannot be split")
    if model.documents_absorbed or model.snapshot is not None:
        raise ValueError("the Dask replay starts from a new model")
