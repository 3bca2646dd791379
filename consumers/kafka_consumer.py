"""The Kafka consumer service: a topic model kept fresh over Kafka topics, with exactly-once state.

::

    config = ConsumerConfig.load("consume.toml", topics=["news"])   # file < environment < arguments
    service = TopicModelConsumer(config)
    service.install_signal_handlers()   # SIGTERM/SIGINT: finish the batch, checkpoint, commit, close
    service.run()

Per poll: decode each message (:mod:`consumers.messages`), queue the document in the stream
driver (:class:`consumers.stream.StreamDriver`, shared with the archive replay) with its key and
time, learn the poll's documents together (``learn_many``), route every rejection (envelope or model) to
the dead-letter topic, publish document-topic mixtures for the absorbed documents, then refresh
and checkpoint when their schedules (:class:`~streamtopics.schedule.RefreshSchedule`) say so. Snapshots go to
the snapshot topic (key = model name, top words only; :mod:`consumers.outputs`) and, through
the driver, in full to the snapshot directory. Settings: :mod:`consumers.consumer_config`; numbers:
:class:`consumers.metrics.ServiceMetrics`.

Exactly-once model state rests on the driver's commit order (:mod:`consumers.stream`) and on
:mod:`consumers.checkpoint`: the checkpoint, not the group's
committed offsets, says where each partition resumes. Newly assigned partitions are paused in the
rebalance callback and sought in the polling thread: to the restored checkpoint's offset, or, when
another member of the group committed further (its checkpoint holds those documents), to that
commit; a partition nobody has read starts at ``auto_offset_reset`` (:mod:`consumers.placement`).
Commits carry this consumer's member id in their metadata so the two cases can be told apart.

Several members of one group each keep the statistics of the partitions they read
(docs/design.md, "State, checkpoints, several consumers": partial statistics, summed by a
refresher); use ``group_instance_id`` (static membership) so that a restarted member gets its
partitions back without a rebalance. What differs between a consumer on its own and a scale-out
worker is its *role*, composed in: :class:`Standalone` (the default) refreshes and resumes from
its own checkpoint; a worker's role
(:class:`consumers.group.GroupView`) never refreshes, starts a newly assigned partition at the
furthest offset any member checkpointed for it, and takes the group's snapshots for
per-document mixtures. Every checkpoint records, per partition, the offset ranges its
statistics count (:mod:`consumers.offset_ranges`), so a refresher can prove that no document is in two
partial states.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import threading
import time
import typing
from collections import Counter
from dataclasses import dataclass

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from streamtopics import Rejection, StreamingTopicModel, TopicSnapshot, Vocabulary
from streamtopics.schedule import RefreshSchedule

from .checkpoint import Checkpoint, CheckpointStore, Offsets
from .consumer_config import ConsumerConfig
from .metrics import ServiceMetrics
from .offset_ranges import OffsetRanges, offsets_text, positions_json
from .outputs import DeadLetterUndelivered, Outputs
from .backoff import Backoff
from .placement import commit_metadata, start_offset
from .signals import install_graceful_stop
from .snapshot_directory import SnapshotDirectory
from .stream import StreamDriver

__all__ = ["ConsumerConfig", "Standalone", "TopicModelConsumer"]

log = logging.getLogger("streamtopics.consumer")


def native_kafka_crc() -> bool:
    """Whether kafka-python checks record-batch CRC32Cs natively: it does with the ``crc32c``
    package (a dependency) and falls back to a pure-Python loop without it, which cost 5-7x the
    documents/s of every Kafka path (8.5 MiB/s of messages, benchmarks/kafka_throughput.py)."""
    return importlib.util.find_spec("crc32c") is not None


class Standalone:
    """The role of a consumer on its own: it refreshes its model, resumes every partition from
    its own checkpoint, and needs nothing from other members. A scale-out worker's role
    (:class:`consumers.group.GroupView`) answers the same questions differently."""

    refreshes = True

    def start_offset(self, topic: str, partition: int, own: int | None) -> int | None:
        """Where a newly assigned partition starts, given this consumer's checkpointed offset."""
        return own

    def after_batch(self, model: StreamingTopicModel) -> None:
        """Called after each absorbed batch (a worker takes the group's newest snapshot here)."""

    def cannot_checkpoint_on_revocation(self) -> None:
        """The checkpoint before giving partitions up failed: the next owner re-reads from the
        previous checkpoint, which our restored state matches, so a consumer on its own goes on."""

    def close(self) -> None:
        """The service stops."""

@dataclass
class _InFlight:
    """A message of the current poll whose document is queued in the stream driver."""

    record: typing.Any
    document: typing.Any
    key: typing.Any
    rejected: bool = False


class _Rebalance(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks (which run on its IO thread, while the
    polling thread waits inside ``poll`` or ``close``) to the service."""

    def __init__(self, service: "TopicModelConsumer"):
        self.service = service

    def on_partitions_revoked(self, revoked):
        self.service.on_partitions_revoked(revoked)

    def on_partitions_assigned(self, assigned):
        self.service.on_partitions_assigned(assigned)


class TopicModelConsumer:
    """Consume Kafka topics into a :class:`StreamingTopicModel` (see the module docstring).

    ``model`` is the live model, ``positions`` the next offset to read per ``(topic,
    partition)`` that the model's statistics reflect, ``metrics`` a
    :class:`~consumers.metrics.ServiceMetrics`, ``role`` what this member does in its group
    (:class:`Standalone` unless given). :meth:`run` blocks until :meth:`stop` (or a signal,
    after :meth:`install_signal_handlers`).
    """

    def __init__(self, config: ConsumerConfig, role=None, metrics: ServiceMetrics | None = None):
        self.config = config
        self.role = role if role is not None else Standalone()
        self.metrics = metrics if metrics is not None else ServiceMetrics(process_metrics=False)
        self.decoder = config.message_decoder()
        self.outputs = Outputs(config, self.metrics)
        self.store = CheckpointStore(config.checkpoint_dir, keep=config.keep_checkpoints)
        self._stop = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._unplaced: set[TopicPartition] = set()  # assigned, paused, not yet sought
        self._in_flight: list[_InFlight] = []  # this poll's queued messages, in order
        self._rejected_up_to = 0  # model rejections come in queue order: none before this index
        self._closing = False
        self.restored = self.store.restore(on_reject=self._on_model_reject)
        if self.restored.model is None:
            self.model = config.new_model(on_reject=self._on_model_reject)
            self.positions: Offsets = {}
            self._counters: dict = {"message_rejections": {}, "dead_letters": 0}
        else:
            self.model = self.restored.model
            self.positions = dict(self.restored.checkpoint.offsets)
            self._counters = self.restored.checkpoint.counters
            self._warn_on_config_drift()
            log.info("restored checkpoint %d: %d documents, offsets %s", self.restored.checkpoint.sequence,
                     self.model.documents_absorbed, offsets_text(self.positions))
        self._ranges = OffsetRanges(self._counters.setdefault("ranges", {}))
        snapshots = None
        if config.snapshot_dir:
            snapshots = SnapshotDirectory(config.snapshot_dir, keep=config.keep_snapshots)
            snapshots.path.mkdir(parents=True, exist_ok=True)
        self.driver = StreamDriver(self.model, self.store, snapshots)
        self._checkpointed = dict(self.positions)
        self._messages = 0  # consumed by this process
        # the schedule resumes from the last refresh saved in the state, like the statistics
        self._refresh = _work_schedule(config.refresh_every_documents, config.refresh_every_wall_seconds,
                                       self.model.schedule.documents_mark)
        self._checkpoint_due = _work_schedule(config.checkpoint_every_messages, config.checkpoint_every_wall_seconds)
        self._checkpoint_retry_at = 0.0
        self._checkpoint_backoff = Backoff(config.reconnect_backoff_s, config.reconnect_backoff_max_s)
        self.metrics.update(checkpoints_set_aside=len(self.restored.skipped),
                            snapshot_version=None if self.model.snapshot is None else self.model.snapshot.version)
        self._update_totals()
        if not native_kafka_crc():
            log.warning("the crc32c package is missing: kafka-python checks message CRCs in pure Python, "
                        "several times slower (pip install crc32c)")

    def _warn_on_config_drift(self) -> None:
        c, m = self.config, self.model
        if c.n_topics != m.n_topics or (c.vocabulary and m.vocabulary is not None
                                        and Vocabulary.from_file(c.vocabulary) != m.vocabulary):
            log.warning("the checkpoint's model (K=%d, %s words) differs from the configured one; "
                        "the checkpoint wins", m.n_topics, None if m.vocabulary is None else len(m.vocabulary))

    # ------------------------------------------------------------------ lifetime
    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the service gracefully (main thread only); a second one
        of the same kind ends the process at once."""
        install_graceful_stop(self.stop, "finishing the batch, then checkpoint, commit and close")

    def stop(self) -> None:
        """Ask :meth:`run` to finish its batch, checkpoint, commit and return."""
        self._stop.set()

    def run(self) -> ServiceMetrics:
        """Consume until stopped; reconnect with back-off whenever Kafka fails."""
        backoff = Backoff(self.config.reconnect_backoff_s, self.config.reconnect_backoff_max_s)
        clean = False
        try:
            while not self._stop.is_set():
                try:
                    self._connect()
                    backoff.reset()
                    self._consume()
                except KafkaError as error:
                    delay = backoff.next_delay()
                    log.warning("Kafka failed (%s: %s); reconnecting in %.1f s", type(error).__name__, error, delay)
                    self.metrics.increment("reconnects")
                    self._disconnect()
                    self._stop.wait(delay)
            clean = True
        except DeadLetterUndelivered as error:
            self._update_totals()  # dead_letters counts only those not known to have failed
            log.error("stopping: %s", error)
            raise
        finally:
            self._shutdown(checkpoint=clean)
        return self.metrics

    def _connect(self) -> None:
        self.outputs.connect()
        if self._consumer is None:
            consumer = KafkaConsumer(**self.config.consumer_settings())
            if self.config.pattern:
                consumer.subscribe(pattern=self.config.pattern, listener=_Rebalance(self))
            else:
                consumer.subscribe(topics=self.config.topics, listener=_Rebalance(self))
            self._consumer = consumer
            log.info("consuming %s in group %s as member %s", self.config.topics or self.config.pattern,
                     self.config.group_id, self.store.member_id)

    def _disconnect(self) -> None:
        """Close the consumer without the revocation checkpoint (Kafka may be gone)."""
        consumer = self._consumer
        self._closing = True
        try:
            if consumer is not None:
                with contextlib.suppress(Exception):
                    consumer.close(autocommit=False)
        finally:
            self._consumer, self._closing = None, False
            self._unplaced.clear()

    def _shutdown(self, checkpoint: bool) -> None:
        """Checkpoint (unless an unexpected error may have left the model mid-update) and close.
        Outputs that the flush could not deliver in ``flush_timeout_s`` (the broker is down)
        are not waited for again: the checkpoint is skipped, so the next start re-reads their
        messages and sends them again (at least once), and stopping takes seconds."""
        delivered = True
        try:
            if checkpoint:
                self.checkpoint()
        except DeadLetterUndelivered as error:
            self._update_totals()
            log.error("final checkpoint skipped: %s", error)
            raise
        except KafkaError as error:
            delivered = False
            self.metrics.increment("checkpoints_postponed")
            log.error("final checkpoint skipped: %d outputs not delivered in %.1f s (%s); the next start "
                      "re-reads %d messages from checkpoint offsets %s and sends their outputs again",
                      self.outputs.pending, self.config.flush_timeout_s, error,
                      self._messages - self._checkpoint_due.documents_mark, offsets_text(self._checkpointed))
        finally:
            self._disconnect()
            self.outputs.close(wait=delivered)
            self.store.close()
            self.role.close()
            log.info("stopped: %s", json.dumps(self.metrics.as_dict()))

    # ------------------------------------------------------------------ the loop
    def _consume(self) -> None:
        last_log = idle_since = time.monotonic()
        while not self._stop.is_set():
            batch = self._consumer.poll(timeout_ms=self.config.poll_timeout_ms, max_records=self.config.poll_records)
            self._place_assigned()  # partitions assigned during that poll (paused until now)
            if batch:
                self._absorb(batch)
                idle_since = time.monotonic()
            self.outputs.check()  # a dead letter failed: stop before any checkpoint passes over it
            self._update_lag()
            self._maybe_refresh()
            self._maybe_checkpoint()
            now = time.monotonic()
            if self.config.log_every_seconds and now - last_log >= self.config.log_every_seconds:
                last_log = now
                m = self.metrics.as_dict()
                log.info("absorbed %d documents (%.0f/s), rejected %s, lag %d", m["documents_absorbed"],
                         m["documents_per_second"], m["rejected"], m["total_lag"])
            if (self.config.stop_when_idle and now - idle_since >= self.config.stop_when_idle
                    and not self._stop.is_set() and self._caught_up()):
                log.info("caught up and idle for %.1f s: stopping", now - idle_since)
                self.stop()

    def _absorb(self, batch: dict) -> None:
        """Queue the poll's decoded documents in the driver and learn them together (one
        ``learn_many``: the statistics of one at a time); an envelope rejection first has the
        documents before it learned, so dead letters keep the messages' order."""
        self._in_flight, self._rejected_up_to = [], 0
        for tp, records in batch.items():
            position = (tp.topic, tp.partition)
            for record in records:
                if record.offset < self.positions.get(position, 0):
                    continue  # already in the statistics: never count a document twice
                self._messages += 1
                decoded = self.decoder.decode_record(record)
                if isinstance(decoded, Rejection):
                    self.driver.absorb()
                    self._reject_message(decoded, record)
                else:
                    self._in_flight.append(_InFlight(record, decoded.document, decoded.key))
                    self.driver.queue(decoded.document, decoded.key, decoded.timestamp)
                self.positions[position] = record.offset + 1
            self._ranges.extend(position, self.positions[position])
        self.driver.absorb()
        absorbed, self._in_flight = [m for m in self._in_flight if not m.rejected], []
        self.role.after_batch(self.model)
        if absorbed and self.config.doc_topics_topic and self.model.snapshot is not None:
            snapshot = self.model.snapshot
            mixtures = self.model.infer([m.document for m in absorbed])
            for message, mixture in zip(absorbed, mixtures):
                self.outputs.doc_topics(message.record, message.key, snapshot.version, snapshot.topic_ids, mixture)
        self._update_totals()

    def _reject_message(self, rejection: Rejection, record) -> None:
        counts = self._counters["message_rejections"]
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
        self._dead_letter(rejection, record=record)

    def _on_model_reject(self, rejection: Rejection, document, key) -> None:
        """The model's ``on_reject``: a queued message, or a warm-up document rejected when the
        vocabulary was frozen (its word counts: no message's document). The model learns the
        queue in order, so the message is the first queued one from ``_rejected_up_to`` on whose
        document *is* this object (the same object twice in a poll -- CPython's shared empty and
        one-character strings -- has at most one token, so both are rejected, in order)."""
        for i in range(self._rejected_up_to, len(self._in_flight)):
            message = self._in_flight[i]
            if message.document is document:
                message.rejected, self._rejected_up_to = True, i + 1
                self._dead_letter(rejection, record=message.record)
                return
        self._dead_letter(rejection, key=key, document=document)

    def _dead_letter(self, rejection: Rejection, **origin) -> None:
        self._counters["dead_letters"] += 1
        self.outputs.dead_letter(rejection, **origin)

    def _update_totals(self) -> None:
        rejected = Counter(self.model.rejections)
        rejected.update(self._counters["message_rejections"])
        self.metrics.update(messages_consumed=self._messages, documents_absorbed=self.model.documents_absorbed,
                            rejected=rejected,
                            dead_letters=self._counters["dead_letters"] - len(self.outputs.undelivered))

    def _update_lag(self) -> None:
        lag = {}
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            position = self.positions.get((tp.topic, tp.partition))
            if highwater is not None and position is not None:
                lag[f"{tp.topic}/{tp.partition}"] = max(0, highwater - position)
        self.metrics.update(lag=lag)

    def _caught_up(self) -> bool:
        """Whether every assigned partition is read to its end (``stop_when_idle``). The end
        offsets are asked for at most ``commit_timeout_s``, not the client's 30 s: while the
        broker is down the answer is no, and the loop must not stall on it."""
        assigned = self._consumer.assignment()
        if not assigned or self._unplaced:
            return False
        try:
            ends = self._consumer.end_offsets(list(assigned), timeout_ms=int(self.config.commit_timeout_s * 1000))
        except KafkaError:
            return False
        return all(self.positions.get((tp.topic, tp.partition), -1) >= end for tp, end in ends.items())

    # ------------------------------------------------------------------ refresh
    def _maybe_refresh(self) -> None:
        if self.role.refreshes and self._refresh.due(self.model.documents_absorbed) and self.model.vocabulary is not None:
            self.refresh()

    def refresh(self) -> TopicSnapshot | None:
        """Recompute the topics now and publish the snapshot; None if the refresh failed (it
        is logged and counted; the stream goes on)."""
        self._refresh.restart(self.model.documents_absorbed)
        try:
            snapshot, _, seconds = self.driver.refresh(positions_json(self.positions))
        except Exception:  # noqa: BLE001 - a failed refresh must not stop the stream
            self.metrics.increment("refresh_failures")
            log.exception("refresh failed at %d documents", self.model.documents_absorbed)
            return None
        self.outputs.snapshot(snapshot)
        self.metrics.increment("refreshes")
        self.metrics.update(refresh_seconds=seconds, snapshot_version=snapshot.version)
        log.info("snapshot %d at %d documents (%.2f s)", snapshot.version, snapshot.documents_seen, seconds)
        return snapshot

    # ------------------------------------------------------------------ checkpoints
    def _maybe_checkpoint(self) -> None:
        """Checkpoint when due; while outputs cannot be delivered, retry after a growing wait
        (each try holds the loop up to ``flush_timeout_s``)."""
        if not self._checkpoint_due.due(self._messages) or time.monotonic() < self._checkpoint_retry_at:
            return
        try:
            self.checkpoint()
            self._checkpoint_backoff.reset()
        except KafkaError as error:
            delay = self._checkpoint_backoff.next_delay()
            self._checkpoint_retry_at = time.monotonic() + delay
            self.metrics.increment("checkpoints_postponed")
            log.warning("checkpoint postponed %.1f s: %d outputs not delivered (%s)", delay, self.outputs.pending, error)

    def checkpoint(self, commit_async: bool = False) -> bool:
        """Flush outputs, write a checkpoint, commit its offsets: the commit order of
        :meth:`StreamDriver.checkpoint <consumers.stream.StreamDriver.checkpoint>`. Does nothing
        if no message was consumed since the last one. Returns whether a checkpoint was written;
        raises KafkaError if the flush times out, and
        :class:`~consumers.outputs.DeadLetterUndelivered` if a dead letter was not delivered
        (then nothing is written or committed)."""
        if self.positions == self._checkpointed:
            return False
        t0 = time.perf_counter()
        saved = self.driver.checkpoint(self.positions, self._counters, flush=self.outputs.flush,
                                       commit=lambda saved: self._commit(saved, commit_async))
        self._checkpointed = dict(saved.offsets)
        self._checkpoint_due.restart(self._messages)
        seconds = time.perf_counter() - t0
        self.metrics.increment("checkpoints")
        self.metrics.update(last_checkpoint={"sequence": saved.sequence, "bytes": saved.state_bytes,
                                             "seconds": seconds, "documents": self.model.documents_absorbed})
        log.debug("checkpoint %d written in %.2f s (%d bytes)", saved.sequence, seconds, saved.state_bytes)
        return True

    def _commit(self, saved: Checkpoint, asynchronous: bool) -> None:
        """Commit the checkpointed offsets of the assigned partitions, tagged with our member id.
        A failed commit is harmless (the checkpoint decides where we resume), so it is only
        counted. The checkpoint is on disk before this runs (docs/design.md, "State, checkpoints,
        several consumers": checkpoint first, then commit). A synchronous commit waits at most
        ``commit_timeout_s`` (default 5 s): while the broker is down the consume loop is held that
        long at most, not the client's 60 s."""
        if self._consumer is None:
            return
        metadata = commit_metadata(self.store.member_id, saved.sequence)
        offsets = {tp: OffsetAndMetadata(saved.offsets[(tp.topic, tp.partition)], metadata, -1)
                   for tp in self._consumer.assignment()
                   if (tp.topic, tp.partition) in saved.offsets and tp not in self._unplaced}
        if not offsets:
            return
        try:
            if asynchronous:
                self._consumer.commit_async(offsets, callback=self._commit_done)
            else:
                self._consumer.commit(offsets, timeout_ms=int(self.config.commit_timeout_s * 1000))
        except KafkaError as error:
            self._commit_done(offsets, error)

    def _commit_done(self, offsets, result) -> None:
        if isinstance(result, Exception):
            self.metrics.increment("commit_failures")
            log.warning("offset commit failed (harmless, the checkpoint is ahead): %s", result)

    # ------------------------------------------------------------------ rebalancing
    def on_partitions_revoked(self, revoked) -> None:
        """Checkpoint before giving partitions up, so their next owner starts exactly where our
        statistics end. Runs on kafka-python's IO thread: the commit is asynchronous."""
        self._unplaced.difference_update(revoked)
        if self._closing or not revoked:
            return
        try:
            self.checkpoint(commit_async=True)
        except Exception:  # noqa: BLE001 - kafka-python would only log it
            log.exception("checkpoint on revocation of %s failed", sorted(revoked))
            self.role.cannot_checkpoint_on_revocation()

    def on_partitions_assigned(self, assigned) -> None:
        """Pause new partitions until :meth:`_place_assigned` seeks them (on the polling thread,
        because finding where to start needs blocking requests, which the IO thread may not make)."""
        if assigned:
            self._consumer.pause(*assigned)
            self._unplaced.update(assigned)

    def _place_assigned(self) -> None:
        for tp in sorted(self._unplaced):
            try:
                start = self._start_offset(tp)
            except KafkaError as error:
                log.warning("cannot place %s yet: %s", tp, error)
                return
            self._consumer.seek(tp, start)
            self._consumer.resume(tp)
            self._unplaced.discard(tp)
            self.positions[(tp.topic, tp.partition)] = start
            self._ranges.open((tp.topic, tp.partition), start)
            log.info("reading %s/%d from offset %d", tp.topic, tp.partition, start)

    def _start_offset(self, tp: TopicPartition) -> int:
        """Where ``tp`` starts (:func:`consumers.placement.start_offset`), our checkpoint's offset
        as our role sees it (in a scale-out group: the furthest any member checkpointed)."""
        own = self.role.start_offset(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition)))
        return start_offset(self._consumer, tp, own, self.store.member_id, self.config.auto_offset_reset,
                            timeout_ms=int(self.config.flush_timeout_s * 1000))


def _work_schedule(every_count: int, every_wall_seconds: float, done_at: int = 0) -> RefreshSchedule:
    """Due after ``every_count`` units of work or ``every_wall_seconds`` (0 turns either off), if
    some work came since it was last done (at ``done_at``)."""
    schedule = RefreshSchedule(every_count or None, every_wall_seconds=every_wall_seconds or None, after_progress=True)
    schedule.restart(done_at)
    return schedule
