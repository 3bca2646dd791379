"""The one time parser: message and record timestamps, and times given on the command line.

A time must also be plausible: from 0001-01-01 (the earliest date Python's ``datetime``, and so
every report, plot and event list, can show) to 2200-01-01 (:data:`EARLIEST`, :data:`LATEST`).
No document is dated two centuries ahead, and every time in epoch milliseconds (or micro-, or
nanoseconds) after 1970-03-26 lands past 2200 when read as seconds, so a wrong unit is caught
and named (:class:`ImplausibleTime`, reason ``implausible_time``) instead of moving the stream
clock by millennia. Read as seconds, such times once stopped replays at their first snapshot
(``year 52672 is out of range``) and left nothing to resume.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

EARLIEST = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc).timestamp()
_UNITS = (("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9))


class ImplausibleTime(ValueError):
    """A time that reads well but lies outside :data:`EARLIEST` .. :data:`LATEST`."""


def parse_time(value, time_format: str | None = None) -> float:
    """Seconds since the epoch from a number, a numeric or ISO 8601 string, or a ``strptime`` format.

    Times without a zone are UTC. Raises ValueError for anything else, NaN and infinities included,
    and its :class:`ImplausibleTime` for a time outside the plausible range.

    >>> parse_time("1987-02-26T15:01:01Z"), parse_time(3600), parse_time("3600.5")
    (541350061.0, 3600.0, 3600.5)
    >>> parse_time("26-FEB-1987 15:01:01.79 RM", "%d-%b-%Y %H:%M:%S.%f")
    541350061.79
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, (int, float)):
        try:
            return _finite(float(value), value)
        except OverflowError:  # an int of 310 digits or more: JSON allows it, float() raises
            raise ValueError(f"an integer of {len(str(abs(value)))} digits is not a finite time") from None
    if time_format:
        moment = _strptime_prefix(value, time_format)
    else:
        try:
            seconds = float(value)
        except ValueError:
            seconds = None
        if seconds is not None:
            return _finite(seconds, value)
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{value!r} is not a number or an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return plausible(moment.timestamp(), value)


def plausible(seconds: float, value=None) -> float:
    """``seconds`` if it lies in the plausible range, else :class:`ImplausibleTime` saying why
    (naming the unit when the number reads as epoch milliseconds, micro- or nanoseconds).

    >>> plausible(1_600_000_000_000)
    Traceback (most recent call last):
    ...
    consumers.times.ImplausibleTime: 1600000000000 is after 2200-01-01: epoch milliseconds? (2020-09-13T12:26:40Z); times are epoch seconds
    """
    if EARLIEST <= seconds < LATEST:
        return seconds
    shown = repr(seconds if value is None else value)
    if seconds < EARLIEST:
        raise ImplausibleTime(f"{shown} is before 0001-01-01")
    for unit, per_second in _UNITS:
        if seconds / per_second < LATEST:
            moment = datetime.fromtimestamp(seconds / per_second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise ImplausibleTime(f"{shown} is after 2200-01-01: epoch {unit}? ({moment}); times are epoch seconds")
    raise ImplausibleTime(f"{shown} is after 2200-01-01")


def _strptime_prefix(value: str, time_format: str) -> datetime:
    """``strptime`` that ignores text after the time (archives append codes to dates)."""
    try:
        return datetime.strptime(value, time_format)
    except ValueError as error:
        prefix = "unconverted data remains: "
        if not str(error).startswith(prefix):
            raise
        return datetime.strptime(value[: len(value) - len(str(error)[len(prefix):])], time_format)


def _finite(seconds: float, value) -> float:
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a finite time")
    return plausible(seconds, value)
