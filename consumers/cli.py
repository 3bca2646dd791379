"""The ``streamtopics`` command line: replay archives, inspect snapshots, infer, produce, bench.

Each command is a thin layer over the library and :mod:`consumers.replay`: it parses options,
prints progress (a tqdm bar, only when stdout is a terminal), events and tables, and turns
failures into one line on stderr and an exit code (see ``EXIT_CODES``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import click
from tqdm import tqdm

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics import config as model_config
from streamtopics.snapshot import DISPLAY_RELEVANCE
from streamtopics.text import Tokenizer, english_stop_words
from streamtopics.state import CorruptStateError

from . import builtin_corpus, reasons
from .consume_command import consume
from .replay import CheckpointError, Replay, model_path, read_checkpoint
from .snapshot_directory import SnapshotDirectory
from .sources import FORMATS, Malformed, Record, SourceError, open_source, parse_kafka_url
from .times import parse_time

EXIT_CODES = """\b
Exit codes:
  0    success (malformed records are reported and counted, not fatal)
  1    runtime failure (an unexpected error, a broker that stops answering)
  2    usage error or bad input: bad path, format, field name, option or checkpoint
  130  interrupted (replay saves a checkpoint first: continue with --resume)
"""
MALFORMED_SHOWN = 20  # malformed records printed one by one; the summary counts them all


class BadInput(click.ClickException):
    exit_code = 2


class Failure(click.ClickException):
    exit_code = 1


class _Group(click.Group):
    """Maps library errors to one line and an exit code (STREAMTOPICS_DEBUG=1: traceback)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:  # the reader (e.g. `| head`) has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except Exception as error:
            if os.environ.get("STREAMTOPICS_DEBUG"):
                raise
            if isinstance(error, (SourceError, CheckpointError, CorruptStateError)):
                raise BadInput(str(error)) from None
            raise Failure(f"{type(error).__name__}: {error}") from None


@click.group(cls=_Group, epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="streamtopics")
def main():
    """Streaming topic models: replay archived streams, watch topics form and change.

    Start with `streamtopics demo`: it replays the Python standard library's documentation
    (built in, no download) and leaves snapshots in ./runs/demo.
    """


# ---------------------------------------------------------------------------------- output
class Console:
    """Lines to stdout/stderr that do not tear a progress bar; the bar only on a terminal."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.bar: tqdm | None = None
        self.malformed_shown = 0

    def echo(self, line: str = "", err: bool = False) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr if err else sys.stdout)
        else:
            click.echo(line, err=err)

    def info(self, line: str = "") -> None:
        if not self.quiet:
            self.echo(line)

    def malformed(self, item: Malformed) -> None:
        self.malformed_shown += 1
        if self.malformed_shown <= MALFORMED_SHOWN:
            self.echo(f"warning: malformed record skipped: {item}", err=True)
        elif self.malformed_shown == MALFORMED_SHOWN + 1:
            self.echo("warning: further malformed records are not shown; the summary counts them", err=True)

    @contextmanager
    def progress(self, source, label: str):
        _, _, unit = source.progress()
        self.bar = tqdm(desc=label, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
                        disable=not sys.stdout.isatty() or self.quiet, dynamic_ncols=True, leave=False)
        start = time.perf_counter()

        def update(documents: int) -> None:
            done, total, _ = source.progress()
            self.bar.total = total
            self.bar.n = done
            rate = documents / max(time.perf_counter() - start, 1e-9)
            self.bar.set_postfix_str(f"{documents:,} docs, {rate:,.0f} docs/s", refresh=False)
            self.bar.refresh()

        try:
            yield update
        finally:
            self.bar.close()
            self.bar = None


def _format_time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def topic_table(snapshot: TopicSnapshot, words: int = 8) -> list[str]:
    """Topics as aligned text rows (id, prevalence, anchor, top words), most prevalent first."""
    top = snapshot.top_words(words, DISPLAY_RELEVANCE)
    order = sorted(range(snapshot.n_topics), key=lambda k: (-snapshot.prevalence[k], snapshot.topic_ids[k]))
    width = max([len("anchor")] + [len(a) for a in snapshot.anchors])
    rows = [f"{'id':>4}  {'prev':>6}  {'anchor':<{width}}  top words"]
    for k in order:
        topic = snapshot.topic_ids[k]
        rows.append(f"{topic:>4}  {snapshot.prevalence[k]:>6.1%}  {snapshot.anchors[k]:<{width}}  "
                    + " ".join(w for w, _ in top[topic]))
    return rows


def event_lines(snapshot: TopicSnapshot, words: int = 6) -> list[str]:
    """One line per birth and change in ``snapshot.events``, one for all deaths."""
    top = snapshot.top_words(words, DISPLAY_RELEVANCE)
    lines = []
    for event in snapshot.events:
        topic = event["topic"]
        tail = ": " + " ".join(w for w, _ in top[topic]) if topic in top else ""
        if event["type"] == "birth":
            lines.append(f"  + birth   topic {topic:<4} anchor {event['anchor']!r}{tail}")
        elif event["type"] == "change":
            moved = " ".join([f"+{w}" for w in event.get("words_in", [])[:3]]
                             + [f"-{w}" for w in event.get("words_out", [])[:3]])
            lines.append(f"  ~ change  topic {topic:<4} anchor {event['anchor_before']!r} -> "
                         f"{event['anchor_after']!r}, moved {event['distance']:.2f}{tail}"
                         + (f"  ({moved})" if moved else ""))
    deaths = sorted(e["topic"] for e in snapshot.events if e["type"] == "death")
    if deaths:
        lines.append(f"  - death   topic{'s' if len(deaths) > 1 else ''} {', '.join(map(str, deaths))}")
    return lines


def snapshot_heading(snapshot: TopicSnapshot, path: Path | None = None) -> str:
    parts = [f"snapshot {snapshot.version}", f"{snapshot.documents_seen:,} documents"]
    if snapshot.stream_time is not None:
        parts.append(f"stream time {_format_time(snapshot.stream_time)}")
    counts = {t: sum(e["type"] == t for e in snapshot.events) for t in ("birth", "death", "change")}
    parts.append(", ".join(f"{n} {t}{'s' if n != 1 else ''}" for t, n in counts.items()))
    if path is not None:
        parts.append(str(path))
    return " | ".join(parts)


# ---------------------------------------------------------------------------------- options
def _duration(value: str) -> float:
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
                     help="Archive format; auto: from the name (.jsonl .csv .tsv, docword.*, a directory, "
                          "kafka://, builtin; else one document per line). .gz/.zst are decompressed."),
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


def _source_kwargs(format_, text_fields, id_field, time_field, time_format, from_offset, from_time) -> dict:
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
            "time_field": time_field, "time_format": time_format, "kafka_start": start}


def model_options(function):
    options = [
        click.option("--topics", "n_topics", type=click.IntRange(min=1), default=model_config.default("n_topics"),
                     show_default=True, help=model_config.doc("n_topics")),
        click.option("--vocabulary-size", type=click.IntRange(min=2), default=model_config.default("vocabulary_size"),
                     show_default=True,
                     help="Words kept (learned from the first --warmup documents). Memory and checkpoints "
                          "grow with its square: 10,000 words = 400 MB."),
        click.option("--warmup", type=click.IntRange(min=1), default=model_config.default("warmup_documents"),
                     show_default=True, help=model_config.doc("warmup_documents")),
        click.option("--seed", type=int, default=model_config.default("seed"), show_default=True),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def topic_options(function):
    """What the topics are made of: stop words, document-frequency limits, identity matching."""
    options = [
        click.option("--stop-words", "stop_words_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     metavar="FILE", help="More stop words, one per line, added to the built-in English list."),
        click.option("--max-df", type=click.FloatRange(min=0, max=1, min_open=True), metavar="FRACTION",
                     help="Words in more than this fraction of the documents belong to the background, never "
                          "to a topic (a data-driven stop list for mail or newswire boilerplate; 0.1-0.3). "
                          "Default: no ceiling."),
        click.option("--min-df", type=click.IntRange(min=1), metavar="N",
                     help="Documents a word must occur in to be a candidate anchor (default: grows with the "
                          "stream, see README)."),
        click.option("--match-threshold", type=click.FloatRange(min=0, min_open=True), default=0.5,
                     show_default=True, metavar="X",
                     help="A topic keeps its id when its words moved less than X times the median distance "
                          "between two topics (it also keeps it on the same anchor or most of its top words)."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def topic_settings(stop_words_file, max_df, min_df, match_threshold) -> dict:
    """StreamingTopicModel keyword arguments from :func:`topic_options`."""
    settings = {"max_df": max_df, "match_threshold": match_threshold}
    if min_df is not None:
        settings["anchor_min_df"] = min_df
    if stop_words_file is not None:
        extra = stop_words_file.read_text(encoding="utf-8").split()
        settings["tokenizer"] = Tokenizer(stop_words=english_stop_words() | {w.lower() for w in extra})
    return settings


# ---------------------------------------------------------------------------------- replay
_REPLAY_FILES = ("checkpoint.json", "checkpoint-*.npz")


def _prepare_out(out: Path, force: bool) -> None:
    existing = SnapshotDirectory(out).files() + [p for pattern in _REPLAY_FILES for p in out.glob(pattern)]
    if existing and not force:
        raise BadInput(f"{out} already holds a replay: add --resume to continue it or --force to start over")
    for path in existing:
        path.unlink()


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
    from .service import LiveSource, create_app, parse_address, serve_in_thread

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
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_replay(console: Console, replay: Replay, label: str, stop_after: int | None,
               show_topics: bool, words: int, out: Path, live=None) -> None:
    """Run with progress, events as they happen, a clean stop on Ctrl-C, and a summary.
    ``live``: a :class:`consumers.service.LiveSource` to publish snapshots and metrics to."""
    def on_snapshot(snapshot: TopicSnapshot, path: Path) -> None:
        if live is not None:
            live.on_snapshot(snapshot, path, model=replay.model)
        console.info(snapshot_heading(snapshot, path))
        if show_topics or snapshot.version == 1:
            for row in topic_table(snapshot, words):
                console.info("  " + row)
        elif not console.quiet:
            for line in event_lines(snapshot):
                console.echo(line)

    replay.on_snapshot, replay.on_malformed = on_snapshot, console.malformed
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
        replay.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with console.progress(replay.source, label) as update:
            def on_progress(r: Replay) -> None:
                update(r.documents)
                if live is not None:
                    live.on_progress(r)

            summary = replay.run(stop_after, on_progress=on_progress)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if live is not None:
            live.finish()
    if summary.documents == 0 and not summary.malformed:
        raise BadInput(f"{replay.source.name}: no document found")
    if summary.documents == 0:
        raise BadInput(f"{replay.source.name}: no readable record ({sum(summary.malformed.values()):,} malformed, "
                       f"e.g. {next(iter(summary.malformed))!r})")
    rejected = sum(summary.rejected.values())
    malformed = sum(summary.malformed.values())
    echo = console.echo
    echo(f"replayed {summary.documents:,} documents from {replay.source.name}: {summary.absorbed:,} absorbed, "
         f"{rejected:,} rejected, {malformed:,} malformed records skipped")
    for title, counts in (("rejected", summary.rejected), ("malformed", summary.malformed)):
        for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            echo(f"  {title:<9} {n:>8,}  {reason}")
    echo(f"this run: {summary.documents_this_run:,} documents in {summary.elapsed_s:.1f} s "
         f"(ingest {summary.ingest_rate:,.0f} docs/s; {len(summary.snapshots)} refreshes {summary.refresh_s:.1f} s; "
         f"checkpoints {summary.checkpoint_s:.1f} s)")
    snapshots = SnapshotDirectory(out).files()
    if snapshots:
        echo(f"snapshots: {len(snapshots)} in {out} ({snapshots[0].name} .. {snapshots[-1].name})")
    if summary.stopped:
        echo(f"stopped after {summary.documents:,} documents; continue with: streamtopics replay --resume --out {out}")
    if interrupted:
        raise click.exceptions.Exit(130)


@main.command()
@click.argument("source", required=False)
@source_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/replay"),
              show_default=True, help="Run directory: snapshots and the checkpoint go here.")
@click.option("--snapshot-every", type=click.IntRange(min=1), metavar="N",
              help="Refresh and write a snapshot every N documents (default 1000 unless "
                   "--snapshot-interval is given).")
@click.option("--snapshot-interval", type=_duration, metavar="DURATION",
              help="Refresh every DURATION of stream time (needs --time-field or Kafka): 90s, 15m, 6h, 1d.")
@click.option("--speed", type=click.FloatRange(min=0, min_open=True), metavar="X",
              help="Pace by timestamps: X seconds of stream per second (60: an hour a minute). "
                   "Default: as fast as possible.")
@model_options
@topic_options
@click.option("--half-life", type=click.FloatRange(min=0, min_open=True), metavar="N",
              help="Forget: a document's weight halves every N documents after it (default: exact sums).")
@click.option("--half-life-time", type=_duration, metavar="DURATION",
              help="Forget by stream time: a document's weight halves every DURATION (7d, 12h) of stream "
                   "time after it (needs --time-field or Kafka).")
@click.option("--checkpoint-every", type=click.IntRange(min=1), metavar="N",
              help="Also checkpoint every N documents (always: at the end and when stopped).")
@click.option("--stop-after", type=click.IntRange(min=1), metavar="N",
              help="Stop (and checkpoint) after N documents of this run.")
@click.option("--resume", is_flag=True,
              help="Continue the replay checkpointed in --out (model, schedule and source options come "
                   "from the checkpoint; SOURCE may be left out).")
@click.option("--force", is_flag=True, help="Start over in an --out that holds an earlier replay.")
@click.option("--show-topics", is_flag=True, help="Print the topic table at every snapshot.")
@click.option("--words", type=click.IntRange(min=1), default=8, show_default=True, help="Top words shown.")
@click.option("-q", "--quiet", is_flag=True, help="Only the summary.")
@serve_options
@click.option("--keep-serving", is_flag=True, help="With --serve: keep serving after the replay ends, until Ctrl-C.")
def replay(source, format_, text_fields, id_field, time_field, time_format, from_offset, from_time, out,
           snapshot_every, snapshot_interval, speed, n_topics, vocabulary_size, warmup, seed, stop_words_file,
           max_df, min_df, match_threshold, half_life, half_life_time, checkpoint_every, stop_after, resume, force, show_topics, words, quiet, serve_at,
           allow_remote, keep_serving):
    """Replay an archived stream: write snapshots to --out and print topic events as they occur.

    SOURCE is a file (JSON Lines, CSV/TSV, text one document per line; .gz or .zst), a directory
    of text files, a UCI docword file, kafka://HOST:PORT/TOPIC, or `builtin`.

    \b
    Examples:
      streamtopics replay news.jsonl.gz --out runs/news --snapshot-every 2000
      streamtopics replay reuters21578.jsonl.gz --text-field title --text-field body \\
          --time-field date --time-format '%d-%b-%Y %H:%M:%S.%f' --snapshot-interval 7d
      streamtopics replay reuters21578.jsonl.gz --time-field date \\
          --time-format '%d-%b-%Y %H:%M:%S.%f' --half-life-time 30d --snapshot-interval 7d
      streamtopics replay --resume --out runs/news
    """
    console = Console(quiet)
    kwargs = _source_kwargs(format_, text_fields, id_field, time_field, time_format, from_offset, from_time)
    if resume:
        state = read_checkpoint(out)
        opened = None
        if source is not None:
            opened = open_source(source, **kwargs, start=state["position"])
        engine = Replay.resume(out, opened)
    else:
        if source is None:
            raise click.UsageError("missing SOURCE (or --resume to continue a replay)")
        if speed and not (time_field or kwargs["format"] == "kafka" or str(source).startswith("kafka://")):
            raise click.UsageError("--speed paces by timestamps: give --time-field")
        if snapshot_interval and not (time_field or str(source).startswith("kafka://")):
            raise click.UsageError("--snapshot-interval needs timestamps: give --time-field")
        if half_life and half_life_time:
            raise click.UsageError("give --half-life (documents) or --half-life-time (stream time), not both")
        if half_life_time and not (time_field or str(source).startswith("kafka://")):
            raise click.UsageError("--half-life-time needs timestamps: give --time-field")
        opened = open_source(source, **kwargs)
        _prepare_out(out, force)
        forgetting = ({"half_life": half_life_time, "half_life_unit": "stream"} if half_life_time
                      else {"half_life": half_life})
        model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size, warmup_documents=warmup, seed=seed,
                                    **forgetting, **topic_settings(stop_words_file, max_df, min_df, match_threshold))
        if snapshot_every is None and snapshot_interval is None:
            snapshot_every = 1000
        engine = Replay(model, opened, out, every_documents=snapshot_every, every_seconds=snapshot_interval,
                        speed=speed, checkpoint_every=checkpoint_every)
    paced = engine.speed is not None  # a paced replay may rightly wait minutes between documents
    with live_service(console, serve_at, allow_remote, f"replay of {engine.source.name}",
                      stall_after=None if paced else 60.0) as service:
        run_replay(console, engine, "replay", stop_after, show_topics, words, out,
                   live=service[0] if service else None)
        if service and keep_serving:
            serve_until_interrupted(console, service[1])


# ---------------------------------------------------------------------------------- demo
@main.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/demo"),
              show_default=True, help="Where the snapshots go (earlier demo output there is replaced).")
@click.option("--topics", "n_topics", type=click.IntRange(min=2), default=20, show_default=True)
@click.option("--snapshot-every", type=click.IntRange(min=1), default=500, show_default=True, metavar="N")
@click.option("-q", "--quiet", is_flag=True, help="Only the final topics and the summary.")
@serve_options
def demo(out, n_topics, snapshot_every, quiet, serve_at, allow_remote):
    """The main job: replay the built-in stream and watch topics form.

    The stream is the documentation of the Python standard library that ships with every
    Python (one docstring per document, about 4,000; see consumers/builtin_corpus.py). No
    network, no broker. Prints events as topics are born, die and change, then the final
    topics, and leaves the snapshots, a checkpoint and the model in --out.
    """
    console = Console(quiet)
    version = ".".join(map(str, sys.version_info[:3]))
    console.echo(f"streamtopics demo: replaying the docstrings of the Python {version} standard library "
                 f"({n_topics} topics, a snapshot every {snapshot_every} documents) into {out}")
    _prepare_out(out, force=True)
    model = StreamingTopicModel(n_topics, vocabulary_size=3000, warmup_documents=800,
                                tokenizer=builtin_corpus.tokenizer())
    engine = Replay(model, builtin_corpus.BuiltinCorpus(), out, every_documents=snapshot_every)
    with live_service(console, serve_at, allow_remote, "demo: Python standard library docstrings") as service:
        run_replay(console, engine, "demo", None, False, 8, out, live=service[0] if service else None)
        _demo_epilogue(console, model, out)
        if service:
            serve_until_interrupted(console, service[1])


def _demo_epilogue(console, model, out) -> None:
    console.echo("")
    console.echo("final topics:")
    for row in topic_table(model.snapshot, 8):
        console.echo("  " + row)
    console.echo("")
    console.echo(f"snapshots, checkpoint and model are in {out}; next:")
    console.echo(f"  streamtopics topics {out}        # the latest topics")
    console.echo(f"  streamtopics events {out}        # births, deaths and changes across the snapshots")
    console.echo(f"  echo 'open a socket and send bytes' | streamtopics infer --model {out}")
    console.echo(f"  streamtopics serve {out}         # the dashboard over these snapshots")
    console.echo(f"  streamtopics plot {out} --out prevalence.png")


# ---------------------------------------------------------------------------------- serve, plot
@main.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs --allow-remote.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --host (then set STREAMTOPICS_TOKEN: requests without "
                   "'Authorization: Bearer TOKEN' get 401).")
@click.option("--stall-after", type=_duration, metavar="DURATION",
              help="Report not ready (/readyz 503) when no snapshot has been written for this long: 90s, 15m.")
def serve(path, host, port, allow_remote, stall_after):
    """Serve the dashboard, JSON API and Prometheus metrics over a run directory.

    PATH is a directory that a replay or consumer writes snapshot-*.json files to; new ones are
    picked up as they appear. Open http://HOST:PORT/ in a browser; the API is described at
    /openapi.json. The bearer token, if any, is read from $STREAMTOPICS_TOKEN.
    """
    from .service import SnapshotDirectorySource, check_bind, create_app, serve as run_service

    if not path.is_dir():
        raise BadInput(f"no such directory: {path}")
    token = os.environ.get("STREAMTOPICS_TOKEN") or None
    try:
        app = create_app(SnapshotDirectorySource(path, stall_after=stall_after), token=token,
                         title=f"snapshots in {path}")
        check_bind(app, host, allow_remote)
        click.echo(f"dashboard: http://{host}:{port}/  (snapshots from {path}; Ctrl-C to stop)")
        run_service(app, host, port, allow_remote=allow_remote)
    except (PermissionError, ValueError) as error:
        raise BadInput(str(error)) from None
    except OSError as error:
        raise BadInput(f"cannot serve on {host}:{port}: {error.strerror or error}") from None


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Figure file; the format follows the suffix: .png, .svg or .pdf.")
@click.option("--kind", type=click.Choice(["prevalence", "top_words"]), default="prevalence", show_default=True,
              help="prevalence: every topic's prevalence over stream time; top_words: the latest topics' words.")
@click.option("--words", "top_n", type=click.IntRange(1, 100), default=10, show_default=True,
              help="Words per topic (top_words).")
@click.option("--max-topics", type=click.IntRange(min=1), metavar="N", help="Only the N most prevalent topics (top_words).")
def plot(path, out_path, kind, top_n, max_topics):
    """Draw a run's snapshots with matplotlib (no display needed).

    \b
    Examples:
      streamtopics plot runs/demo --out prevalence.png
      streamtopics plot runs/demo --kind top_words --words 8 --out topics.svg
    """
    from .plots import plot_snapshots

    try:
        written = plot_snapshots(path, out_path, kind=kind, top_n=top_n, max_topics=max_topics)
    except (ValueError, FileNotFoundError) as error:
        raise BadInput(str(error)) from None
    click.echo(f"wrote {written}")


# ---------------------------------------------------------------------------------- topics, events
def _snapshot_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = SnapshotDirectory(path).files()
        if not files:
            raise BadInput(f"{path}: no snapshot-*.json files")
        return files
    if not path.exists():
        raise BadInput(f"no such file or directory: {path}")
    return [path]


def _load_snapshot(path: Path) -> TopicSnapshot:
    try:
        return TopicSnapshot.load(path)
    except (ValueError, KeyError, TypeError) as error:
        raise BadInput(f"{path}: not a snapshot file ({type(error).__name__}: {error})") from None


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--words", type=click.IntRange(min=1), default=10, show_default=True, help="Top words per topic.")
@click.option("--json", "as_json", is_flag=True, help="JSON (the snapshot with top words only).")
def topics(path, words, as_json):
    """Print a snapshot's topics: id, prevalence, anchor word, top words.

    PATH is a snapshot file or a run directory (its latest snapshot).
    """
    file = _snapshot_files(path)[-1]
    snapshot = _load_snapshot(file)
    if as_json:
        click.echo(snapshot.to_json(top_n=words))
        return
    click.echo(snapshot_heading(snapshot, file))
    for row in topic_table(snapshot, words):
        click.echo(row)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--type", "types", type=click.Choice(["birth", "death", "change"]), multiple=True,
              help="Only these events (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def events(path, types, as_json):
    """Print topic births, deaths and changes across the snapshots of a run directory."""
    for file in _snapshot_files(path):
        snapshot = _load_snapshot(file)
        chosen = [e for e in snapshot.events if not types or e["type"] in types]
        if as_json:
            for event in chosen:
                click.echo(json.dumps({"snapshot": snapshot.version, "documents": snapshot.documents_seen,
                                       "stream_time": snapshot.stream_time, **event}))
            continue
        snapshot.events = chosen
        click.echo(snapshot_heading(snapshot))
        for line in event_lines(snapshot):
            click.echo(line)


# ---------------------------------------------------------------------------------- infer
def _stdin_records():
    for line, raw in enumerate(sys.stdin.buffer, 1):
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as error:
            yield Malformed(f"<stdin>:{line}", reasons.NOT_UTF8, f"byte {error.start + 1} of the line")
            continue
        if text.strip():
            yield Record(text, line)


@main.command()
@click.argument("input", required=False, default="-")
@click.option("--model", "model_location", required=True, type=click.Path(exists=True, path_type=Path),
              help="A run directory (its checkpointed model) or a model file saved with model.save.")
@source_options
@click.option("--top", type=click.IntRange(min=0), default=3, show_default=True,
              help="Topics per document, largest first (0: all).")
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True)
def infer(input, model_location, format_, text_fields, id_field, time_field, time_format, from_offset,
          from_time, top, batch_size):
    """Topic mixtures of documents, one JSON line each: {"key": ..., "topics": [[id, weight], ...]}.

    INPUT is `-` (stdin, one document per line; the key is the line number) or any archive that
    `replay` reads (the key is the record's id).
    """
    model = StreamingTopicModel.load(model_path(model_location))
    if model.snapshot is None:
        raise BadInput(f"{model_location}: the model has no topics yet (it was never refreshed)")
    console = Console()
    kwargs = _source_kwargs(format_, text_fields, id_field, time_field, time_format, from_offset, from_time)
    records = _stdin_records() if input == "-" else open_source(input, **kwargs)
    ids = model.snapshot.topic_ids
    batch: list[Record] = []

    def flush():
        for record, row in zip(batch, model.infer([r.document for r in batch]).tolist()):
            ranked = sorted(zip(ids, row), key=lambda pair: -pair[1])
            ranked = ranked[:top] if top else ranked
            click.echo(json.dumps({"key": record.key, "topics": [[t, round(w, 4)] for t, w in ranked]}))
        batch.clear()

    for item in records:
        if isinstance(item, Malformed):
            console.malformed(item)
            continue
        batch.append(item)
        if len(batch) >= batch_size:
            flush()
    flush()


# ---------------------------------------------------------------------------------- produce
@main.command()
@click.argument("source")
@click.argument("destination", metavar="kafka://HOST:PORT/TOPIC")
@source_options
@click.option("--json", "as_json", is_flag=True,
              help='Send {"id", "text", "timestamp"} JSON objects instead of the bare text.')
@click.option("--limit", type=click.IntRange(min=1), help="Send at most this many documents.")
def produce(source, destination, format_, text_fields, id_field, time_field, time_format, from_offset,
            from_time, as_json, limit):
    """Push an archive into a Kafka topic, one message per document (for demos and tests).

    The message key is the document's id, the message timestamp its time (when it has one).
    """
    from kafka import KafkaProducer

    servers, topic = parse_kafka_url(destination)
    opened = open_source(source, **_source_kwargs(format_, text_fields, id_field, time_field, time_format,
                                                  from_offset, from_time))
    try:
        producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=20)
    except Exception as error:
        raise BadInput(f"cannot reach Kafka at {servers}: {error}") from None
    console = Console()
    sent = 0
    try:
        with console.progress(opened, "produce") as update:
            for item in opened:
                if isinstance(item, Malformed):
                    console.malformed(item)
                    continue
                if not isinstance(item.document, str):
                    raise BadInput(f"{opened.name}: holds word counts, not text; produce sends text")
                if as_json:
                    value = json.dumps({"id": item.key, "text": item.document, "timestamp": item.timestamp})
                else:
                    value = item.document
                producer.send(topic, value=value.encode("utf-8"),
                              key=None if item.key is None else str(item.key).encode("utf-8"),
                              timestamp_ms=None if item.timestamp is None else int(item.timestamp * 1000))
                sent += 1
                if sent % 256 == 0:
                    update(sent)
                if limit and sent >= limit:
                    break
            producer.flush()
    finally:
        producer.close()
    click.echo(f"produced {sent:,} messages to {topic} on {servers} ({console.malformed_shown:,} malformed skipped)")


# ---------------------------------------------------------------------------------- bench
@main.command()
@click.argument("source", default="builtin")
@source_options
@click.option("--documents", type=click.IntRange(min=10), default=4000, show_default=True,
              help="Documents read from SOURCE.")
@model_options
def bench(source, format_, text_fields, id_field, time_field, time_format, from_offset, from_time,
          documents, n_topics, vocabulary_size, warmup, seed):
    """Quick ingest benchmark: read, tokenize, learn from text, learn from counts, refresh.

    SOURCE defaults to the built-in stream. Prints documents per second for each stage.
    """
    opened = open_source(source, **_source_kwargs(format_, text_fields, id_field, time_field, time_format,
                                                  from_offset, from_time))
    timings = []
    t0 = time.perf_counter()
    docs = []
    for item in opened:
        if isinstance(item, Record):
            docs.append(item.document)
            if len(docs) >= documents:
                break
    timings.append(("read the archive", time.perf_counter() - t0))
    if not docs:
        raise BadInput(f"{opened.name}: no document found")
    tokenizer = builtin_corpus.tokenizer() if opened.spec.get("format") == "builtin" else None
    vocabulary_model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size,
                                           warmup_documents=min(warmup, len(docs)), tokenizer=tokenizer)
    vocabulary_model.learn_many(docs[: vocabulary_model.warmup_documents])
    vocabulary_model.statistics()  # builds the vocabulary and compiles (or loads) the kernels
    vocabulary = vocabulary_model.vocabulary
    raw_model = StreamingTopicModel(n_topics, vocabulary, tokenizer=tokenizer, seed=seed)
    if all(isinstance(t, str) for t in docs):
        t0 = time.perf_counter()
        for text in docs:
            raw_model.tokenizer.count(text)
        timings.append(("tokenize", time.perf_counter() - t0))
    t0 = time.perf_counter()
    raw_model.learn_many(docs)
    raw_model.statistics()
    timings.append(("learn from raw documents (tokenize + encode + ingest)", time.perf_counter() - t0))
    batch, _ = raw_model.encode_many(docs)
    counts_model = StreamingTopicModel(n_topics, vocabulary, tokenizer=tokenizer, seed=seed)
    t0 = time.perf_counter()
    counts_model.learn_many(batch)
    counts_model.statistics()
    timings.append(("learn from pre-indexed counts (ingest only)", time.perf_counter() - t0))
    t0 = time.perf_counter()
    raw_model.refresh()
    refresh_s = time.perf_counter() - t0
    click.echo(f"{len(docs):,} documents from {opened.name}, vocabulary {len(vocabulary):,} words, "
               f"{n_topics} topics")
    click.echo(f"{'stage':<56} {'seconds':>8} {'docs/s':>10}")
    for stage, seconds in timings:
        click.echo(f"{stage:<56} {seconds:>8.3f} {len(docs) / seconds:>10,.0f}")
    click.echo(f"{'refresh (anchors + recovery + alignment)':<56} {refresh_s:>8.3f} {'':>10}")


main.add_command(consume)  # the Kafka consumer service (consumers/consume_command.py)

if __name__ == "__main__":
    main()
