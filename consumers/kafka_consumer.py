"""The Kafka consumer service: a topic model kept fresh over Kafka topics, with exactly-once state.

::

    config = ConsumerConfig.load("consume.toml", topics=["news"])   # file < environment < arguments
    service = TopicModelConsumer(config)
    service.install_signal_handlers()   # SIGTERM/SIGINT: finish the batch, checkpoint, commit, close
    service.run()

Per poll: decode each message (:mod:`consumers.messages`), feed the document to
:meth:`StreamingTopicModel.learn_one` with its key, route every rejection (envelope or model) to
the dead-letter topic, publish document-topic mixtures for the absorbed documents, then refresh
and checkpoint when their policies say so. Snapshots go to the snapshot topic (key = model name,
top words only) and in full to the snapshot directory.

Exactly-once model state rests on :mod:`consumers.checkpoint`: the checkpoint, not the group's
committed offsets, says where each partition resumes. Newly assigned partitions are paused in the
rebalance callback and sought in the polling thread: to the restored checkpoint's offset, or, when
another member of the group committed further (its checkpoint holds those documents), to that
commit; a partition nobody has read starts at ``auto_offset_reset``. Commits carry this consumer's
member id in their metadata so the two cases can be told apart.

Several members of one group each keep the statistics of the partitions they read (DESIGN 5:
partial statistics, summed by a refresher); use ``group_instance_id`` (static membership) so that
a restarted member gets its partitions back without a rebalance. Scale-out workers
(:mod:`consumers.group`) pass a ``group`` view of the shared store: a newly assigned partition
then starts at the furthest offset any member checkpointed for it, the worker never refreshes,
and it takes the group's snapshots (announced on the snapshot topic) for per-document mixtures.
Every checkpoint records, per partition, the offset ranges its statistics count
(``counters["ranges"]``), so a refresher can prove that no document is in two partial states.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
import types
import typing
from collections import Counter, deque
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from streamtopics import Rejection, StreamingTopicModel, TopicSnapshot, Vocabulary
from streamtopics import config as model_config

from .checkpoint import CheckpointStore, Offsets
from .messages import FORMATS, MessageDecoder
from .signals import install_graceful_stop
from .snapshot_directory import SnapshotDirectory

log = logging.getLogger("streamtopics.consumer")

ENV_PREFIX = "STREAMTOPICS_"
#: kafka-python settings passed through unchanged to the consumer and the producer.
SECURITY_SETTINGS = (
    "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile",
    "ssl_ciphers", "ssl_check_hostname", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password", "sasl_kerberos_service_name", "sasl_kerberos_domain_name",
)


def _option(default, help: str, **cli):
    """A config field: its default, its help text and how the CLI spells it (``cli``)."""
    factory = {"default_factory": lambda: type(default)()} if isinstance(default, (list, dict)) else {"default": default}
    return field(**factory, metadata={"help": help, **cli})


def _model_option(name: str):
    """A config field that is a model setting: its default and help are the model's own."""
    return _option(model_config.default(name), model_config.doc(name))


# --------------------------------------------------------------------------- configuration


@dataclass
class ConsumerConfig:
    """Every setting of the consumer service. Load it with :meth:`load` (file, then
    ``STREAMTOPICS_<NAME>`` environment variables, then explicit arguments such as CLI flags);
    the field names are the keys in all three. Counts and intervals of 0 turn a trigger off."""

    # connection and group
    bootstrap_servers: str = _option("127.0.0.1:9092", "Kafka bootstrap servers, comma-separated.")
    topics: list[str] = _option([], "Topic to consume (repeat, or separate with commas).", flag="--topic")
    pattern: str | None = _option(None, "Regular expression of topics to consume, instead of --topic.")
    group_id: str = _option("streamtopics", "Consumer group.")
    group_instance_id: str | None = _option(
        None, "Static group membership id: a restarted consumer gets its partitions back at once.")
    client_id: str = _option("streamtopics", "Kafka client id.")
    auto_offset_reset: str = _option(
        "earliest", "Where a partition nobody has read yet starts.", choices=("earliest", "latest"))
    poll_records: int = _option(500, "Most messages absorbed per poll (one batch).")
    poll_timeout_ms: int = _option(500, "Longest wait for messages in one poll.")
    # model
    model_name: str = _option("streamtopics", "Model name: the key of snapshot messages.")
    n_topics: int = _model_option("n_topics")
    vocabulary: str | None = _option(
        None, "Vocabulary file (one word per line); without one it is learned from the first documents.")
    vocabulary_size: int = _model_option("vocabulary_size")
    warmup_documents: int = _model_option("warmup_documents")
    anchor_min_df: str | int = _model_option("anchor_min_df")
    seed: int = _model_option("seed")
    model_options: dict = _option(
        {}, "Further StreamingTopicModel argument as KEY=VALUE (VALUE parsed as JSON if it can be).",
        flag="--model-option")
    refresh_every_documents: int = _option(10_000, "Refresh the topics after this many absorbed documents.")
    refresh_every_seconds: float = _option(0.0, "Refresh the topics at least this often (seconds).")
    # checkpoints
    checkpoint_dir: str = _option("streamtopics-checkpoints", "Directory of this consumer's checkpoints.")
    keep_checkpoints: int = _option(3, "Checkpoints kept (older ones are fall-backs if the newest is damaged).")
    checkpoint_every_messages: int = _option(50_000, "Checkpoint after this many consumed messages.")
    checkpoint_every_seconds: float = _option(60.0, "Checkpoint at least this often (seconds).")
    # messages
    message_format: str = _option("auto", "Message values: JSON objects, plain text, or auto-detect.", choices=FORMATS)
    text_field: str = _option("text", "JSON field holding the text.")
    tokens_field: str = _option("tokens", "JSON field holding a token list.")
    counts_field: str = _option("counts", "JSON field holding a {word: count} map.")
    id_field: str | None = _option("id", "JSON field holding the document id (its key); '' to ignore.")
    timestamp_field: str | None = _option("timestamp", "JSON field holding the document time; '' to ignore.")
    max_message_bytes: int = _option(1_048_576, "Larger messages are dead letters ('oversized').")
    # outputs
    snapshot_topic: str | None = _option(None, "Topic that receives each snapshot as JSON (top words only).")
    snapshot_dir: str | None = _option(None, "Directory that receives each full snapshot (snapshot-NNNNNN.json).")
    snapshot_top_words: int = _option(20, "Top words per topic in snapshot messages.")
    keep_snapshots: int = _option(10, "Snapshot files kept in the snapshot directory (0 = all).")
    doc_topics_topic: str | None = _option(None, "Topic that receives each absorbed document's topic mixture.")
    dead_letter_topic: str | None = _option(None, "Topic that receives rejected messages, reason in headers.")
    # operations
    stop_when_idle: float = _option(0.0, "Stop once caught up and idle this many seconds (0 = run forever).")
    reconnect_backoff_s: float = _option(0.5, "First wait before reconnecting after a Kafka failure.")
    reconnect_backoff_max_s: float = _option(30.0, "Longest wait between reconnection attempts.")
    flush_timeout_s: float = _option(60.0, "Longest wait for outputs to be delivered before a checkpoint.")
    log_every_seconds: float = _option(30.0, "Progress log interval.")
    # security (kafka-python names), extra client settings
    security_protocol: str = _option(
        "PLAINTEXT", "Kafka security protocol.", choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    ssl_cafile: str | None = _option(None, "CA file for SSL.")
    ssl_certfile: str | None = _option(None, "Client certificate for SSL.")
    ssl_keyfile: str | None = _option(None, "Client key for SSL.")
    ssl_password: str | None = _option(None, "Password of the client key.")
    ssl_crlfile: str | None = _option(None, "Certificate revocation list for SSL.")
    ssl_ciphers: str | None = _option(None, "Allowed SSL ciphers (OpenSSL cipher list).")
    ssl_check_hostname: bool = _option(True, "Check the broker's host name against its certificate.")
    sasl_mechanism: str | None = _option(None, "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER.")
    sasl_plain_username: str | None = _option(None, "SASL user name.")
    sasl_plain_password: str | None = _option(None, "SASL password.")
    sasl_kerberos_service_name: str | None = _option(None, "Kerberos service name (GSSAPI).")
    sasl_kerberos_domain_name: str | None = _option(None, "Kerberos domain name (GSSAPI).")
    consumer_options: dict = _option({}, "Further KafkaConsumer setting as KEY=VALUE.", flag="--consumer-option")
    producer_options: dict = _option({}, "Further KafkaProducer setting as KEY=VALUE.", flag="--producer-option")

    def __post_init__(self):
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("give either topics or a topic pattern (not both)")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be 'earliest' or 'latest'")
        if self.message_format not in FORMATS:
            raise ValueError(f"message_format must be one of {FORMATS}")
        if self.poll_records < 1 or self.n_topics < 1:
            raise ValueError("poll_records and n_topics must be at least 1")

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path=None, environ: typing.Mapping[str, str] | None = None, **overrides) -> "ConsumerConfig":
        """Defaults, overridden by the file at ``path`` (TOML or JSON; a ``[consume]`` table is
        used if present), then by ``STREAMTOPICS_<NAME>`` variables of ``environ`` (default
        ``os.environ``), then by ``overrides`` whose value is not None."""
        values: dict = {}
        if path is not None:
            values.update(_read_config_file(Path(path)))
        environ = os.environ if environ is None else environ
        names = {f.name for f in fields(cls)}
        values.update({name: environ[ENV_PREFIX + name.upper()] for name in names
                       if ENV_PREFIX + name.upper() in environ})
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict) -> "ConsumerConfig":
        """A config from ``{name: value}``; string values are parsed to the field's type."""
        hints = typing.get_type_hints(cls)
        unknown = set(values) - set(hints)
        if unknown:
            raise ValueError(f"unknown consumer settings: {sorted(unknown)}")
        return cls(**{name: _coerce(name, value, hints[name]) for name, value in values.items()})

    def to_dict(self, redact: bool = True) -> dict:
        """The settings as a dict, passwords replaced by '***' unless ``redact`` is False."""
        out = asdict(self)
        if redact:
            for name in ("ssl_password", "sasl_plain_password"):
                if out[name] is not None:
                    out[name] = "***"
        return out

    # ------------------------------------------------------------------ derived settings
    def client_settings(self) -> dict:
        """Connection and security settings shared by the consumer and the producer."""
        settings = {"bootstrap_servers": self.bootstrap_servers.split(","), "client_id": self.client_id,
                    "reconnect_backoff_ms": int(self.reconnect_backoff_s * 1000),
                    "reconnect_backoff_max_ms": int(self.reconnect_backoff_max_s * 1000)}
        settings.update({k: getattr(self, k) for k in SECURITY_SETTINGS if getattr(self, k) is not None})
        return settings

    def consumer_settings(self) -> dict:
        return {**self.client_settings(), "group_id": self.group_id, "group_instance_id": self.group_instance_id,
                "enable_auto_commit": False, "auto_offset_reset": self.auto_offset_reset,
                "max_poll_records": self.poll_records, **self.consumer_options}

    def producer_settings(self) -> dict:
        return {**self.client_settings(), "acks": "all", "linger_ms": 5, **self.producer_options}

    def message_decoder(self) -> MessageDecoder:
        return MessageDecoder(self.message_format, self.text_field, self.tokens_field, self.counts_field,
                              self.id_field or None, self.timestamp_field or None, self.max_message_bytes)

    def new_model(self, on_reject=None) -> StreamingTopicModel:
        """A fresh model as configured (refreshes are the service's job, not the model's)."""
        options = {"vocabulary_size": self.vocabulary_size, "warmup_documents": self.warmup_documents,
                   "anchor_min_df": self.anchor_min_df, "seed": self.seed, **self.model_options}
        return StreamingTopicModel(self.n_topics, self.vocabulary, refresh_every=None,
                                   on_reject=on_reject, **options)


def _read_config_file(path: Path) -> dict:
    if path.suffix.lower() == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
    elif path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    else:
        raise ValueError(f"{path}: config files must end in .toml or .json")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of settings")
    return data.get("consume", data)


def field_kinds(hint) -> tuple[list[type], bool]:
    """The plain types a config field accepts (``list[str]`` -> ``list``) and whether None is one."""
    members = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = [typing.get_origin(m) or m for m in members if m is not type(None)]
    return kinds, type(None) in members


def _coerce(name: str, value, hint):
    """``value`` as the type ``hint`` says; strings (environment, CLI) are parsed."""
    kinds, optional = field_kinds(hint)
    if isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in ("", "none", "null"):
            return None
        if int in kinds and str in kinds:  # "auto" or a number
            return int(text) if text.isdigit() else text
        kind = kinds[0]
        if kind is bool:
            if text.lower() not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ValueError(f"{name}: expected a boolean, got {value!r}")
            return text.lower() in ("1", "true", "yes", "on")
        if kind is list:
            return [item.strip() for item in text.split(",") if item.strip()]
        if kind is dict:
            parsed = json.loads(text)
            if not isinstance(parsed, dict):
                raise ValueError(f"{name}: expected a JSON object")
            return parsed
        if kind in (int, float):
            return kind(text)
        return text
    if isinstance(value, (list, tuple)) and list in kinds:
        return [item.strip() for entry in value for item in str(entry).split(",") if item.strip()]
    return value


# --------------------------------------------------------------------------- policies, metrics


class Trigger:
    """Fires after ``every_count`` units of work or ``every_seconds`` (0 turns either off),
    whichever comes first, and only if some work was done since it last fired."""

    def __init__(self, every_count: int = 0, every_seconds: float = 0.0, count: int = 0):
        self.every_count = int(every_count or 0)
        self.every_seconds = float(every_seconds or 0.0)
        self.reset(count)

    def reset(self, count: int) -> None:
        self._count, self._time = count, time.monotonic()

    def due(self, count: int) -> bool:
        if count <= self._count:
            return False
        return bool((self.every_count and count - self._count >= self.every_count)
                    or (self.every_seconds and time.monotonic() - self._time >= self.every_seconds))


class Backoff:
    """Exponential back-off from ``initial`` to ``maximum`` seconds, each delay drawn between
    half and all of the current ceiling so that restarted consumers do not retry in step."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0):
        self.initial, self.maximum = float(initial), float(maximum)
        self.attempts = 0

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * 2 ** self.attempts)
        self.attempts += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0


class ConsumerMetrics:
    """What the consumer has done, for the monitoring service to expose (:meth:`as_dict` is
    safe to call from another thread). Totals that survive restarts (documents absorbed,
    rejections by reason, dead letters) come from the model and the checkpoint; the rest count
    from the start of this process."""

    def __init__(self, window_seconds: float = 10.0):
        self._lock = threading.Lock()
        self.started = time.time()
        self.window_seconds = window_seconds
        self.messages_consumed = 0
        self.documents_absorbed = 0
        self.rejected: Counter = Counter()
        self.dead_letters = 0
        self.doc_topics_published = 0
        self.refreshes = 0
        self.refresh_failures = 0
        self.last_refresh_seconds: float | None = None
        self.snapshot_version: int | None = None
        self.checkpoints = 0
        self.last_checkpoint: dict | None = None
        self.checkpoints_set_aside = 0
        self.commit_failures = 0
        self.output_errors = 0
        self.reconnects = 0
        self.lag: dict[str, int] = {}
        self._samples: deque = deque()  # (monotonic time, documents absorbed)

    def update(self, **values) -> None:
        """Set attributes (counters are set to their new totals) under the lock."""
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)
            now = time.monotonic()
            self._samples.append((now, self.documents_absorbed))
            while len(self._samples) > 2 and now - self._samples[1][0] > self.window_seconds:
                self._samples.popleft()

    def increment(self, name: str, by: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + by)

    @property
    def documents_per_second(self) -> float:
        """Absorption rate over the last ``window_seconds``."""
        with self._lock:
            if len(self._samples) < 2:
                return 0.0
            (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
            return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def as_dict(self) -> dict:
        rate = self.documents_per_second
        with self._lock:
            return {
                "uptime_seconds": time.time() - self.started, "messages_consumed": self.messages_consumed,
                "documents_absorbed": self.documents_absorbed, "documents_per_second": rate,
                "rejected": dict(self.rejected), "dead_letters": self.dead_letters,
                "doc_topics_published": self.doc_topics_published, "refreshes": self.refreshes,
                "refresh_failures": self.refresh_failures, "last_refresh_seconds": self.last_refresh_seconds,
                "snapshot_version": self.snapshot_version, "checkpoints": self.checkpoints,
                "last_checkpoint": self.last_checkpoint, "checkpoints_set_aside": self.checkpoints_set_aside,
                "commit_failures": self.commit_failures, "output_errors": self.output_errors,
                "reconnects": self.reconnects, "lag": dict(self.lag), "total_lag": sum(self.lag.values()),
            }


# --------------------------------------------------------------------------- outputs


class Outputs:
    """Where results go: snapshot topic and directory, document-topics topic, dead letters.

    Sends are asynchronous; :meth:`flush` waits until all are delivered (the checkpoint does
    so first). A send that fails is logged and counted, never allowed to stop the stream."""

    HEADER = "streamtopics."

    def __init__(self, config: ConsumerConfig, metrics: ConsumerMetrics):
        self.config = config
        self.metrics = metrics
        self.producer: KafkaProducer | None = None
        self.snapshots = None
        if config.snapshot_dir:
            self.snapshots = SnapshotDirectory(config.snapshot_dir, keep=config.keep_snapshots)
            self.snapshots.path.mkdir(parents=True, exist_ok=True)

    @property
    def needs_producer(self) -> bool:
        c = self.config
        return any((c.snapshot_topic, c.doc_topics_topic, c.dead_letter_topic))

    def connect(self) -> None:
        if self.needs_producer and self.producer is None:
            self.producer = KafkaProducer(**self.config.producer_settings())

    def _send(self, topic: str, key: bytes | None, value: bytes | None, headers=None) -> None:
        try:
            future = self.producer.send(topic, key=key, value=value, headers=headers or [])
        except KafkaError as error:
            self._failed(topic, error)
            return
        future.add_errback(lambda error: self._failed(topic, error))

    def _failed(self, topic: str, error) -> None:
        self.metrics.increment("output_errors")
        log.error("could not deliver a message to %s: %s", topic, error)

    def snapshot(self, snapshot: TopicSnapshot) -> None:
        c = self.config
        if self.snapshots is not None:
            self.snapshots.save(snapshot)
        if c.snapshot_topic:
            self._send(c.snapshot_topic, c.model_name.encode(), snapshot.to_json(c.snapshot_top_words).encode())

    def doc_topics(self, record, key, version: int, topic_ids: list[int], mixture) -> None:
        value = {"key": _text_key(key, record), "snapshot_version": version,
                 "topics": {str(t): round(float(w), 6) for t, w in zip(topic_ids, mixture)},
                 "source": {"topic": record.topic, "partition": record.partition, "offset": record.offset}}
        self._send(self.config.doc_topics_topic, _text_key(key, record).encode(), json.dumps(value).encode())
        self.metrics.increment("doc_topics_published")

    def dead_letter(self, rejection: Rejection, record=None, key=None, document=None) -> None:
        """Send a rejected message: the original record (value, key and headers kept, reason
        and origin added), or -- for a warm-up document rejected only once the vocabulary was
        frozen -- its word counts."""
        if not self.config.dead_letter_topic:
            return
        ours = [("reason", rejection.reason), ("detail", rejection.detail), ("model", self.config.model_name)]
        if record is not None:
            value, key_bytes, theirs = record.value, record.key, list(record.headers or [])
            ours += [("topic", record.topic), ("partition", str(record.partition)), ("offset", str(record.offset)),
                     ("timestamp", str(record.timestamp))]
            if value is not None and len(value) > self.config.max_message_bytes:
                value = value[: self.config.max_message_bytes]
                ours.append(("truncated", "true"))
        else:
            value, key_bytes, theirs = json.dumps(document).encode(), _key_bytes(key), []
            ours.append(("origin", "warmup"))
        headers = theirs + [(self.HEADER + name, text.encode()) for name, text in ours]
        self._send(self.config.dead_letter_topic, key_bytes, value, headers)

    def flush(self) -> None:
        """Block until every send is delivered or has failed; raises KafkaTimeoutError."""
        if self.producer is not None:
            self.producer.flush(timeout=self.config.flush_timeout_s)

    def close(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.producer.close(timeout=self.config.flush_timeout_s)
            self.producer = None


def _key_bytes(key) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    return str(key).encode()


def _text_key(key, record) -> str:
    if key is None:
        return f"{record.topic}/{record.partition}/{record.offset}"
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)


# --------------------------------------------------------------------------- the service


@dataclass
class _InFlight:
    """The message whose document the model is absorbing right now."""

    record: typing.Any
    document: typing.Any
    rejected: bool = False


class _Rebalance(ConsumerRebalanceListener):
    """Forwards kafka-python's rebalance callbacks (which run on its IO thread, while the
    polling thread waits inside ``poll`` or ``close``) to the service."""

    def __init__(self, service: "TopicModelConsumer"):
        self.service = service

    def on_partitions_revoked(self, revoked):
        self.service._on_revoked(revoked)

    def on_partitions_assigned(self, assigned):
        self.service._on_assigned(assigned)


class TopicModelConsumer:
    """Consume Kafka topics into a :class:`StreamingTopicModel` (see the module docstring).

    ``model`` is the live model, ``positions`` the next offset to read per ``(topic,
    partition)`` that the model's statistics reflect, ``metrics`` a :class:`ConsumerMetrics`.
    :meth:`run` blocks until :meth:`stop` (or a signal, after :meth:`install_signal_handlers`).
    """

    def __init__(self, config: ConsumerConfig, group=None):
        self.config = config
        self.group = group  # consumers.group.GroupView of a scale-out worker, else None
        self.metrics = ConsumerMetrics()
        self.decoder = config.message_decoder()
        self.outputs = Outputs(config, self.metrics)
        self.store = CheckpointStore(config.checkpoint_dir, keep=config.keep_checkpoints)
        self._stop = threading.Event()
        self._consumer: KafkaConsumer | None = None
        self._unplaced: set[TopicPartition] = set()  # assigned, paused, not yet sought
        self._in_flight: _InFlight | None = None
        self._closing = False
        self._stream_time: float | None = None
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
                     self.model.documents_absorbed, _offsets_text(self.positions))
        self._counters.setdefault("ranges", {})  # "topic/partition" -> [[start, end), ...] counted here
        self._checkpointed = dict(self.positions)
        self._messages = 0  # consumed by this process
        self._refresh = Trigger(config.refresh_every_documents, config.refresh_every_seconds,
                                self.model.documents_absorbed)
        self._checkpoint_due = Trigger(config.checkpoint_every_messages, config.checkpoint_every_seconds)
        self._checkpoint_retry_at = 0.0
        self.metrics.update(checkpoints_set_aside=len(self.restored.skipped),
                            snapshot_version=None if self.model.snapshot is None else self.model.snapshot.version)
        self._update_totals()

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

    def run(self) -> ConsumerMetrics:
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
        """Checkpoint (unless an unexpected error may have left the model mid-update) and close."""
        try:
            if checkpoint:
                self.checkpoint()
        except KafkaError as error:
            log.error("final checkpoint skipped, outputs not delivered (%s); the next start re-reads "
                      "from checkpoint offsets %s", error, _offsets_text(self._checkpointed))
        finally:
            self._disconnect()
            self.outputs.close()
            self.store.close()
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
            self._update_lag()
            self._maybe_refresh()
            self._maybe_checkpoint()
            now = time.monotonic()
            if self.config.log_every_seconds and now - last_log >= self.config.log_every_seconds:
                last_log = now
                m = self.metrics.as_dict()
                log.info("absorbed %d documents (%.0f/s), rejected %s, lag %d", m["documents_absorbed"],
                         m["documents_per_second"], m["rejected"], m["total_lag"])
            if self.config.stop_when_idle and now - idle_since >= self.config.stop_when_idle and self._caught_up():
                log.info("caught up and idle for %.1f s: stopping", now - idle_since)
                self.stop()

    def _absorb(self, batch: dict) -> None:
        absorbed = []  # (record, key, document) of documents the model took
        for tp, records in batch.items():
            position = (tp.topic, tp.partition)
            for record in records:
                if record.offset < self.positions.get(position, 0):
                    continue  # already in the statistics: never count a document twice
                self._messages += 1
                decoded = self.decoder.decode(record.value, record.key)
                if isinstance(decoded, Rejection):
                    self._reject_message(decoded, record)
                else:
                    self._in_flight = _InFlight(record, decoded.document)
                    self._advance_stream_time(decoded.timestamp, record.timestamp)
                    self.model.learn_one(decoded.document, decoded.key, stream_time=self._stream_time)
                    if not self._in_flight.rejected:
                        absorbed.append((record, decoded.key, decoded.document))
                    self._in_flight = None
                self.positions[position] = record.offset + 1
            self._extend_range(position)
        if self.group is not None and self.config.doc_topics_topic:
            self.group.follow_snapshots(self.model)
        if absorbed and self.config.doc_topics_topic and self.model.snapshot is not None:
            snapshot = self.model.snapshot
            mixtures = self.model.infer([document for _, _, document in absorbed])
            for (record, key, _), mixture in zip(absorbed, mixtures):
                self.outputs.doc_topics(record, key, snapshot.version, snapshot.topic_ids, mixture)
        self._update_totals()

    def _advance_stream_time(self, document_time: float | None, record_ms: int) -> None:
        """Stream time: the latest document time seen (the record's if the message has none)."""
        stamp = document_time if document_time is not None else (record_ms / 1000 if record_ms >= 0 else None)
        if stamp is not None:
            self._stream_time = stamp if self._stream_time is None else max(self._stream_time, stamp)

    def _reject_message(self, rejection: Rejection, record) -> None:
        counts = self._counters["message_rejections"]
        counts[rejection.reason] = counts.get(rejection.reason, 0) + 1
        self._dead_letter(rejection, record=record)

    def _on_model_reject(self, rejection: Rejection, document, key) -> None:
        """The model's ``on_reject``: the message being absorbed, or a warm-up document
        rejected when the vocabulary was frozen."""
        if self._in_flight is not None and document is self._in_flight.document:
            self._in_flight.rejected = True
            self._dead_letter(rejection, record=self._in_flight.record)
        else:
            self._dead_letter(rejection, key=key, document=document)

    def _dead_letter(self, rejection: Rejection, **origin) -> None:
        self._counters["dead_letters"] += 1
        self.outputs.dead_letter(rejection, **origin)

    def _update_totals(self) -> None:
        rejected = Counter(self.model.rejections)
        rejected.update(self._counters["message_rejections"])
        self.metrics.update(messages_consumed=self._messages, documents_absorbed=self.model.documents_absorbed,
                            rejected=rejected, dead_letters=self._counters["dead_letters"])

    def _update_lag(self) -> None:
        lag = {}
        for tp in self._consumer.assignment():
            highwater = self._consumer.highwater(tp)
            position = self.positions.get((tp.topic, tp.partition))
            if highwater is not None and position is not None:
                lag[f"{tp.topic}/{tp.partition}"] = max(0, highwater - position)
        self.metrics.update(lag=lag)

    def _caught_up(self) -> bool:
        assigned = self._consumer.assignment()
        if not assigned or self._unplaced:
            return False
        try:
            ends = self._consumer.end_offsets(list(assigned))
        except KafkaError:
            return False
        return all(self.positions.get((tp.topic, tp.partition), -1) >= end for tp, end in ends.items())

    # ------------------------------------------------------------------ refresh
    def _maybe_refresh(self) -> None:
        if self.group is not None:
            return  # a scale-out worker: the group's refresher refreshes
        if self._refresh.due(self.model.documents_absorbed) and self.model.vocabulary is not None:
            self.refresh()

    def refresh(self) -> TopicSnapshot | None:
        """Recompute the topics now and publish the snapshot; None if the refresh failed (it
        is logged and counted; the stream goes on)."""
        self._refresh.reset(self.model.documents_absorbed)
        t0 = time.perf_counter()
        try:
            snapshot = self.model.refresh(position=_position_json(self.positions), stream_time=self._stream_time)
        except Exception:  # noqa: BLE001 - a failed refresh must not stop the stream
            self.metrics.increment("refresh_failures")
            log.exception("refresh failed at %d documents", self.model.documents_absorbed)
            return None
        self.outputs.snapshot(snapshot)
        self.metrics.increment("refreshes")
        self.metrics.update(last_refresh_seconds=time.perf_counter() - t0, snapshot_version=snapshot.version)
        log.info("snapshot %d at %d documents (%.2f s)", snapshot.version, snapshot.documents_seen,
                 time.perf_counter() - t0)
        return snapshot

    # ------------------------------------------------------------------ checkpoints
    def _maybe_checkpoint(self) -> None:
        if not self._checkpoint_due.due(self._messages) or time.monotonic() < self._checkpoint_retry_at:
            return
        try:
            self.checkpoint()
        except KafkaError as error:
            delay = Backoff(self.config.reconnect_backoff_s, self.config.reconnect_backoff_max_s).next_delay()
            self._checkpoint_retry_at = time.monotonic() + delay
            log.warning("checkpoint postponed %.1f s: outputs not delivered (%s)", delay, error)

    def checkpoint(self, commit_async: bool = False) -> bool:
        """Flush outputs, write a checkpoint, commit its offsets -- in that order (see
        :mod:`consumers.checkpoint`). Does nothing if no message was consumed since the last
        one. Returns whether a checkpoint was written; raises KafkaError if the flush fails."""
        if self.positions == self._checkpointed:
            return False
        t0 = time.perf_counter()
        self.outputs.flush()
        saved = self.store.save(self.model, self.positions, self._counters)
        self._checkpointed = dict(saved.offsets)
        self._checkpoint_due.reset(self._messages)
        seconds = time.perf_counter() - t0
        self.metrics.increment("checkpoints")
        self.metrics.update(last_checkpoint={"sequence": saved.sequence, "bytes": saved.state_bytes,
                                             "seconds": seconds, "documents": self.model.documents_absorbed})
        log.debug("checkpoint %d written in %.2f s (%d bytes)", saved.sequence, seconds, saved.state_bytes)
        self._commit(saved.sequence, commit_async)
        return True

    def _commit(self, sequence: int, asynchronous: bool) -> None:
        """Commit the checkpointed offsets of the assigned partitions, tagged with our member id.
        A failed commit is harmless (the checkpoint decides where we resume), so it is only
        counted."""
        if self._consumer is None:
            return
        metadata = json.dumps({"member": self.store.member_id, "checkpoint": sequence})
        offsets = {tp: OffsetAndMetadata(self._checkpointed[(tp.topic, tp.partition)], metadata, -1)
                   for tp in self._consumer.assignment()
                   if (tp.topic, tp.partition) in self._checkpointed and tp not in self._unplaced}
        if not offsets:
            return
        try:
            if asynchronous:
                self._consumer.commit_async(offsets, callback=self._commit_done)
            else:
                self._consumer.commit(offsets, timeout_ms=int(self.config.flush_timeout_s * 1000))
        except KafkaError as error:
            self._commit_done(offsets, error)

    def _commit_done(self, offsets, result) -> None:
        if isinstance(result, Exception):
            self.metrics.increment("commit_failures")
            log.warning("offset commit failed (harmless, the checkpoint is ahead): %s", result)

    # ------------------------------------------------------------------ rebalancing
    def _on_revoked(self, revoked) -> None:
        """Checkpoint before giving partitions up, so their next owner starts exactly where our
        statistics end. Runs on kafka-python's IO thread: the commit is asynchronous."""
        self._unplaced.difference_update(revoked)
        if self._closing or not revoked:
            return
        try:
            self.checkpoint(commit_async=True)
        except Exception:  # noqa: BLE001 - kafka-python would only log it
            log.exception("checkpoint on revocation of %s failed", sorted(revoked))
            if self.group is not None:
                # The next owner starts at our last checkpoint; documents we hold beyond it
                # would be counted twice if a later checkpoint of ours included them. Leave
                # now: a restarted worker resumes from its last checkpoint.
                log.critical("scale-out worker cannot checkpoint before giving partitions up: exiting")
                os._exit(75)

    def _on_assigned(self, assigned) -> None:
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
            self._open_range((tp.topic, tp.partition), start)
            log.info("reading %s/%d from offset %d", tp.topic, tp.partition, start)

    def _open_range(self, position: tuple[str, int], start: int) -> None:
        """Counting of ``position`` (re)starts at ``start``: a new range unless it continues the last."""
        ranges = self._counters["ranges"].setdefault(f"{position[0]}/{position[1]}", [])
        if not ranges or ranges[-1][1] != start:
            ranges.append([start, start])

    def _extend_range(self, position: tuple[str, int]) -> None:
        ranges = self._counters["ranges"].get(f"{position[0]}/{position[1]}")
        if ranges:
            ranges[-1][1] = self.positions[position]
        else:  # placed before ranges were recorded (an older checkpoint): count from here
            self._open_range(position, self.positions[position])

    def _start_offset(self, tp: TopicPartition) -> int:
        """Our checkpoint's offset, unless another member committed further (its statistics hold
        those documents) or -- in a scale-out group -- checkpointed further in the shared store;
        for a partition nobody read, ``auto_offset_reset``."""
        own = self.positions.get((tp.topic, tp.partition))
        if self.group is not None:
            peer = self.group.peer_offset(tp.topic, tp.partition)
            if peer is not None and (own is None or peer > own):
                own = peer
        committed = self._consumer.committed(tp, metadata=True, timeout_ms=int(self.config.flush_timeout_s * 1000))
        if committed is not None and committed.offset >= 0 and _commit_member(committed.metadata) != self.store.member_id:
            if own is None or committed.offset > own:
                return committed.offset
        if own is not None:
            return own
        if self.config.auto_offset_reset == "latest":
            return self._consumer.end_offsets([tp])[tp]
        return self._consumer.beginning_offsets([tp])[tp]


def _commit_member(metadata: str | None) -> str | None:
    try:
        return json.loads(metadata or "").get("member")
    except (ValueError, AttributeError):
        return None


def _position_json(positions: Offsets) -> dict:
    out: dict = {}
    for (topic, partition), offset in sorted(positions.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _offsets_text(positions: Offsets) -> str:
    return ", ".join(f"{t}/{p}@{o}" for (t, p), o in sorted(positions.items())) or "none"
