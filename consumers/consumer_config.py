"""The consumer service's settings: one dataclass, loaded from a file, the environment and flags.

::

    config = ConsumerConfig.load("consume.toml", topics=["news"])   # file < environment < arguments

The field names are the keys in all three places (environment: ``STREAMTOPICS_<NAME>``). Model
settings take their default and help text from :mod:`streamtopics.config` (never restated here);
the ``consume`` command's options are generated from these fields (:mod:`consumers.cli.consume`).
Strings (environment, CLI) are coerced to each field's type by :func:`coerce`.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
import warnings
from dataclasses import InitVar, asdict, dataclass, field, fields
from pathlib import Path

from streamtopics import config as model_config

from .messages import FORMATS, MessageDecoder
from .renames import deprecated

if typing.TYPE_CHECKING:
    from streamtopics import StreamingTopicModel

ENV_PREFIX = "STREAMTOPICS_"
#: The text options' help, shared with the replay's options (:mod:`consumers.cli.options`).
STOP_WORDS_HELP = "File of more stop words, one per line, added to the built-in English list."
STRIP_MAIL_HELP = ("Give mail and news transport no tokens: a leading header block gives only its Subject, "
                   "Keywords and Summary; '... writes:' lines, e-mail addresses, URLs and encoded lines go.")
#: kafka-python settings passed through unchanged to the consumer and the producer.
SECURITY_SETTINGS = (
    "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile",
    "ssl_ciphers", "ssl_check_hostname", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password", "sasl_kerberos_service_name", "sasl_kerberos_domain_name",
)


def _option(default, help: str, **cli):
    """A config field: its default, its help text and how the CLI spells it (``cli``: ``flag``,
    ``choices``; ``old``: the field's former name, still accepted with a deprecation message)."""
    factory = {"default_factory": lambda: type(default)()} if isinstance(default, (list, dict)) else {"default": default}
    return field(**factory, metadata={"help": help, **cli})


def _model_option(name: str):
    """A config field that is a model setting: its default and help are the model's own."""
    return _option(model_config.default(name), model_config.doc(name))


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
    stop_words: str | None = _option(None, STOP_WORDS_HELP)
    strip_mail: bool = _option(True, STRIP_MAIL_HELP)
    seed: int = _model_option("seed")
    model_options: dict = _option(
        {}, "Further StreamingTopicModel argument as KEY=VALUE (VALUE parsed as JSON if it can be).",
        flag="--model-option")
    refresh_every_documents: int = _option(10_000, "Refresh the topics after this many absorbed documents.")
    refresh_every_wall_seconds: float = _option(
        0.0, "Refresh the topics at least this often (seconds of wall-clock time).", old="refresh_every_seconds")
    # checkpoints
    checkpoint_dir: str = _option("streamtopics-checkpoints", "Directory of this consumer's checkpoints.")
    keep_checkpoints: int = _option(3, "Checkpoints kept (older ones are fall-backs if the newest is damaged).")
    checkpoint_every_messages: int = _option(50_000, "Checkpoint after this many consumed messages.")
    checkpoint_every_wall_seconds: float = _option(
        60.0, "Checkpoint at least this often (seconds of wall-clock time).", old="checkpoint_every_seconds")
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
    flush_timeout_s: float = _option(
        5.0, "Longest wait for outputs to be delivered before a checkpoint (if they are not, the checkpoint is "
        "postponed; at shutdown it is skipped, and the next start sends them again).")
    commit_timeout_s: float = _option(
        5.0, "Longest wait for the offset commit after a checkpoint (a failed commit is harmless: the checkpoint wins), "
        "and for the end offsets that stop_when_idle asks for.")
    log_every_seconds: float = _option(30.0, "Progress log interval (seconds of wall-clock time).")
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
    # former names as Python keywords (``dataclasses.replace(config, refresh_every_seconds=0)``):
    # a DeprecationWarning, then the value goes to the new name
    refresh_every_seconds: InitVar[float | None] = None
    checkpoint_every_seconds: InitVar[float | None] = None

    def __post_init__(self, refresh_every_seconds=None, checkpoint_every_seconds=None):
        for old, value in (("refresh_every_seconds", refresh_every_seconds),
                           ("checkpoint_every_seconds", checkpoint_every_seconds)):
            if value is not None:
                warnings.warn(f"{old} is deprecated; use {RENAMED[old]}", DeprecationWarning, stacklevel=3)
                setattr(self, RENAMED[old], value)
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("give either topics or a topic pattern (not both)")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be 'earliest' or 'latest'")
        if self.message_format not in FORMATS:
            raise ValueError(f"message_format must be one of {FORMATS}")
        if self.poll_records < 1 or self.n_topics < 1:
            raise ValueError("poll_records and n_topics must be at least 1")
        if not self.commit_timeout_s > 0:
            raise ValueError("commit_timeout_s must be positive")
        unknown = sorted(set(self.model_options) - set(MODEL_SETTINGS))
        if unknown:
            raise ValueError(f"model_options: {unknown_names(unknown, MODEL_SETTINGS, 'model setting')}")

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
        for name in [*RENAMED, *(f.name for f in fields(cls))]:  # a new name after its old one: it wins
            variable = ENV_PREFIX + name.upper()
            if variable in environ:
                if name in RENAMED:
                    deprecated(variable, ENV_PREFIX + RENAMED[name].upper())
                values[RENAMED.get(name, name)] = environ[variable]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict) -> "ConsumerConfig":
        """A config from ``{name: value}``; string values are parsed to the field's type. A
        former name (:data:`RENAMED`) is taken with a deprecation message, unless the new one is given."""
        hints = typing.get_type_hints(cls)
        names = [f.name for f in fields(cls)]
        values = dict(values)
        for old in [name for name in values if name in RENAMED]:
            deprecated(old, RENAMED[old])
            values.setdefault(RENAMED[old], values.pop(old))
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(unknown_names(unknown, names, "consumer setting"))
        return cls(**{name: coerce(name, value, hints[name]) for name, value in values.items()})

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
        """KafkaConsumer's settings. ``fetch_max_wait_ms`` is 100, not kafka-python's 500: when a
        poll ends inside a partition's fetched records and nothing else is buffered, kafka-python
        3 sends the next fetch without that partition, and if the partitions it does ask for
        are caught up the broker holds the request that long while the buffered partition runs
        dry (one fetch in flight per broker). Measured on the end-to-end path of
        benchmarks/kafka_throughput.py (2.5-3.4 s a run): a 0.4-0.5 s stall in 2 of 19 runs at
        500 ms, none in 16 at 100 ms. An idle consumer asks 10 times a second instead of twice."""
        return {**self.client_settings(), "group_id": self.group_id, "group_instance_id": self.group_instance_id,
                "enable_auto_commit": False, "auto_offset_reset": self.auto_offset_reset,
                "max_poll_records": self.poll_records, "fetch_max_wait_ms": 100, **self.consumer_options}

    def producer_settings(self) -> dict:
        return {**self.client_settings(), "acks": "all", "linger_ms": 5, **self.producer_options}

    def message_decoder(self) -> MessageDecoder:
        return MessageDecoder(self.message_format, self.text_field, self.tokens_field, self.counts_field,
                              self.id_field or None, self.timestamp_field or None, self.max_message_bytes)

    def new_model(self, on_reject=None) -> StreamingTopicModel:
        """A fresh model as configured (refreshes are the service's job, not the model's)."""
        from streamtopics import StreamingTopicModel
        from streamtopics.text.tokenizer import configured_tokenizer

        options = {"vocabulary_size": self.vocabulary_size, "warmup_documents": self.warmup_documents,
                   "anchor_min_df": self.anchor_min_df, "seed": self.seed, **self.model_options}
        tokenizer = configured_tokenizer(self.stop_words, self.strip_mail)
        if tokenizer is not None:
            options["tokenizer"] = tokenizer
        return StreamingTopicModel(self.n_topics, self.vocabulary, refresh_every=None,
                                   on_reject=on_reject, **options)


#: former name -> name of the settings that were renamed
RENAMED = {f.metadata["old"]: f.name for f in fields(ConsumerConfig) if "old" in f.metadata}
#: what ``model_options`` may set: the model's settings
MODEL_SETTINGS = [f.name for f in fields(model_config.ModelConfig)]


def unknown_names(unknown: list[str], known, what: str) -> str:
    """``unknown X setting 'a' (did you mean 'b'?)``: names the unknown, suggests the nearest known."""
    parts = []
    for name in unknown:
        nearest = difflib.get_close_matches(name, list(known), n=1)
        parts.append(repr(name) + (f" (did you mean {nearest[0]!r}?)" if nearest else ""))
    return f"unknown {what}{'s' if len(unknown) > 1 else ''}: {', '.join(parts)}"


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


def coerce(name: str, value, hint):
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
