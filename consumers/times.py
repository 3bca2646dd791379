"""The one time parser: message and record timestamps, and times given on the command line."""

from __future__ import annotations

import math
from datetime import datetime, timezone


def parse_time(value, time_format: str | None = None) -> float:
    """Seconds since the epoch from a number, a numeric or ISO 8601 string, or a ``strptime`` format.

    Times without a zone are UTC. Raises ValueError for anything else, NaN and infinities included.

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
    return moment.timestamp()


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
    return seconds
