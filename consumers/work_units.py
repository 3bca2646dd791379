"""Work units of a distributed replay: what a Dask worker does with a slice of an archive.

A :class:`WorkUnit` is a range of source positions (lines, CSV rows or files: any position of
these formats starts a record, so the archive can be cut anywhere without reading it first). A
worker reads its unit twice, each time through the source's public API
(``open_source(**spec, start=...)``):

1. :func:`scan_unit`: the cheap pass, no tokenising: how many documents the unit holds, its
   malformed records, each document's time (the client runs the stream clock over them in
   archive order: its bound on skew depends on every earlier document, so no worker can apply
   it alone) and the position after each document (kept on the worker: the second pass starts
   from them);
2. :func:`absorb_piece`: once the client knows where the snapshot windows cut the unit, each
   piece (a run of the unit's documents inside one window) is learned into a fresh partial model
   over the frozen vocabulary: :class:`PartialRecipe`, its stream clock started where the
   client's plan says the sequential replay's stands.

Partials of one window are added with :func:`merge_partials`. Every function here is pure (a
task Dask reruns after losing a worker gives the same result), so they may run anywhere.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.text.tokenizer import Tokenizer
from streamtopics.text.vocabulary import Vocabulary

from .records import Malformed
from .sources import open_source
from .stream import StreamDriver

#: Formats whose every position (line, row, file) starts a record: a unit may begin anywhere.
SPLITTABLE_FORMATS = ("jsonl", "lines", "csv", "tsv", "dir")


@dataclass(frozen=True)
class WorkUnit:
    """Source positions ``start`` (exclusive) to ``stop`` (inclusive; None: to the end): the
    records a source opened at ``start`` yields while its position is at most ``stop``."""

    index: int
    start: int
    stop: int | None


@dataclass
class UnitScan:
    """What :func:`scan_unit` found: ``documents`` (records handed to the model),
    ``malformed`` records, and ``times``: each document's own time, as read (NaN: none)."""

    documents: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class PieceEnd:
    """Where a piece of documents ends in the archive: the position after its last document,
    the position a sequential replay holds when the next document arrives (after any malformed
    records between; at the end of the archive, after the last record), and the latest
    document time in the piece."""

    after: int
    before_next: int
    latest_time: float | None


@dataclass(frozen=True)
class PartialRecipe:
    """How to build an empty partial model like the replay's: its settings, its frozen
    vocabulary and its tokenizer."""

    settings: dict
    vocabulary: Vocabulary
    tokenizer: Tokenizer

    @classmethod
    def of(cls, model: StreamingTopicModel) -> "PartialRecipe":
        return cls(model.get_config(), model.vocabulary, model.tokenizer)

    def new_model(self) -> StreamingTopicModel:
        return StreamingTopicModel(**self.settings, vocabulary=self.vocabulary, tokenizer=self.tokenizer)


def plan_units(start: int, total: int, size: int) -> list[WorkUnit]:
    """Units of ``size`` positions from ``start`` to about ``total``; the last one runs to
    the end, whatever the count missed.

    >>> plan_units(10, 35, 10)
    [WorkUnit(index=0, start=10, stop=20), WorkUnit(index=1, start=20, stop=30), WorkUnit(index=2, start=30, stop=None)]
    """
    starts = list(range(start, max(total, start + 1), size))
    return [WorkUnit(i, a, starts[i + 1] if i + 1 < len(starts) else None) for i, a in enumerate(starts)]


def _items(spec: dict, start: int, stop: int | None):
    """``(item, position after it)`` for the items of the source after ``start``, up to ``stop``.
    (A truncated archive is reported at the position where it breaks off whatever the start: only
    the unit holding that position yields it.)"""
    source = open_source(**spec, start=start)
    for item in source:
        if stop is not None and source.position > stop:
            return
        if source.position > start:
            yield item, source.position


def scan_unit(spec: dict, unit: WorkUnit) -> tuple[UnitScan, np.ndarray]:
    """The unit's :class:`UnitScan` and the position after each of its documents."""
    scan, after, times = UnitScan(), [], []
    for item, position in _items(spec, unit.start, unit.stop):
        if isinstance(item, Malformed):
            scan.malformed.append(item)
            continue
        times.append(np.nan if item.timestamp is None else item.timestamp)
        after.append(position)
    scan.documents, scan.times = len(after), np.asarray(times, dtype=np.float64)
    return scan, np.asarray(after, dtype=np.int64)


def absorb_piece(spec: dict, unit: WorkUnit, after: np.ndarray, first: int, count: int,
                 recipe: PartialRecipe, clock: float | None) -> tuple[StreamingTopicModel, PieceEnd]:
    """Learn the unit's documents ``first`` to ``first + count - 1`` (``after``: the positions
    :func:`scan_unit` returned) into a new partial model whose stream clock starts at ``clock``
    (the sequential replay's before the first of them: the same times clamped); with where the
    piece ends. Documents are queued in a :class:`~consumers.stream.StreamDriver` and learned in
    batches, as the sequential replay learns them (the same sums as one at a time)."""
    model = recipe.new_model()
    model.ingest.clock.catch_up(clock)
    driver = StreamDriver(model, None)
    driver.advance(clock)
    start = unit.start if first == 0 else int(after[first - 1])
    learned, end_position, before_next = 0, start, None
    for item, position in _items(spec, start, None):
        if isinstance(item, Malformed):
            before_next = position
            continue
        if learned == count:
            break
        driver.queue(item.document, item.key, item.timestamp)
        learned += 1
        end_position = before_next = position
    driver.absorb()
    if learned != count:
        raise RuntimeError(f"{spec.get('path')} changed during the replay: expected {count} documents "
                           f"after position {start}, read {learned}")
    model.statistics()  # run the ingest kernel here, on the worker
    return model, PieceEnd(end_position, before_next, driver.stream_time)


def merge_partials(left: StreamingTopicModel, right: StreamingTopicModel) -> StreamingTopicModel:
    """``left + right``, as a new model: Dask may run a task again after losing a worker, so
    its inputs are never changed."""
    merged = copy.deepcopy(left)
    return merged.merge(right)
