"""What the monitoring service reads: a :class:`TopicSource` (the latest snapshot, a bounded
prevalence history, the events, the metrics, whether the stream is alive), fed in-process
(:class:`LiveSource`) or by re-reading a snapshot directory (:class:`SnapshotDirectorySource`),
and the bounds of every response."""

from __future__ import annotations

import bisect
import json
import logging
import math
import threading
import time
from collections import deque
from pathlib import Path

from streamtopics import TopicSnapshot
from streamtopics.snapshot import EVENT_TYPES

from ..metrics import ServiceMetrics
from ..run_record import read_run_record
from ..snapshot_directory import SnapshotDirectory


log = logging.getLogger("consumers.service")

MAX_TOP_N = 100           # words per topic in any response
DEFAULT_TOP_N = 10
MAX_LIMIT = 1000          # history entries / events in any response
DEFAULT_HISTORY = 200
DEFAULT_EVENTS = 100
HISTORY_KEPT = 1000       # snapshots remembered (prevalence only; the full matrix of the latest)
EVENTS_KEPT = 5000
REPRESENTATIVES_KEPT = 10  # documents per topic in any response
REPRESENTATIVE_CHARS = 600  # characters of each representative document's text
REPRESENTATIVE_WORDS = 20   # words of each representative document


def _per_topic(value, topic_ids) -> dict:
    """A snapshot's per-topic field -- a list in topic order or a mapping by topic id (keys
    int or str) -- as {topic id: value}; {} when absent or of neither shape."""
    if isinstance(value, dict):
        return {t: value[key] for t in topic_ids for key in (t, str(t)) if key in value}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        value = value.tolist() if hasattr(value, "tolist") else value
        if len(value) == len(topic_ids):
            return dict(zip(topic_ids, value))
    return {}


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _document(value) -> dict | None:
    """A representative document as {"text", "words", "key", "score"}: the beginning of its text
    (cut to :data:`REPRESENTATIVE_CHARS`; None when the model saw no text), its most frequent
    words, its key, and its weight on the topic. A bare string is its text; a document with
    neither text nor words is left out."""
    if isinstance(value, str):
        value = {"text": value}
    if not isinstance(value, dict):
        return None
    text = value.get("text", value.get("document"))
    text = text[:REPRESENTATIVE_CHARS] if isinstance(text, str) else None
    words = value.get("words")
    words = [w for w in words if isinstance(w, str)][:REPRESENTATIVE_WORDS] if isinstance(words, (list, tuple)) else []
    if text is None and not words:
        return None
    key = value.get("key", value.get("id"))
    score = value.get("score", value.get("weight", value.get("probability")))
    return {"text": text, "words": words, "key": None if key is None else str(key)[:200],
            "score": None if score is None else _number(score)}


def topic_extras(snapshot: TopicSnapshot, data: dict | None = None) -> dict[int, dict]:
    """Each topic's ``label``, ``coherence`` and ``representatives`` where the snapshot has them
    (newer snapshots; older runs have none: then None, None, []). Read from the snapshot's
    attributes ``labels``, ``coherence``, ``representatives`` and, for a snapshot read from a
    file, from its JSON ``data`` (the same names at the top level, or ``label``, ``coherence``,
    ``representatives`` in each topic's entry)."""
    ids = list(snapshot.topic_ids)
    found = {name: {} for name in ("labels", "coherence", "representatives")}
    if data is not None:
        entries = [t for t in data.get("topics") or () if isinstance(t, dict)]
        for name, key in (("labels", "label"), ("coherence", "coherence"), ("representatives", "representatives")):
            found[name].update(_per_topic(data.get(name), ids))
            found[name].update({t["id"]: t[key] for t in entries if key in t and t.get("id") in ids})
    for name in found:
        found[name].update(_per_topic(getattr(snapshot, name, None), ids))
    extras = {}
    for topic in ids:
        label = found["labels"].get(topic)
        documents = found["representatives"].get(topic)
        documents = [_document(d) for d in documents] if isinstance(documents, (list, tuple)) else []
        extras[topic] = {
            "label": label if isinstance(label, str) and label else None,
            "coherence": _number(found["coherence"].get(topic)),
            "representatives": [d for d in documents if d is not None][:REPRESENTATIVES_KEPT],
        }
    return extras


def _summary(version: int, documents_seen: int, stream_time, topic_ids, prevalence) -> dict:
    return {"version": int(version), "documents_seen": int(documents_seen), "stream_time": stream_time,
            "prevalence": {str(t): round(float(p), 6) for t, p in zip(topic_ids, prevalence)}}


class TopicSource:
    """What the service reads: the latest snapshot, a bounded prevalence history, the events,
    a :class:`~consumers.metrics.ServiceMetrics` and whether the stream is alive.

    Subclasses feed :meth:`_add`; :meth:`poll` is called before every request (a no-op for
    sources that are pushed to)."""

    kind = "source"

    def __init__(self, *, stall_after: float | None = None, history_kept: int = HISTORY_KEPT,
                 events_kept: int = EVENTS_KEPT, metrics: ServiceMetrics | None = None):
        self.stall_after = stall_after
        self.metrics = metrics or ServiceMetrics()
        self._lock = threading.RLock()
        self._snapshot: TopicSnapshot | None = None
        self._history: list[dict] = []           # sorted by version
        self._history_kept = int(history_kept)
        self._events: deque = deque(maxlen=int(events_kept))
        self._top: tuple[int, dict] | None = None  # (version, top MAX_TOP_N words by topic id)
        self._extras: dict[int, dict] = {}         # label, coherence, representatives of the latest
        self.finished = False

    # -- writers
    def _add(self, summary: dict, events: list[dict], snapshot: TopicSnapshot | None,
             data: dict | None = None) -> None:
        with self._lock:
            versions = [h["version"] for h in self._history]
            at = bisect.bisect_left(versions, summary["version"])
            if at < len(versions) and versions[at] == summary["version"]:
                self._history[at] = summary
            else:
                self._history.insert(at, summary)
            del self._history[: max(0, len(self._history) - self._history_kept)]
            stamp = {"version": summary["version"], "documents_seen": summary["documents_seen"],
                     "stream_time": summary["stream_time"]}
            self._events.extend({**stamp, **event} for event in events)
            if snapshot is not None and (self._snapshot is None or snapshot.version >= self._snapshot.version):
                self._snapshot = snapshot
                self._top = None
                self._extras = topic_extras(snapshot, data)

    def _reset(self) -> None:
        with self._lock:
            self._snapshot, self._history, self._top, self._extras = None, [], None, {}
            self._events.clear()

    # -- readers
    def poll(self) -> None:
        """Bring the source up to date (sources that are pushed to have nothing to do)."""

    def snapshot(self) -> TopicSnapshot | None:
        with self._lock:
            return self._snapshot

    def top_words(self) -> tuple[TopicSnapshot | None, dict]:
        """The latest snapshot and its topics' :data:`MAX_TOP_N` top words (computed once per
        snapshot, on the reading thread, so publishing costs the stream nothing)."""
        with self._lock:
            snapshot, top = self._snapshot, self._top
        if snapshot is None:
            return None, {}
        if top is None or top[0] != snapshot.version:
            top = (snapshot.version, snapshot.top_words(min(MAX_TOP_N, len(snapshot.vocabulary))))
            with self._lock:
                if self._snapshot is snapshot:
                    self._top = top
        return snapshot, top[1]

    def extras(self, topic: int) -> dict:
        """The latest snapshot's ``label``, ``coherence`` and ``representatives`` of ``topic``
        (:func:`topic_extras`)."""
        with self._lock:
            return self._extras.get(topic, {"label": None, "coherence": None, "representatives": []})

    def history(self, limit: int) -> list[dict]:
        with self._lock:
            return list(self._history[-limit:])

    def events(self, limit: int, types=None, since_version: int | None = None, topic: int | None = None) -> list[dict]:
        with self._lock:
            chosen = [e for e in self._events
                      if (not types or e["type"] in types)
                      and (since_version is None or e["version"] > since_version)
                      and (topic is None or e.get("topic") == topic)]
        return chosen[-limit:]

    def stalled(self) -> bool:
        return False

    def state(self) -> dict:
        """Readiness and why not."""
        snapshot = self.snapshot()
        stalled = self.stalled()
        self.metrics.set_stalled(stalled)
        reasons = []
        if snapshot is None:
            reasons.append("no snapshot yet")
        if stalled:
            reasons.append(f"stalled: no progress for more than {self.stall_after:g} s")
        return {"source": self.kind, "ready": not reasons, "reasons": reasons, "stalled": stalled,
                "finished": self.finished, "version": None if snapshot is None else snapshot.version}


class LiveSource(TopicSource):
    """A source fed in-process by whatever runs the model (a replay, a Kafka consumer).

    Call :meth:`publish` after each refresh and :meth:`update_metrics` (or :meth:`heartbeat`)
    regularly from the feeding thread; with no sign of life for ``stall_after`` seconds the
    source counts as stalled (readiness fails) until the next one. :meth:`finish` says the
    stream ended normally: it is then never stalled. Everything here is cheap (no JSON, no
    sorting), so the stream hardly pays for being watched.
    """

    kind = "live"

    def __init__(self, *, stall_after: float | None = 60.0, **options):
        super().__init__(stall_after=stall_after, **options)
        self._beat = time.monotonic()
        self._run_dir: Path | None = None  # the run directory of the replay feeding it, if any

    def publish(self, snapshot: TopicSnapshot, model=None) -> None:
        """A new snapshot (its ``events`` are the changes since the previous one); with the
        ``model`` that made it, the metrics are refreshed too (refresh duration included)."""
        self._add(_summary(snapshot.version, snapshot.documents_seen, snapshot.stream_time,
                           snapshot.topic_ids, snapshot.prevalence), list(snapshot.events), snapshot)
        self.metrics.update(snapshot_version=snapshot.version, n_topics=snapshot.n_topics,
                            vocabulary_size=len(snapshot.vocabulary))
        if model is not None:
            self.metrics.update_from_model(model)
        self.heartbeat()

    # hooks for consumers.replay.Replay: on_snapshot=live.on_snapshot, run(on_progress=live.on_progress)
    def on_snapshot(self, snapshot: TopicSnapshot, path=None, model=None) -> None:
        self.publish(snapshot, model)

    def on_progress(self, replay) -> None:
        self.update_metrics(model=replay.model, malformed=dict(replay.malformed))
        self._run_dir = replay.out_dir

    def update_metrics(self, model=None, *, consumer: dict | None = None, lag: dict | None = None,
                       **values) -> None:
        """Refresh the metrics from a :class:`~streamtopics.StreamingTopicModel` and/or a
        summary dict of :meth:`ServiceMetrics.as_dict` (another process's),
        ``lag`` per partition, or explicit ``values`` (:meth:`ServiceMetrics.update`). Also a
        heartbeat."""
        if model is not None:
            self.metrics.update_from_model(model, lag=lag)
        if consumer is not None:
            self.metrics.update_from_consumer(consumer)
        if values or (lag is not None and model is None):
            self.metrics.update(lag=lag, **values)
        self.heartbeat()

    def heartbeat(self) -> None:
        self._beat = time.monotonic()

    def finish(self) -> None:
        """The stream has ended (the service may keep serving the last snapshot). Fed by a
        replay (:meth:`on_progress`), the service then reports the figures the run recorded
        (:mod:`consumers.run_record`), its own ingest rate included."""
        self.finished = True
        if self._run_dir is not None:
            self.metrics.set_run(read_run_record(self._run_dir))

    def stalled(self) -> bool:
        return (self.stall_after is not None and not self.finished
                and time.monotonic() - self._beat > self.stall_after)


class SnapshotDirectorySource(TopicSource):
    """The snapshots a replay or consumer writes to ``path`` (a :class:`SnapshotDirectory`),
    re-read when new files appear (checked at most every ``min_poll_interval`` seconds, when a
    request comes). With ``stall_after`` the source counts as stalled when no snapshot file has
    been written for that many seconds (leave it None for a finished run). Only the latest
    snapshot is kept whole; of older ones (at most ``history_kept``, the newest) the prevalence
    and events."""

    kind = "directory"

    def __init__(self, path, *, stall_after: float | None = None, min_poll_interval: float = 0.5, **options):
        super().__init__(stall_after=stall_after, **options)
        self.path = Path(path)
        self.snapshots = SnapshotDirectory(self.path)
        self.min_poll_interval = float(min_poll_interval)
        self._seen: dict[str, float] = {}   # file name -> mtime when read
        self._polled = -math.inf
        self._newest_mtime: float | None = None
        self._poll_lock = threading.Lock()
        self.unreadable: dict[str, str] = {}

    def _files(self) -> list[tuple[int, str, float]]:
        files = []
        for path in self.snapshots.files():
            try:
                files.append((SnapshotDirectory.version_of(path), path.name, path.stat().st_mtime))
            except OSError:
                continue
        return files

    def poll(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._polled < self.min_poll_interval:
            return
        with self._poll_lock:
            if not force and now - self._polled < self.min_poll_interval:
                return
            self._polled = now
            files = self._files()
            present = {name: mtime for _, name, mtime in files}
            if any(name not in present or present[name] != mtime for name, mtime in self._seen.items()):
                self._reset()  # a run started over in this directory (or rewrote a snapshot)
                self._seen = {}
                self.metrics.refreshes = 0
            new = [f for f in files if f[1] not in self._seen and f[1] not in self.unreadable][-self._history_kept:]
            if files:
                self._newest_mtime = files[-1][2]
            for i, (_, name, mtime) in enumerate(new):
                try:
                    data = json.loads((self.path / name).read_bytes())
                    latest = i == len(new) - 1
                    snapshot = TopicSnapshot.from_dict(data) if latest else None
                    extras_from = data if latest else None
                    summary = _summary(data["version"], data["documents_seen"], data.get("stream_time"),
                                       [t["id"] for t in data["topics"]], [t["prevalence"] for t in data["topics"]])
                    events = list(data.get("events") or [])
                except (OSError, ValueError, KeyError, TypeError) as error:
                    self.unreadable[name] = f"{type(error).__name__}: {error}"
                    log.warning("skipping %s: %s", self.path / name, self.unreadable[name])
                    continue
                self._seen[name] = mtime
                self._add(summary, events, snapshot, extras_from)
                self.metrics.observe_snapshot(summary["version"], summary["documents_seen"],
                                              len(data["topics"]), len(data.get("vocabulary") or ()), mtime)
            self._take_run_record()

    def _take_run_record(self) -> None:
        """A replay that has ended left its record (:mod:`consumers.run_record`): while it
        describes the newest snapshot here, the run is finished and its figures are served."""
        record = read_run_record(self.path)
        snapshot = self.snapshot()
        newest = (None, None) if snapshot is None else (snapshot.version, snapshot.documents_seen)
        if record is not None and (record["snapshot_version"], record["documents_seen"]) != newest:
            record = None
        self.finished = record is not None
        self.metrics.set_run(record)

    def stalled(self) -> bool:
        if self.stall_after is None or self.finished:
            return False
        if self._newest_mtime is None:
            return False  # nothing written yet: "no snapshot yet" says it
        return time.time() - self._newest_mtime > self.stall_after
