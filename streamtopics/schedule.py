"""When periodic work is due: the one schedule of refreshes (and checkpoints) that the model,
every stream driver, the Dask planner, river's wrapper and the group refresher use.

Any one trigger makes the work due; :meth:`RefreshSchedule.restart` (the work was done) starts
every trigger again:

- ``every_documents``: that many documents since the restart;
- ``every_stream_seconds``: that many seconds of *stream* time, the documents' own dates (a Kafka
  timestamp): a replay of the archive refreshes at the same documents as the live run;
- ``every_wall_seconds``: that many seconds of *wall* time (``time.monotonic``);
- ``drift``: a :class:`~streamtopics.drift.DriftMonitor` fired.

``aligned=True`` puts the document and stream-time triggers on a grid fixed by the stream rather
than by the last restart: due at each multiple of ``every_documents`` counted from the stream's
start, and whenever stream time enters a new interval ``floor(t / every_stream_seconds)`` (an
exact integer comparison). A replay resumed from any checkpoint then refreshes at the same
documents as an uninterrupted one, and the Dask planner finds the same points from summaries.
``after_progress=True``: due only if some documents came since the restart (a consumer that
idles does not checkpoint or refresh the same state again).
"""

from __future__ import annotations

import math
import time


class RefreshSchedule:
    """Decides when periodic work is due (see the module docstring).

    >>> schedule = RefreshSchedule(every_stream_seconds=60)
    >>> schedule.restart(documents=0, stream_time=0.0)
    >>> schedule.due(documents=5, stream_time=59.0), schedule.due(documents=6, stream_time=61.0)
    (False, True)
    >>> schedule.last_reason
    'stream time'
    >>> grid = RefreshSchedule(every_documents=100, aligned=True)
    >>> grid.restart(documents=250)           # resumed mid-way: the grid point passed is 200
    >>> grid.due(documents=299), grid.due(documents=300)
    (False, True)
    """

    def __init__(self, every_documents: int | None = None, every_stream_seconds: float | None = None,
                 every_wall_seconds: float | None = None, drift=None, *, aligned: bool = False,
                 after_progress: bool = False):
        for name, value in (("every_documents", every_documents), ("every_stream_seconds", every_stream_seconds),
                            ("every_wall_seconds", every_wall_seconds)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive or None, not {value!r}")
        self.every_documents = every_documents
        self.every_stream_seconds = every_stream_seconds
        self.every_wall_seconds = every_wall_seconds
        self.drift = drift
        self.aligned = aligned
        self.after_progress = after_progress
        self.documents_mark = 0  # documents at the restart (aligned: the grid point at or before it)
        self.stream_mark: float | int | None = None  # stream time at the restart (aligned: its interval)
        self.wall_mark: float | None = None
        self.last_reason: str | None = None

    @property
    def automatic(self) -> bool:
        """Whether any trigger is set (else the work runs only on demand)."""
        return bool(self.every_documents or self.every_stream_seconds or self.every_wall_seconds
                    or self.drift is not None)

    def interval(self, stream_time: float) -> int:
        """The aligned stream-time interval ``stream_time`` falls in."""
        return math.floor(stream_time / self.every_stream_seconds)

    def grid_point(self, documents: int) -> int:
        """The last multiple of ``every_documents`` at or before ``documents`` (aligned)."""
        return documents - documents % self.every_documents if self.every_documents else documents

    def grid_points(self, after: int, through: int) -> range:
        """The aligned document counts in ``(after, through]`` at which the work falls due."""
        if not self.every_documents:
            return range(0)
        every = self.every_documents
        return range((after // every + 1) * every, through + 1, every)

    def _stream_position(self, stream_time):
        if stream_time is None or not self.every_stream_seconds:
            return None
        return self.interval(stream_time) if self.aligned else stream_time

    def restart(self, documents: int, stream_time: float | None = None) -> None:
        """The work was done at ``documents`` (and ``stream_time``): every trigger starts again."""
        self.documents_mark = self.grid_point(documents) if self.aligned else documents
        position = self._stream_position(stream_time)
        if position is not None or not self.aligned:
            self.stream_mark = position
        self.wall_mark = time.monotonic() if self.every_wall_seconds else None
        if self.drift is not None:
            self.drift.reset()

    def postpone(self, documents: int) -> None:
        """Count documents from ``documents`` again (a refresh the stream could not support yet),
        leaving the clocks and the drift baseline as they are."""
        self.documents_mark = documents

    def due(self, documents: int, stream_time: float | None = None) -> bool:
        """Whether the work is due after ``documents`` (at ``stream_time``); the trigger that
        fired is left in :attr:`last_reason`. The first stream time seen starts the stream clock."""
        if self.after_progress and documents <= self.documents_mark:
            return False
        if self.every_documents and documents - self.documents_mark >= self.every_documents:
            self.last_reason = "documents"
            return True
        position = self._stream_position(stream_time)
        if position is not None:
            if self.stream_mark is None:
                self.stream_mark = position
            elif position - self.stream_mark >= (1 if self.aligned else self.every_stream_seconds):
                self.last_reason = "stream time"
                return True
        if self.every_wall_seconds:
            now = time.monotonic()
            if self.wall_mark is None:
                self.wall_mark = now
            elif now - self.wall_mark >= self.every_wall_seconds:
                self.last_reason = "wall time"
                return True
        if self.drift is not None and self.drift.fired:
            self.last_reason = "drift"
            return True
        return False

    def wall_seconds_left(self) -> float | None:
        """Wall-clock seconds until the wall-time trigger falls due (None: no wall trigger); a
        loop that only waits for it sleeps this long."""
        if not self.every_wall_seconds:
            return None
        if self.wall_mark is None:
            return self.every_wall_seconds
        return max(self.every_wall_seconds - (time.monotonic() - self.wall_mark), 0.0)

    def documents_until_due(self, documents: int) -> int | None:
        """Documents that may come before the work can fall due (None: no trigger counts them;
        0: any document may make it due, a clock or drift being set)."""
        if self.every_stream_seconds or self.every_wall_seconds or self.drift is not None:
            return 0
        if not self.every_documents:
            return None
        return max(self.every_documents - (documents - self.documents_mark), 0)

    def state_dict(self) -> dict:
        """The marks a checkpoint keeps (the wall clock starts again on load)."""
        return {"documents_mark": self.documents_mark, "stream_mark": self.stream_mark}

    def load_state_dict(self, state: dict) -> None:
        self.documents_mark = int(state["documents_mark"])
        self.stream_mark = state["stream_mark"]
