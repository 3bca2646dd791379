"""The one metrics class of every stream: what the Kafka consumer, a replay or a snapshot
directory has done, for logs, the JSON API and Prometheus.

:class:`ServiceMetrics` keeps the latest totals a stream reports (documents absorbed, rejections
by reason, refreshes, consumer lag, checkpoints, dead letters, ...) and exposes them through its
own :class:`prometheus_client.CollectorRegistry`, so several services in one process never clash
and tests read exactly one service's numbers. Totals are *set*, not incremented: the model and
the Kafka consumer already keep them (and restore them from checkpoints), so the exported
counters are the model's own counts, exact after a restart too. Events of this process only
(reconnects, commit failures, output errors, ...) are counted with :meth:`ServiceMetrics.increment`.

Feed it from whatever runs the stream, on the thread that runs it:

* the Kafka consumer (:mod:`consumers.kafka_consumer`) owns one and writes it directly
  (:meth:`ServiceMetrics.update`, :meth:`ServiceMetrics.increment`); hand the same object to
  :class:`~consumers.service.LiveSource` to serve it;
* :meth:`ServiceMetrics.update_from_model` reads a
  :class:`~streamtopics.StreamingTopicModel` (``documents_absorbed``, ``rejections``,
  ``last_refresh``, ``snapshot.version``, ``len(vocabulary)``);
* :meth:`ServiceMetrics.update_from_consumer` reads a summary that another process printed
  (:meth:`ServiceMetrics.as_dict` as JSON, e.g. the last line of ``streamtopics consume``);
* :meth:`ServiceMetrics.observe_snapshot` counts a snapshot seen in a snapshot directory (the
  ingest rate then comes from the files' write times, not from how fast they are read);
* :meth:`ServiceMetrics.set_run` takes the record of a run that has ended
  (:mod:`consumers.run_record`): its documents, rejections and malformed records by reason and
  its own ingest rate, the figures a service started after the run reports.

Exported families (all prefixed ``streamtopics_``)::

    documents_absorbed_total            counter
    documents_rejected_total{reason}    counter
    records_malformed_total{reason}     counter (records that could not be read; a replay's)
    ingest_rate_documents_per_second    gauge   (over the last ``window_seconds``; 0 once a run ended)
    run_ingest_rate_documents_per_second gauge  (a finished run's average, from its record)
    run_finished                        gauge   (1 when the figures are those of a run that ended)
    refreshes_total                     counter
    refresh_duration_seconds            histogram (one observation per refresh whose duration is known)
    last_refresh_duration_seconds       gauge
    consumer_lag_messages{partition}    gauge
    consumer_lag_messages_total         gauge   (sum over partitions)
    snapshot_version                    gauge
    snapshot_age_seconds                gauge   (wall time since the latest snapshot arrived)
    topics                              gauge
    vocabulary_size                     gauge
    stalled                             gauge   (1 when the source stopped sending heartbeats)
    memory_resident_bytes               gauge   (plus process_* from prometheus_client on Linux)
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from collections import deque
from typing import Iterable, Mapping

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

PREFIX = "streamtopics"
REFRESH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def resident_memory_bytes() -> int:
    """This process's resident set size (Linux: /proc/self/statm; elsewhere the peak RSS)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)


class ServiceMetrics:
    """The numbers one monitoring service exposes (thread-safe: the stream's thread writes,
    the HTTP server's thread reads).

    >>> m = ServiceMetrics()
    >>> m.update(documents_absorbed=10, rejected={"empty": 2}, lag={"news-0": 5})
    >>> m.as_dict()["total_lag"], m.as_dict()["documents_rejected"]
    (5, 2)
    >>> b"streamtopics_documents_absorbed_total 10.0" in m.render()
    True
    """

    #: events of this process, counted with :meth:`increment` (or set with :meth:`update`)
    EVENT_COUNTS = ("messages_consumed", "dead_letters", "doc_topics_published", "refresh_failures",
                    "checkpoints", "checkpoints_postponed", "checkpoints_set_aside", "commit_failures",
                    "output_errors", "reconnects")

    def __init__(self, window_seconds: float = 10.0, process_metrics: bool = True):
        self._lock = threading.Lock()
        for name in self.EVENT_COUNTS:
            setattr(self, name, 0)
        self.last_checkpoint: dict | None = None
        self.window_seconds = float(window_seconds)
        self.started = time.time()
        self.documents_absorbed = 0
        self.rejected: dict[str, int] = {}
        self.malformed: dict[str, int] = {}
        self.run: dict | None = None  # the record of the run that ended (set_run)
        self.refreshes = 0
        self.last_refresh_seconds: float | None = None
        self.lag: dict[str, int] = {}
        self.snapshot_version: int | None = None
        self.snapshot_time: float | None = None  # wall clock (time.time) the latest snapshot arrived
        self.n_topics: int | None = None
        self.vocabulary_size: int | None = None
        self.stalled = False
        self._bucket_counts = [0] * (len(REFRESH_BUCKETS) + 1)
        self._duration_sum = 0.0
        self._refresh_seen: int | None = None  # version whose duration was last observed
        self._samples: deque = deque()  # (monotonic time, documents absorbed)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        if process_metrics:
            try:
                ProcessCollector(registry=self.registry)
            except ValueError:  # pragma: no cover - duplicate names on exotic platforms
                pass

    # ------------------------------------------------------------------ writers
    def update(self, *, documents_absorbed: int | None = None, rejected: Mapping[str, int] | None = None,
               malformed: Mapping[str, int] | None = None, refreshes: int | None = None, refresh_seconds: float | None = None,
               snapshot_version: int | None = None, n_topics: int | None = None,
               vocabulary_size: int | None = None, lag: Mapping | None = None,
               last_checkpoint: dict | None = None, **counts: int) -> None:
        """Set the totals given (others keep their values). ``refresh_seconds`` is the duration
        of the refresh that produced ``snapshot_version``; it is observed once per version.
        ``counts`` set totals of :attr:`EVENT_COUNTS` (e.g. ``messages_consumed``)."""
        unknown = set(counts) - set(self.EVENT_COUNTS)
        if unknown:
            raise TypeError(f"unknown metrics: {sorted(unknown)}")
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, int(value))
            if last_checkpoint is not None:
                self.last_checkpoint = dict(last_checkpoint)
            if documents_absorbed is not None:
                self._count_documents(int(documents_absorbed), time.monotonic())
            if rejected is not None:
                self.rejected = {str(k): int(v) for k, v in rejected.items()}
            if malformed is not None:
                self.malformed = {str(k): int(v) for k, v in malformed.items()}
            if snapshot_version is not None and snapshot_version != self.snapshot_version:
                self.snapshot_version = int(snapshot_version)
                self.snapshot_time = time.time()
            if refresh_seconds is not None and self._refresh_seen != self.snapshot_version:
                self._refresh_seen = self.snapshot_version
                self._observe(float(refresh_seconds))
            if refreshes is not None:
                self.refreshes = int(refreshes)
            if n_topics is not None:
                self.n_topics = int(n_topics)
            if vocabulary_size is not None:
                self.vocabulary_size = int(vocabulary_size)
            if lag is not None:
                self.lag = {str(k): int(v) for k, v in lag.items()}

    def _count_documents(self, documents: int, when: float) -> None:
        """The documents absorbed as of ``when`` (monotonic clock): a sample of the ingest rate."""
        self.documents_absorbed = documents
        self._samples.append((when, documents))
        now = time.monotonic()
        while len(self._samples) > 2 and now - self._samples[1][0] > self.window_seconds:
            self._samples.popleft()

    def _observe(self, seconds: float) -> None:
        self.last_refresh_seconds = seconds
        self._duration_sum += seconds
        for i, bound in enumerate(REFRESH_BUCKETS):
            if seconds <= bound:
                self._bucket_counts[i] += 1
                return
        self._bucket_counts[-1] += 1

    def update_from_model(self, model, lag: Mapping | None = None) -> None:
        """Read a :class:`~streamtopics.StreamingTopicModel` (call it on the thread that feeds
        the model). Refreshes are counted by snapshot version (the model numbers them 1, 2, ...)."""
        snapshot = model.snapshot
        version = None if snapshot is None else snapshot.version
        refresh_s = (model.last_refresh or {}).get("total_s") if snapshot is not None else None
        self.update(documents_absorbed=model.documents_absorbed, rejected=dict(model.rejections),
                    refreshes=version or 0, refresh_seconds=refresh_s, snapshot_version=version,
                    n_topics=None if snapshot is None else snapshot.n_topics,
                    vocabulary_size=None if model.vocabulary is None else len(model.vocabulary), lag=lag)

    def increment(self, name: str, by: int = 1) -> None:
        """Count ``by`` more of an event: one of :attr:`EVENT_COUNTS`, or ``refreshes``."""
        if name not in self.EVENT_COUNTS and name != "refreshes":
            raise TypeError(f"unknown metric {name!r}")
        with self._lock:
            setattr(self, name, getattr(self, name) + by)

    def update_from_consumer(self, values: Mapping) -> None:
        """Read another process's :meth:`as_dict` summary (documents absorbed, rejections,
        malformed records, refreshes, last refresh duration, snapshot version, lag per partition)."""
        self.update(documents_absorbed=values.get("documents_absorbed"), rejected=values.get("rejected"),
                    malformed=values.get("malformed"), refreshes=values.get("refreshes"), snapshot_version=values.get("snapshot_version"),
                    refresh_seconds=values.get("last_refresh_seconds"), lag=values.get("lag"))

    def observe_snapshot(self, version: int, documents_seen: int, n_topics: int, vocabulary_size: int,
                         written_at: float | None = None) -> None:
        """A snapshot read from a snapshot directory: one more refresh, documents up to date.
        ``written_at`` (the file's modification time, wall clock) dates the documents count, so
        the ingest rate is the stream's, not the speed of reading a backlog of files."""
        now = time.monotonic()
        with self._lock:
            self.refreshes += 1
            self._count_documents(int(documents_seen), now if written_at is None
                                  else now - max(0.0, time.time() - written_at))
        self.update(snapshot_version=version, n_topics=n_topics, vocabulary_size=vocabulary_size)

    def set_run(self, record: Mapping | None) -> None:
        """The record of the run that ended (:func:`consumers.run_record.read_run_record`): its
        absorbed documents, rejections and malformed records by reason become the totals and
        its average ingest rate is reported beside the (idle) current one. None: no run has
        ended (a run's figures set earlier are dropped)."""
        with self._lock:
            if record is None:
                if self.run is not None:
                    self.rejected, self.malformed = {}, {}
                self.run = None
                return
            self.run = {name: record[name] for name in (
                "documents", "absorbed", "rejected", "malformed", "documents_this_run", "elapsed_s",
                "ingest_rate", "stopped", "ended_at")}
            self.run["paused_s"] = record.get("paused_s", 0.0)
            self.documents_absorbed = int(record["absorbed"])
            self.rejected = {str(k): int(v) for k, v in record["rejected"].items()}
            self.malformed = {str(k): int(v) for k, v in record["malformed"].items()}

    def set_stalled(self, stalled: bool) -> None:
        with self._lock:
            self.stalled = bool(stalled)

    # ------------------------------------------------------------------ readers
    def ingest_rate(self) -> float:
        """Documents absorbed per second over the last ``window_seconds`` (0 if idle)."""
        with self._lock:
            return self._rate_locked()

    def _rate_locked(self) -> float:
        if len(self._samples) < 2 or self.run is not None:
            return 0.0
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        if time.monotonic() - t1 > self.window_seconds:  # nothing new for a whole window
            return 0.0
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def as_dict(self) -> dict:
        """A JSON-ready summary (what the dashboard shows, what the consumer logs and prints)."""
        with self._lock:
            rate = self._rate_locked()
            return {
                "uptime_seconds": time.time() - self.started,
                "documents_absorbed": self.documents_absorbed,
                "documents_rejected": sum(self.rejected.values()),
                "rejected": dict(self.rejected),
                "documents_malformed": sum(self.malformed.values()),
                "malformed": dict(self.malformed),
                "ingest_rate": rate,
                "documents_per_second": rate,
                **{name: getattr(self, name) for name in self.EVENT_COUNTS},
                "last_checkpoint": self.last_checkpoint,
                "refreshes": self.refreshes,
                "last_refresh_seconds": self.last_refresh_seconds,
                "snapshot_version": self.snapshot_version,
                "snapshot_age_seconds": None if self.snapshot_time is None else time.time() - self.snapshot_time,
                "n_topics": self.n_topics,
                "vocabulary_size": self.vocabulary_size,
                "lag": dict(self.lag),
                "total_lag": sum(self.lag.values()),
                "stalled": self.stalled,
                "memory_bytes": resident_memory_bytes(),
                "run": None if self.run is None else dict(self.run),
            }

    def render(self) -> bytes:
        """The registry in Prometheus text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ Prometheus collector
    def describe(self) -> Iterable:
        return []

    def collect(self) -> Iterable:
        """The metric families, made at scrape time (the registry calls it)."""
        m = self
        rate = self.ingest_rate()
        with self._lock:
            def gauge(name, doc, value, labels=None, samples=()):
                family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)
                if labels is None:
                    if value is not None:
                        family.add_metric([], float(value))
                else:
                    for key, v in samples:
                        family.add_metric([key], float(v))
                return family

            yield CounterMetricFamily(f"{PREFIX}_documents_absorbed", "Documents absorbed into the statistics.",
                                      value=m.documents_absorbed)
            rejected = CounterMetricFamily(f"{PREFIX}_documents_rejected", "Documents rejected, by reason.",
                                           labels=["reason"])
            for reason, n in sorted(m.rejected.items()):
                rejected.add_metric([reason], n)
            yield rejected
            malformed = CounterMetricFamily(f"{PREFIX}_records_malformed", "Records that could not be read, by reason.",
                                            labels=["reason"])
            for reason, n in sorted(m.malformed.items()):
                malformed.add_metric([reason], n)
            yield malformed
            yield gauge("ingest_rate_documents_per_second",
                        f"Documents absorbed per second over the last {m.window_seconds:g} s.", rate)
            yield gauge("run_ingest_rate_documents_per_second",
                        "Average ingest rate of the run that ended (from its record).",
                        None if m.run is None else m.run["ingest_rate"])
            yield gauge("run_finished", "1 when the figures are those of a run that has ended.", int(m.run is not None))
            yield CounterMetricFamily(f"{PREFIX}_refreshes", "Refreshes (snapshots published).", value=m.refreshes)
            buckets = []
            cumulative = 0
            for bound, n in zip(REFRESH_BUCKETS + (float("inf"),), self._bucket_counts):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            yield HistogramMetricFamily(f"{PREFIX}_refresh_duration_seconds", "Wall time of each refresh.",
                                        buckets=buckets, sum_value=self._duration_sum)
            yield gauge("last_refresh_duration_seconds", "Wall time of the latest refresh.", m.last_refresh_seconds)
            yield gauge("consumer_lag_messages", "Messages behind the end of each partition.", None,
                        labels=["partition"], samples=sorted(m.lag.items()))
            yield gauge("consumer_lag_messages_total", "Messages behind, over all partitions.", sum(m.lag.values()))
            yield gauge("snapshot_version", "Version of the latest snapshot.", m.snapshot_version)
            yield gauge("snapshot_age_seconds", "Seconds since the latest snapshot arrived.",
                        None if m.snapshot_time is None else time.time() - m.snapshot_time)
            yield gauge("topics", "Topics in the latest snapshot.", m.n_topics)
            yield gauge("vocabulary_size", "Words in the model's vocabulary.", m.vocabulary_size)
            yield gauge("stalled", "1 when the stream stopped reporting (see readiness).", int(m.stalled))
        yield gauge("memory_resident_bytes", "Resident memory of this process.", resident_memory_bytes())

