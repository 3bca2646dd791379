"""The stream clock: the latest document time, which no one misdated document can move far.

Stream time drives forgetting (``half_life_unit="stream"``), stream-time refreshes and the
replay's aligned snapshot grid, and it never goes back. Left unbounded, one document dated
years ahead (a typo in the year, a timestamp in milliseconds read as seconds) moved it by years
at once: forgetting then erased nearly all of the model's history, and every later document
counted as years old. So a document dated more than ``max_skew`` seconds after the clock counts
as dated exactly ``max_skew`` after it -- it is absorbed, its time clamped and counted in
:attr:`StreamClock.clamped` -- and the clock moves at most ``max_skew`` per document. A genuine
gap longer than that (a stream that was down for a month) is caught up over several documents,
``max_skew`` each, all counted.

The default, 7 days (:data:`DEFAULT_MAX_SKEW`), lets a news stream's weekends and holidays
through unclamped (Reuters-21578 has gaps of 3 days) while one document can fade the history by
at most ``1 - 2^(-7 / half-life in days)`` (15 % for a 30-day half-life, instead of all of it).
The model, the stream drivers, the replay's snapshot grid and the Dask replay's plan all apply
this one rule, so they agree on every document's time.
"""

from __future__ import annotations

DEFAULT_MAX_SKEW = 7 * 86400.0


class StreamClock:
    """The latest document time (``time``; None before any), moved by :meth:`advance`.

    >>> clock = StreamClock(max_skew=100.0)
    >>> clock.advance(1000.0), clock.advance(5000.0), clock.advance(990.0), clock.time, clock.clamped
    (1000.0, 1100.0, 990.0, 1100.0, 1)
    """

    def __init__(self, max_skew: float | None = DEFAULT_MAX_SKEW):
        self.max_skew = max_skew
        self.time: float | None = None
        self.clamped = 0  # documents whose time was clamped

    def bound(self, time: float | None) -> float | None:
        """The time a document dated ``time`` counts as: at most ``max_skew`` after the clock."""
        if time is None or self.time is None or self.max_skew is None:
            return time
        return min(time, self.time + self.max_skew)

    def advance(self, time: float | None) -> float | None:
        """Date one document: its bounded time (:meth:`bound`), counted if clamped; the clock
        moves there if that is later (it never goes back)."""
        bounded = self.bound(time)
        if bounded is not None and bounded != time:
            self.clamped += 1
        self.catch_up(bounded)
        return bounded

    def catch_up(self, time: float | None) -> None:
        """Move to ``time`` if later, unbounded: a reading of this clock (a checkpoint's, a
        partial stream's), not a document's date."""
        if time is not None:
            self.time = time if self.time is None else max(self.time, time)
