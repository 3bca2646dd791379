"""Bounded history of the topics over stream time, for monitoring and plots (issue 4).

Every published snapshot adds one record: its version, the documents it reflects, its stream time
and the prevalence of each topic id (and, from snapshots, each topic's label and first
``RECORD_WORDS`` words: :meth:`TopicHistory.add_snapshot`). The events (births, deaths, changes) of every snapshot are
logged with the same stamps. Memory is bounded whatever the length of the stream:

* records: at most ``capacity``. When full, every other record except the newest is dropped, so
  the history always spans the whole stream, at a resolution that halves each time it fills (the
  spacing between kept records doubles). Each record holds one float per topic: memory is
  O(capacity x K) (times ``RECORD_WORDS`` with the words).
* events: the newest ``max_events`` (a ring buffer); older ones are counted in
  ``events_dropped``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .snapshot import DISPLAY_RELEVANCE

RECORD_WORDS = 5  # words of each topic a record keeps (by relevance, as displayed)


class TopicHistory:
    """Prevalence per topic id over stream time, and the log of topic events.

    Examples
    --------
    >>> history = TopicHistory(capacity=4)
    >>> for v in range(1, 10):
    ...     history.add(version=v, documents_seen=100 * v, stream_time=None,
    ...                 topic_ids=[0, 1], prevalence=[0.5, 0.5], events=[])
    >>> len(history), history.records[0]["version"], history.records[-1]["version"]
    (3, 1, 9)
    >>> history.series(1)[0][-1]
    900
    """

    def __init__(self, capacity: int = 512, max_events: int = 10_000):
        if capacity < 2:
            raise ValueError("a history needs a capacity of at least 2 records")
        self.capacity = int(capacity)
        self.max_events = int(max_events)
        self.records: list[dict] = []
        self.events: deque = deque(maxlen=self.max_events)
        self.events_seen = 0

    def __len__(self) -> int:
        return len(self.records)

    @property
    def events_dropped(self) -> int:
        return self.events_seen - len(self.events)

    def add(self, version: int, documents_seen: int, stream_time, topic_ids, prevalence, events,
            labels=None, words=None) -> None:
        """Record one snapshot; ``labels`` and ``words`` (lists of words), when given, are in
        ``topic_ids`` order."""
        stamp = {"version": int(version), "documents_seen": int(documents_seen), "stream_time": stream_time}
        record = {**stamp, "prevalence": {int(t): float(p) for t, p in zip(topic_ids, prevalence)}}
        if labels is not None:
            record["labels"] = {int(t): str(label) for t, label in zip(topic_ids, labels)}
        if words is not None:
            record["words"] = {int(t): list(w) for t, w in zip(topic_ids, words)}
        self.records.append(record)
        if len(self.records) > self.capacity:
            newest = self.records[-1]
            self.records = self.records[:-1:2] + [newest]
        for event in events:
            self.events.append({**stamp, **event})
            self.events_seen += 1

    def add_snapshot(self, snapshot) -> None:
        top = snapshot.top_words(RECORD_WORDS, DISPLAY_RELEVANCE)
        self.add(snapshot.version, snapshot.documents_seen, snapshot.stream_time, snapshot.topic_ids,
                 np.asarray(snapshot.prevalence), snapshot.events, snapshot.labels,
                 [[w for w, _ in top[t]] for t in snapshot.topic_ids])

    def topic_ids(self) -> list[int]:
        """Every topic id that appears in the kept records, in order of first appearance."""
        seen: dict[int, None] = {}
        for record in self.records:
            seen.update(dict.fromkeys(record["prevalence"]))
        return list(seen)

    def series(self, topic_id: int, by: str = "documents_seen") -> tuple[list, list[float]]:
        """``(positions, prevalences)`` of one topic over the records where it exists; ``by`` is
        ``"documents_seen"``, ``"stream_time"`` or ``"version"``."""
        xs, ys = [], []
        for record in self.records:
            if topic_id in record["prevalence"]:
                xs.append(record[by])
                ys.append(record["prevalence"][topic_id])
        return xs, ys

    def to_dict(self) -> dict:
        return {"capacity": self.capacity, "max_events": self.max_events, "records": self.records,
                "events": list(self.events), "events_seen": self.events_seen}

    @classmethod
    def from_dict(cls, data: dict) -> "TopicHistory":
        history = cls(data["capacity"], data["max_events"])
        history.records = [{**r, **{part: {int(t): v for t, v in r[part].items()}
                                        for part in ("prevalence", "labels", "words") if part in r}}
                           for r in data["records"]]
        history.events.extend(data["events"])
        history.events_seen = int(data["events_seen"])
        return history
