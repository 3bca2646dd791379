"""Options shared by several commands (how to read an archive, the model's settings, what the
topics are made of, --serve) and the live monitoring service that --serve starts.

A model setting has one spelling in every command, its ModelConfig field's (:func:`model_option`:
``--n-topics``, with ModelConfig's default and help); a former spelling (``--topics``) is still
accepted by a :class:`Command`, with a one-line deprecation message, and hidden from --help."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path

import click

from streamtopics import config as model_config

from ..consumer_config import STOP_WORDS_HELP, STRIP_MAIL_HELP
from ..extras import require
from ..renames import deprecated
from ..signals import on_stop_signals
from ..sources import FORMATS
from ..times import parse_time
from .console import BadInput, Console


def parse_duration(value: str) -> float:
    """``90``, ``90s``, ``15m``, ``6h``, ``1d``, ``2w`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    text = value.strip().lower()
    factor = units.get(text[-1:], None)
    try:
        seconds = float(text[:-1] if factor else text) * (factor or 1)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 90s, 15m, 6h, 1d)") from None
    if seconds <= 0:
        raise click.BadParameter("must be positive")
    return seconds


def source_options(function):
    """Options that say how to read an archive (shared by replay, infer and produce)."""
    options = [
        click.option("--format", "format_", type=click.Choice(FORMATS), default="auto", show_default=True,
                     help="Archive format; auto: from the name (.jsonl .csv .tsv, docword.*, .ldac, a directory, "
                          "kafka://, builtin; else one document per line). .gz/.zst are decompressed."),
        click.option("--vocabulary", "vocabulary_file", type=click.Path(dir_okay=False), metavar="FILE",
                     help="LDA-C: the corpus's word list, one word a line (line i = word id i, from 0). "
                          "Default: found beside it (NAME.vocab, NAME.tokens, vocab.txt, ...)."),
        click.option("--text-field", "text_fields", multiple=True, metavar="NAME",
                     help="JSON/CSV field with the text; repeat to join several (default: text). "
                          "For Kafka: read message values as JSON objects."),
        click.option("--id-field", default="id", show_default=True, metavar="NAME",
                     help="JSON/CSV field with the document key (optional per record)."),
        click.option("--time-field", metavar="NAME", help="JSON/CSV field with the timestamp."),
        click.option("--time-format", metavar="FMT",
                     help="strptime format of the time field (default: epoch seconds or ISO 8601)."),
        click.option("--from-offset", type=click.IntRange(min=0), help="Kafka: start at this offset."),
        click.option("--from-time", metavar="TIME", help="Kafka: start at this time (ISO 8601 or epoch)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def source_kwargs(format_, vocabulary_file, text_fields, id_field, time_field, time_format, from_offset,
                  from_time) -> dict:
    if from_offset is not None and from_time is not None:
        raise click.UsageError("give --from-offset or --from-time, not both")
    start = "beginning"
    if from_offset is not None:
        start = from_offset
    elif from_time is not None:
        try:
            start = parse_time(from_time)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--from-time") from None
    return {"format": format_, "text_fields": list(text_fields) or None, "id_field": id_field or None,
            "time_field": time_field, "time_format": time_format, "kafka_start": start, "vocabulary": vocabulary_file}


class TimeSkew(click.ParamType):
    """``--max-time-skew``: a duration (:func:`parse_duration`), or ``none`` for no bound."""

    name = "duration|none"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, float):
            return value
        if str(value).strip().lower() == "none":
            return None
        return parse_duration(str(value))


class Option(click.Option):
    """A click option that still accepts its ``old`` spellings (hidden from --help); the
    :class:`Command` it belongs to rewrites them to its name."""

    def __init__(self, *args, old: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.old = tuple(old)


class Command(click.Command):
    """A command whose options (:class:`Option`) may have old spellings: each use of one is
    replaced by the option's name before parsing, with a one-line deprecation message on stderr."""

    def parse_args(self, ctx, args):
        renamed = {old: param.opts[0] for param in self.params for old in getattr(param, "old", ())}
        return super().parse_args(ctx, respell(args, renamed))


def respell(args: list[str], renamed: dict[str, str]) -> list[str]:
    """``args`` with each old spelling (``--topics 5``, ``--topics=5``) replaced by its new one
    (up to a ``--``, after which nothing is an option)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        old, sep, value = arg.partition("=")
        if old in renamed:
            deprecated(old, renamed[old])
            out[i] = renamed[old] + sep + value
    return out


class AutoOr(click.ParamType):
    """``auto`` or a value of ``kind`` (a model setting such as ``anchor_min_df``)."""

    def __init__(self, kind: click.ParamType):
        self.kind, self.name = kind, f"auto|{kind.name}"

    def convert(self, value, param, ctx):
        return "auto" if value == "auto" else self.kind.convert(value, param, ctx)


def model_option(name: str, type=None, old: tuple[str, ...] = (), more_help: str = "", **kwargs):
    """The option of model setting ``name``: spelled as the ModelConfig field (``--n-topics``),
    with ModelConfig's default and help (``more_help`` adds what only the command line needs
    said); ``old``: spellings still accepted (see :class:`Command`). A yes/no setting is a switch
    (``--refine-carry/--no-refine-carry``), so either answer can be given whatever the default."""
    spelling = "--" + name.replace("_", "-")
    if isinstance(model_config.default(name), bool):
        spelling = f"{spelling}/--no-{spelling[2:]}"
    return click.option(spelling, name, cls=Option, old=old, type=type,
                        default=model_config.default(name), show_default=True,
                        help=" ".join(filter(None, (model_config.doc(name), more_help))), **kwargs)


def model_options(function):
    """The model's size: topics, vocabulary, warm-up, seed."""
    options = [
        model_option("n_topics", click.IntRange(min=1), old=("--topics",)),
        model_option("vocabulary_size", click.IntRange(min=2),
                     more_help="Memory and checkpoints grow with its square: 10,000 words = 400 MB."),
        model_option("warmup_documents", click.IntRange(min=1), old=("--warmup",)),
        model_option("seed", int),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def refinement_options(function):
    """--refine-device: where each refresh's refinement runs; --refine-carry: whether it keeps its
    work from one refresh to the next; --refine-fill-restarts: whether restarts challenge it while the
    reservoir fills."""
    function = model_option("refine_fill_restarts")(function)
    function = model_option("refine_carry")(function)
    return model_option("refine_device", click.Choice(model_config.REFINE_DEVICES),
                        more_help="cuda needs numba's CUDA target: pip install 'numba-cuda[cu13]' "
                                  "(cu12 for a CUDA 12 driver).")(function)


def topic_options(function):
    """What the topics are made of: stop words, document-frequency limits, identity matching."""
    options = [
        click.option("--stop-words", "stop_words_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     metavar="FILE", help=STOP_WORDS_HELP),
        click.option("--strip-mail/--no-strip-mail", default=True, show_default=True, help=STRIP_MAIL_HELP),
        model_option("max_df", click.FloatRange(min=0, max=1, min_open=True), metavar="FRACTION",
                     more_help="A data-driven stop list for mail or newswire boilerplate: 0.1-0.3."),
        model_option("anchor_min_df", AutoOr(click.IntRange(min=1)), old=("--min-df",),
                     more_help="'auto' grows with the stream (docs/configuration.md)."),
        model_option("match_threshold", click.FloatRange(min=0, min_open=True), metavar="X"),
        model_option("burn_in", click.IntRange(min=0), metavar="N"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def topic_settings(stop_words_file, strip_mail, max_df, anchor_min_df, match_threshold, burn_in) -> dict:
    """StreamingTopicModel keyword arguments from :func:`topic_options`."""
    from streamtopics.text.tokenizer import configured_tokenizer

    settings = {"max_df": max_df, "anchor_min_df": anchor_min_df, "match_threshold": match_threshold,
                "burn_in": burn_in}
    tokenizer = configured_tokenizer(stop_words_file, strip_mail)
    if tokenizer is not None:
        settings["tokenizer"] = tokenizer
    return settings


def serve_options(function):
    """--serve HOST:PORT and --allow-remote for commands that run a stream."""
    function = click.option("--allow-remote", is_flag=True,
                            help="Allow --serve on a non-loopback address (then set STREAMTOPICS_TOKEN: "
                                 "requests without 'Authorization: Bearer TOKEN' get 401).")(function)
    return click.option("--serve", "serve_at", metavar="HOST:PORT",
                        help="Serve the live dashboard, JSON API and Prometheus /metrics while it runs, "
                             "e.g. 127.0.0.1:8765 (loopback only unless --allow-remote).")(function)


@contextmanager
def live_service(console: "Console", serve_at: str | None, allow_remote: bool, title: str,
                 stall_after: float | None = 60.0):
    """Start the monitoring service in a thread when --serve is given; yields (LiveSource,
    handle) or None. The token, if any, comes from $STREAMTOPICS_TOKEN (never the command line).
    Readiness fails after ``stall_after`` seconds without progress (None: never)."""
    if not serve_at:
        yield None
        return
    require("serve", f"{click.get_current_context().command_path} --serve")
    from ..service import LiveSource, create_app, parse_address, serve_in_thread

    try:
        host, port = parse_address(serve_at)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--serve") from None
    token = os.environ.get("STREAMTOPICS_TOKEN") or None
    live = LiveSource(stall_after=stall_after)
    try:
        handle = serve_in_thread(create_app(live, token=token, title=title), host, port, allow_remote=allow_remote)
    except (PermissionError, ValueError) as error:
        raise BadInput(str(error)) from None
    except OSError as error:
        raise BadInput(f"cannot serve on {serve_at}: {error.strerror or error}") from None
    shown = handle.url + ("#token=..." if token else "")
    console.echo(f"dashboard: {shown}  (JSON API: {handle.url}api/snapshot, metrics: {handle.url}metrics)")
    try:
        yield live, handle
    finally:
        handle.stop()


def serve_until_interrupted(console: "Console", handle) -> None:
    """Keep the dashboard up after the stream has ended, until Ctrl-C or SIGTERM."""
    console.echo(f"finished; the dashboard stays at {handle.url} until Ctrl-C")
    stop = threading.Event()
    with on_stop_signals(lambda signum: stop.set()):
        while not stop.wait(0.5):
            pass
