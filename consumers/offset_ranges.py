"""Kafka positions as a checkpoint and a snapshot write them: the offset ranges a consumer's
statistics count, per partition (``counters["ranges"]``: ``"topic/partition" -> [[start, end), ...]``,
so that a refresher can prove that no document is in two partial states,
:func:`consumers.store.overlaps`), and the next offsets as a snapshot's position and a log line."""

from __future__ import annotations


class OffsetRanges:
    """Keeps ``ranges`` (a checkpoint's ``counters["ranges"]``, changed in place) up to date as a
    consumer reads: :meth:`open` where reading of a partition (re)starts, :meth:`extend` as it goes."""

    def __init__(self, ranges: dict):
        self.ranges = ranges

    def open(self, position: tuple[str, int], start: int) -> None:
        """Counting of ``position`` (re)starts at ``start``: a new range unless it continues the last."""
        spans = self.ranges.setdefault(f"{position[0]}/{position[1]}", [])
        if not spans or spans[-1][1] != start:
            spans.append([start, start])

    def extend(self, position: tuple[str, int], end: int) -> None:
        """``position`` is counted up to ``end`` (exclusive)."""
        spans = self.ranges.get(f"{position[0]}/{position[1]}")
        if spans:
            spans[-1][1] = end
        else:  # placed before ranges were recorded (an older checkpoint): count from here
            self.open(position, end)


def positions_json(positions: dict[tuple[str, int], int]) -> dict:
    """``{(topic, partition): offset}`` as a snapshot's position: ``{topic: {"partition": offset}}``."""
    out: dict = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def offsets_text(positions: dict[tuple[str, int], int]) -> str:
    """``{(topic, partition): offset}`` for a log line."""
    return ", ".join(f"{t}/{p}@{o}" for (t, p), o in sorted(positions.items())) or "none"
