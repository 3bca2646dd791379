"""Scale-out over a Kafka consumer group: partial statistics per worker, one merged model.

Topology (docs/design.md, "State, checkpoints, several consumers"; docs/scale-out.md)::

    topic (P partitions) --> worker 1 .. worker N   (one consumer group, fixed vocabulary)
                               | partial checkpoints + counted offset ranges
                               v
                        shared StateStore  <-- refresher: merge (sum), refresh, publish
                               ^                       |
                               |   full snapshots      v
          workers <-- snapshot topic (version notices) + store --> per-document mixtures

* **Workers** are :class:`~consumers.kafka_consumer.TopicModelConsumer` processes whose role
  is a :class:`GroupView` (composed in, in place of :class:`~consumers.kafka_consumer.Standalone`): each checkpoints its partial statistics under its member name in the store,
  never refreshes, checkpoints (and commits) in the revocation callback before giving partitions
  up, and starts a newly assigned partition at the furthest offset any member checkpointed for
  it -- so a partition's documents are counted by exactly one worker's newest checkpoint, and a
  worker that dies keeps counting up to its last checkpoint while its partitions move on from
  there. Each checkpoint lists the offset ranges it counts per partition.
* The **refresher** (:class:`Refresher`) reads the newest partial checkpoint of every worker,
  checks that no two count the same offsets, sums them, refreshes (anchors, recovery
  warm-started from its previous solution, topic ids aligned with its previous snapshot) and
  publishes the snapshot to the store and the snapshot topic. Every machine's ``consume
  --workers`` starts a refresher candidate; the store's refresher lease elects one, and a
  standby takes over (from the state in the store) when the leader stops or dies.
* Workers follow the snapshot topic (a version notice per snapshot) and take the full snapshot
  from the store to publish per-document topic mixtures.

``streamtopics consume --workers N --group-store DIR`` runs N workers and a refresher candidate
as child processes (:func:`run_group`). The same command on several machines, pointing at one
store on a shared file system, forms one group: workers are named ``<member prefix>-<i>``
(the prefix defaults to the host name), so each machine's workers keep their own partial states
and get them back when restarted there. ``streamtopics group worker|refresher`` runs one role by
hand (:mod:`consumers.cli.group`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.refresh.lineage import Lineage
from streamtopics.schedule import RefreshSchedule

from .consumer_config import ConsumerConfig
from .kafka_consumer import TopicModelConsumer
from .metrics import ServiceMetrics
from .offset_ranges import positions_json
from .outputs import Outputs
from .signals import STOP_SIGNALS, install_graceful_stop
from .store import DirectoryStateStore, StateStore, frontier, merge_partials, overlaps

log = logging.getLogger("streamtopics.group")


# --------------------------------------------------------------------------- workers


class GroupView:
    """A scale-out worker's role in :class:`~consumers.kafka_consumer.TopicModelConsumer` (the
    counterpart of :class:`~consumers.kafka_consumer.Standalone`): it never refreshes (the
    group's refresher does); a newly assigned partition starts at the store's furthest
    checkpointed offset, by any other member; it takes the group's latest snapshot for
    per-document mixtures; and it leaves when it cannot checkpoint before giving partitions up."""

    refreshes = False

    def __init__(self, store: StateStore, member: str, config: ConsumerConfig, follow_every_s: float = 1.0):
        self.store = store
        self.member = member
        self.config = config
        self.follow_every_s = follow_every_s
        self._reader: KafkaConsumer | None = None
        self._next_look = 0.0

    def peer_offset(self, topic: str, partition: int) -> int | None:
        return self.store.checkpointed_offset(topic, partition, exclude=self.member)

    def start_offset(self, topic: str, partition: int, own: int | None) -> int | None:
        """The furthest of our own checkpointed offset and any other member's."""
        peer = self.peer_offset(topic, partition)
        return peer if peer is not None and (own is None or peer > own) else own

    def after_batch(self, model: StreamingTopicModel) -> None:
        if self.config.doc_topics_topic:
            self.follow_snapshots(model)

    def cannot_checkpoint_on_revocation(self) -> None:
        """The next owner starts at our last checkpoint; documents we hold beyond it would be
        counted twice if a later checkpoint of ours included them. Leave now: a restarted worker
        resumes from its last checkpoint."""
        log.critical("scale-out worker cannot checkpoint before giving partitions up: exiting")
        os._exit(75)

    def follow_snapshots(self, model: StreamingTopicModel) -> None:
        """Take the newest snapshot announced on the snapshot topic (or, without one, found in
        the store) as ``model.snapshot`` for inference; at most once per ``follow_every_s``."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + self.follow_every_s
        current = 0 if model.snapshot is None else model.snapshot.version
        version = self._announced_version() if self.config.snapshot_topic else None
        if version is None and not self.config.snapshot_topic:
            latest = self.store.latest_snapshot()
            version = None if latest is None else latest.version
        if version is None or version <= current:
            return
        snapshot = self.store.snapshot(version)
        if snapshot is not None and snapshot.vocabulary == model.vocabulary.words:
            model.adopt_lineage(replace(model.lineage.export(), snapshot=snapshot))
            log.info("using the group's snapshot %d", version)

    def _announced_version(self) -> int | None:
        try:
            if self._reader is None:
                reader = KafkaConsumer(**self.config.client_settings(), enable_auto_commit=False, group_id=None,
                                       consumer_timeout_ms=100)
                partitions = reader.partitions_for_topic(self.config.snapshot_topic)
                if not partitions:
                    reader.close()
                    return None
                reader.assign([TopicPartition(self.config.snapshot_topic, p) for p in partitions])
                reader.seek_to_beginning()
                self._reader = reader
            newest = None
            for records in self._reader.poll(timeout_ms=0).values():
                for record in records:
                    with contextlib.suppress(ValueError, KeyError, TypeError, RecursionError):
                        if record.key == self.config.model_name.encode():
                            version = int(json.loads(record.value)["version"])
                            newest = version if newest is None else max(newest, version)
            return newest
        except KafkaError as error:
            log.warning("cannot read the snapshot topic (%s)", error)
            return None

    def close(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(Exception):
                self._reader.close()
            self._reader = None


def worker_config(config: ConsumerConfig, store: DirectoryStateStore, member: str) -> ConsumerConfig:
    """A worker's settings: its checkpoints under its member name in the store, no refreshes of
    its own, no snapshot outputs (the refresher's), static membership under its name (so a
    restarted worker gets its partitions back without a rebalance)."""
    return replace(config, checkpoint_dir=str(store.member_dir(member)), refresh_every_documents=0,
                   refresh_every_wall_seconds=0.0, snapshot_dir=None,
                   group_instance_id=f"{config.group_instance_id or config.group_id}-{member}",
                   client_id=f"{config.client_id}-{member}")


class Worker(TopicModelConsumer):
    """A scale-out worker: the consumer service with a :class:`GroupView` as its role and its
    settings from :func:`worker_config` (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, store: DirectoryStateStore, member: str):
        super().__init__(worker_config(config, store, member), role=GroupView(store, member, config))
        if self.model.vocabulary is None:
            self.store.close()
            raise ValueError("scale-out workers need a fixed vocabulary (--vocabulary): partial "
                             "statistics can only be summed over the same words")


# --------------------------------------------------------------------------- refresher


class Refresher:
    """Merges the newest partial states, refreshes, publishes (see the module docstring).

    Any number of refreshers may run against one store (one per machine that runs ``consume
    --workers``); the store's refresher lease elects one, and the others stand by until its
    holder stops or dies, then one of them takes over from the state it left in the store.
    :meth:`refresh_once` does one round (None when nothing changed or the partial states are
    inconsistent); :meth:`run` repeats it every ``interval`` seconds while leading, until
    :meth:`stop`, then does a last one."""

    def __init__(self, config: ConsumerConfig, store: StateStore, interval: float = 10.0,
                 standby_poll_s: float = 1.0):
        self.config = replace(config, snapshot_dir=None, doc_topics_topic=None, dead_letter_topic=None)
        self.store = store
        self.interval = interval
        self.schedule = RefreshSchedule(every_wall_seconds=interval or None)  # a round every interval (0: at once)
        self.standby_poll_s = standby_poll_s
        self.metrics = ServiceMetrics(process_metrics=False)
        self.outputs = Outputs(self.config, self.metrics)
        self._lease = None
        self._stop = threading.Event()
        self._last_key: tuple | None = None
        self.lineage = Lineage(None, None, 0)  # what the next round continues from
        self.last: dict = {}

    @property
    def snapshot(self) -> TopicSnapshot | None:
        """The group's latest snapshot, as this refresher knows it."""
        return self.lineage.snapshot

    @property
    def leading(self) -> bool:
        return self._lease is not None

    def try_lead(self) -> bool:
        """Take the store's refresher lease if it is free, and with it the state the previous
        refresher left: its last snapshot (topic ids go on from it), its warm-start point."""
        if self._lease is None:
            self._lease = self.store.try_refresher_lease()
            if self._lease is None:
                return False
            self._take_over_state()
            log.info("leading the group's refreshes (from snapshot %s)",
                     None if self.snapshot is None else self.snapshot.version)
        return True

    def _take_over_state(self) -> None:
        snapshot, self._last_key = self.store.latest_snapshot(), None
        state = self.store.load_refresher_state()
        self.lineage = Lineage(snapshot, None, 0)
        if state is not None and snapshot is not None and state[2] == snapshot.version:
            self.lineage = Lineage(snapshot, state[0], state[1])
        elif snapshot is not None:
            self.lineage = Lineage(snapshot, None, max(snapshot.topic_ids) + 1)

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: one last refresh round (when leading), then return from :meth:`run`."""
        install_graceful_stop(self.stop, "one last refresh round, then stop")

    def run(self) -> None:
        try:
            waiting_logged = False
            while not self._stop.is_set():
                if not self.try_lead():
                    if not waiting_logged:
                        log.info("standing by: another refresher holds the store's lease")
                        waiting_logged = True
                    self._stop.wait(self.standby_poll_s)
                    continue
                self._round()
                self.schedule.restart(0)
                self._stop.wait(self.schedule.wall_seconds_left() or 0.0)
            if self.leading:
                self._round()
        finally:
            self.close()

    def _round(self) -> None:
        try:
            self.refresh_once()
        except Exception:  # noqa: BLE001 - a failed round must not stop the refresher
            self.metrics.increment("refresh_failures")
            log.exception("refresh round failed; retrying in %.1f s", self.interval)

    def refresh_once(self, force: bool = False) -> TopicSnapshot | None:
        if not self.try_lead():
            raise RuntimeError("another refresher holds the store's lease")
        t0 = time.perf_counter()
        partials = self.store.partials()
        key = tuple(p.key for p in partials)
        if not partials or (key == self._last_key and not force):
            return None
        clash = overlaps(partials)
        if clash:
            log.error("partial states count the same offsets (a worker kept absorbing after its partitions "
                      "were taken); not publishing: %s", "; ".join(clash))
            self.metrics.increment("refresh_failures")
            return None
        merged = merge_partials(self.store, partials)
        t_merge = time.perf_counter() - t0
        merged.adopt_lineage(self.lineage)
        snapshot = merged.refresh(position=positions_json(frontier(partials)))
        t_refresh = time.perf_counter() - t0 - t_merge
        self.store.save_snapshot(snapshot)
        lineage = merged.lineage.export()
        self.store.save_refresher_state(lineage.coefficients, lineage.next_topic_id, snapshot.version)
        self.outputs.connect()
        self.outputs.snapshot(snapshot)
        self.outputs.flush()
        self.lineage = lineage
        self._last_key = key
        self.merged = merged
        self.last = {"partials": len(partials), "documents": snapshot.documents_seen, "merge_s": t_merge,
                     "refresh_s": t_refresh, "total_s": time.perf_counter() - t0, "version": snapshot.version}
        self.metrics.increment("refreshes")
        log.info("snapshot %d from %d partial states, %d documents (merge %.2f s, refresh %.2f s)",
                 snapshot.version, len(partials), snapshot.documents_seen, t_merge, t_refresh)
        return snapshot

    def close(self) -> None:
        self.outputs.close()
        if self._lease is not None:
            self._lease.release()
            self._lease = None


# --------------------------------------------------------------------------- processes


def _child(role: str, config_path: Path, store: Path, member: str | None, interval: float,
           log_level: str) -> list[str]:
    args = [sys.executable, "-m", "consumers.cli", "group", role, "--config", str(config_path), "--store", str(store),
            "--log-level", log_level]
    if member:
        args += ["--member", member]
    if role == "refresher":
        args += ["--interval", str(interval)]
    return args


def default_member_prefix() -> str:
    """This machine's host name, made safe for a directory name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()).lstrip(".") or "host"


def run_group(config: ConsumerConfig, workers: int, store_dir: str | None = None, refresh_interval: float = 10.0,
              log_level: str = "INFO", restart_failed: bool = True, member_prefix: str | None = None) -> int:
    """``consume --workers N``: N worker processes named ``<member_prefix>-<i>`` and a refresher
    candidate on this machine, sharing ``store_dir`` (default: the checkpoint directory) with
    any other machine's group. A worker or refresher that dies abnormally is restarted (a worker
    resumes from its checkpoint); SIGTERM/SIGINT stop all of them gracefully. Returns the exit
    status (0 when every child stopped cleanly)."""
    if workers < 1:
        raise ValueError("--workers must be at least 1")
    if not config.vocabulary:
        raise ValueError("--workers needs a fixed --vocabulary (partial statistics are summed over the same words)")
    prefix = member_prefix or default_member_prefix()
    store = DirectoryStateStore(store_dir or config.checkpoint_dir)
    store.member_dir(prefix)  # the prefix must make valid member names
    config_path = store.root / f"group-config-{prefix}.json"
    config_path.write_text(json.dumps(config.to_dict(redact=False), indent=1))
    os.chmod(config_path, 0o600)
    stopping = threading.Event()
    children: dict[str, subprocess.Popen] = {}

    def start(name: str) -> None:
        role, member = ("refresher", None) if name == "refresher" else ("worker", name)
        children[name] = subprocess.Popen(_child(role, config_path, store.root, member, refresh_interval, log_level))

    def handler(signum, frame):
        stopping.set()

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    names = [f"{prefix}-{i}" for i in range(workers)]
    for name in names:
        start(name)
    start("refresher")
    status = 0
    while not stopping.is_set():
        finished = {n: p.poll() for n, p in children.items() if p.poll() is not None}
        workers_done = all(n in finished for n in names)
        for name, code in finished.items():
            if name != "refresher" and code == 0:
                continue  # stopped on its own (stop_when_idle)
            if restart_failed and not workers_done:
                log.warning("%s exited with %s: restarting it", name, code)
                start(name)
            else:
                status = status or code
        if workers_done:
            break
        stopping.wait(0.5)
    for name, proc in children.items():  # workers first, then the refresher (last refresh)
        if proc.poll() is None and name != "refresher":
            proc.send_signal(signal.SIGTERM)
    for name, proc in children.items():
        if name != "refresher":
            status = status or proc.wait()
    refresher = children["refresher"]
    if refresher.poll() is None:
        refresher.send_signal(signal.SIGTERM)
    status = status or refresher.wait()
    return status

