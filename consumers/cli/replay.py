"""``replay``: an archived stream through a model, snapshots as it goes (:mod:`consumers.replay`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import reasons
from ..signals import on_stop_signals
from ..snapshot_directory import SnapshotDirectory
from ..sources import open_source
from .console import BadInput, Console, event_lines, snapshot_heading, topic_table
from .options import (Command, TimeSkew, refinement_options, live_service, model_option, model_options, parse_duration,
                      serve_options, serve_until_interrupted, source_kwargs, source_options, topic_options,
                      topic_settings)

if TYPE_CHECKING:  # the model and the engine load when a replay runs, not for --help
    from streamtopics import StreamingTopicModel, TopicSnapshot

    from ..replay import Replay, ReplaySummary


def prepare_out(out: Path, force: bool) -> None:
    from ..replay import checkpoint_dir

    checkpoints = checkpoint_dir(out)
    existing = SnapshotDirectory(out).files() + (sorted(checkpoints.iterdir()) if checkpoints.is_dir() else [])
    if existing and not force:
        raise BadInput(f"{out} already holds a replay: add --resume to continue it or --force to start over")
    for path in existing:
        path.unlink()


def snapshot_printer(console: Console, show_topics: bool, words: int):
    """``on_snapshot(snapshot, path)`` printing its heading, then its topic table (the first
    snapshot, or all with ``show_topics``) or its events."""
    def show(snapshot: TopicSnapshot, path: Path) -> None:
        console.info(snapshot_heading(snapshot, path))
        if show_topics or snapshot.version == 1:
            for row in topic_table(snapshot, words):
                console.info("  " + row)
        elif not console.quiet:
            for line in event_lines(snapshot):
                console.echo(line)
    return show


#: Why every document may have been rejected, by the commonest rejection: the hint of the error.
NOTHING_ABSORBED_HINTS = {
    "empty": "no document held a word the tokenizer keeps, of 3 letters or more and not a stop word",
    "too_short": "no document held the 2 known words a document needs",
    "no_known_words": "no document shared a word with the vocabulary learned from the first --warmup-documents",
}
#: Why every record may have been malformed, by the commonest reason: the hint of the error.
NOTHING_READ_HINTS = {
    reasons.IMPLAUSIBLE_TIME: "times are epoch seconds (not milliseconds) or ISO 8601, from year 1 to 2199",
}
#: What to check, by format, when the documents came out without words.
FORMAT_HINTS = {
    "lines": "is the file text? If not, name its format with --format: jsonl, csv, tsv, uci or ldac",
    **dict.fromkeys(("jsonl", "csv", "tsv"), "is the text in --text-field?"),
}


def nothing_absorbed(summary: ReplaySummary, source) -> str:
    """The one line that says why a replay absorbed no document: how many were rejected and why,
    the format the archive was read as, and what to check."""
    rejected = sum(summary.rejected.values())
    ranked = summary.rejected.most_common()
    if len(ranked) == 1 and rejected == summary.documents:
        why = f"all {rejected:,} rejected as {ranked[0][0]}"
    else:
        why = f"{rejected:,} rejected ({', '.join(f'{n:,} {reason}' for reason, n in ranked) or 'none'})"
    if summary.malformed:
        why += f", {sum(summary.malformed.values()):,} malformed records skipped"
    fmt = source.spec.get("format", "?")
    hints = [NOTHING_ABSORBED_HINTS.get(ranked[0][0] if ranked else "", "the model took in no document")]
    if summary.rejected.keys() & {"empty", "too_short"} and fmt in FORMAT_HINTS:
        hints.append(FORMAT_HINTS[fmt])
    return (f"{source.name}: absorbed 0 of {summary.documents:,} documents: {why} "
            f"(read as format {fmt}; hint: {'; '.join(hints)})")


def report_counts(console: Console, summary: ReplaySummary, source, interrupted: bool = False) -> None:
    """The documents replayed, absorbed, rejected and malformed, by reason; BadInput if none was
    read, or none absorbed: every one rejected, or none taken in by the end of the archive (a run
    stopped early may still be warming up; an interrupted one is not judged: it exits 130)."""
    name = source.name
    if summary.documents == 0 and not summary.malformed:
        raise BadInput(f"{name}: no document found (read as format {source.spec.get('format', '?')})")
    if summary.documents == 0:
        commonest = summary.malformed.most_common(1)[0][0]
        hint = f"; hint: {NOTHING_READ_HINTS[commonest]}" if commonest in NOTHING_READ_HINTS else ""
        raise BadInput(f"{name}: no readable record ({sum(summary.malformed.values()):,} malformed, "
                       f"e.g. {commonest!r}{hint})")
    rejected = sum(summary.rejected.values())
    if summary.absorbed == 0 and not interrupted and (rejected >= summary.documents or not summary.stopped):
        raise BadInput(nothing_absorbed(summary, source))
    malformed = sum(summary.malformed.values())
    console.echo(f"replayed {summary.documents:,} documents from {name}: {summary.absorbed:,} absorbed, "
                 f"{rejected:,} rejected, {malformed:,} malformed records skipped")
    for title, counts in (("rejected", summary.rejected), ("malformed", summary.malformed)):
        for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            console.echo(f"  {title:<9} {n:>8,}  {reason}")
    if summary.times_clamped:
        console.echo(f"  {'clamped':<9} {summary.times_clamped:>8,}  times more than --max-time-skew after the stream clock")


def report_snapshots(console: Console, out: Path) -> None:
    snapshots = SnapshotDirectory(out).files()
    if snapshots:
        console.echo(f"snapshots: {len(snapshots)} in {out} ({snapshots[0].name} .. {snapshots[-1].name})")


def run_replay(console: Console, replay: Replay, label: str, stop_after: int | None,
               show_topics: bool, words: int, out: Path, live=None) -> None:
    """Run with progress, events as they happen, a clean stop on Ctrl-C, and a summary.
    ``live``: a :class:`consumers.service.LiveSource` to publish snapshots and metrics to."""
    show = snapshot_printer(console, show_topics, words)

    def on_snapshot(snapshot: TopicSnapshot, path: Path) -> None:
        if live is not None:
            live.on_snapshot(snapshot, path, model=replay.model)
        show(snapshot, path)

    replay.on_snapshot, replay.on_malformed = on_snapshot, console.malformed
    interrupted = []

    def on_signal(signum):
        interrupted.append(signum)
        replay.stop()

    try:
        with on_stop_signals(on_signal), console.progress(replay.source, label) as update:
            def on_progress(r: Replay) -> None:
                update(r.documents)
                if live is not None:
                    live.on_progress(r)

            summary = replay.run(stop_after, on_progress=on_progress)
    finally:
        if live is not None:
            live.finish()
    report_counts(console, summary, replay.source, interrupted=bool(interrupted))
    echo = console.echo
    paused = f"; paused {summary.paused_s:.1f} s" if summary.paused_s else ""
    echo(f"this run: {summary.documents_this_run:,} documents in {summary.elapsed_s:.1f} s "
         f"({summary.ingest_rate:,.0f} docs/s while ingesting; {len(summary.snapshots)} refreshes "
         f"{summary.refresh_s:.1f} s; checkpoints {summary.checkpoint_s:.1f} s{paused})")
    report_snapshots(console, out)
    if summary.stopped:
        echo(f"stopped after {summary.documents:,} documents; continue with: streamtopics replay --resume --out {out}")
    if interrupted:
        raise click.exceptions.Exit(130)


def run_dask_replay(console: Console, model: StreamingTopicModel, source, out: Path, scheduler: str,
                    every_documents: int | None, every_seconds: float | None, show_topics: bool, words: int) -> None:
    """The replay on a Dask cluster (:mod:`consumers.dask_replay`): the dashboard address first,
    a progress bar over documents, events as snapshots come, and the summary."""
    from tqdm import tqdm

    from ..dask_replay import DaskReplay, check_replayable, connect

    try:
        check_replayable(model, source)
    except ValueError as error:
        raise BadInput(str(error)) from None
    try:
        client = connect(scheduler)
    except ImportError as error:
        raise BadInput(str(error)) from None
    except (OSError, ValueError) as error:
        raise BadInput(f"cannot reach the Dask scheduler {scheduler}: {error}") from None
    try:
        workers = client.nthreads()
        console.echo(f"Dask: {len(workers)} workers ({sum(workers.values())} threads); "
                     f"dashboard {client.dashboard_link}")
        console.bar = tqdm(desc="replay", unit="docs", disable=not sys.stdout.isatty() or console.quiet,
                           dynamic_ncols=True, leave=False)

        def on_progress(documents: int, total: int | None) -> None:
            console.bar.total = total
            console.bar.n = documents
            console.bar.refresh()

        engine = DaskReplay(model, source, out, client, every_documents=every_documents, every_seconds=every_seconds,
                            on_snapshot=snapshot_printer(console, show_topics, words),
                            on_malformed=console.malformed, on_progress=on_progress)
        try:
            summary = engine.run()
        finally:
            console.bar.close()
            console.bar = None
    finally:
        client.close()
    report_counts(console, summary, source)
    console.echo(f"this run: {summary.documents:,} documents in {summary.elapsed_s:.1f} s "
                 f"({summary.documents / max(summary.elapsed_s, 1e-9):,.0f} docs/s on {summary.units} units, "
                 f"{summary.pieces} pieces; {len(summary.snapshots)} refreshes {summary.refresh_s:.1f} s, "
                 f"merges {summary.merge_s:.1f} s, waiting for workers {summary.wait_s:.1f} s)")
    report_snapshots(console, out)


@click.command(cls=Command)
@click.argument("source", required=False)
@source_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/replay"),
              show_default=True, help="Run directory: snapshots and the checkpoint go here.")
@click.option("--snapshot-every", type=click.IntRange(min=1), metavar="N",
              help="Refresh and write a snapshot every N documents (default 1000 unless "
                   "--snapshot-interval is given).")
@click.option("--snapshot-interval", type=parse_duration, metavar="DURATION",
              help="Refresh every DURATION of stream time (needs --time-field or Kafka): 90s, 15m, 6h, 1d.")
@click.option("--speed", type=click.FloatRange(min=0, min_open=True), metavar="X",
              help="Pace by timestamps: X seconds of stream per second (60: an hour a minute). "
                   "Default: as fast as possible.")
@model_options
@refinement_options
@topic_options
@model_option("half_life", click.FloatRange(min=0, min_open=True), metavar="N",
              more_help="Here in documents (--half-life-time: in stream time).")
@click.option("--half-life-time", type=parse_duration, metavar="DURATION",
              help="Forget by stream time: a document's weight halves every DURATION (7d, 12h) of stream "
                   "time after it (needs --time-field or Kafka).")
@model_option("max_time_skew", TimeSkew(), metavar="DURATION",
              more_help="A duration (90s, 12h, 7d) or 'none'; see docs/replay.md, 'Times'.")
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
@click.option("--dask", "dask_scheduler", metavar="SCHEDULER",
              help="Replay on a Dask cluster: tcp://HOST:8786 (a running `dask scheduler`) or local:N (N worker "
                   "processes on this machine). Same snapshots as without; needs pip install 'streamtopics[dask]'.")
def replay(source, format_, vocabulary_file, text_fields, id_field, time_field, time_format, from_offset, from_time,
           out, snapshot_every, snapshot_interval, speed, n_topics, vocabulary_size, warmup_documents, seed, refine_device,
           refine_carry, refine_fill_restarts,
           stop_words_file, strip_mail, max_df, anchor_min_df, match_threshold, burn_in, half_life, half_life_time,
           max_time_skew, checkpoint_every, stop_after, resume, force, show_topics, words, quiet, serve_at, allow_remote, keep_serving, dask_scheduler):
    """Replay an archived stream: write snapshots to --out and print topic events as they occur.

    SOURCE is a file (JSON Lines, CSV/TSV, text one document per line; .gz or .zst), a directory
    of text files, a UCI docword file, an LDA-C corpus (NAME.ldac with its word list beside it or
    --vocabulary FILE), kafka://HOST:PORT/TOPIC, or `builtin`.

    \b
    Examples:
      streamtopics replay news.jsonl.gz --out runs/news --snapshot-every 2000
      streamtopics replay reuters21578.jsonl.gz --text-field title --text-field body \\
          --time-field date --time-format '%d-%b-%Y %H:%M:%S.%f' --snapshot-interval 7d
      streamtopics replay reuters21578.jsonl.gz --time-field date \\
          --time-format '%d-%b-%Y %H:%M:%S.%f' --half-life-time 30d --snapshot-interval 7d
      streamtopics replay --resume --out runs/news
      streamtopics replay news.jsonl.gz --out runs/news --snapshot-every 20000 --dask local:4
    """
    from streamtopics import StreamingTopicModel

    from ..kernel_cache import announce_first_compile
    from ..replay import Replay, restore_checkpoint

    if refine_device == "cuda":  # said now, not at the first refresh after the warm-up documents
        from streamtopics.refresh.gpu import cuda_available

        if not cuda_available():
            raise click.UsageError("--refine-device cuda: numba finds no CUDA device (auto falls back on the CPU)")
    console = Console(quiet)
    announce_first_compile(console.echo)
    kwargs = source_kwargs(format_, vocabulary_file, text_fields, id_field, time_field, time_format, from_offset,
                           from_time)
    if dask_scheduler:
        clashing = [name for name, given in (("--resume", resume), ("--speed", speed), ("--stop-after", stop_after),
                                             ("--checkpoint-every", checkpoint_every), ("--serve", serve_at),
                                             ("--half-life", half_life), ("--half-life-time", half_life_time)) if given]
        if clashing:
            raise click.UsageError(f"--dask replays a whole archive with exact sums: drop {', '.join(clashing)}")
    if resume:
        restored = restore_checkpoint(out)  # the newest good one: damaged ones are set aside
        opened = None
        if source is not None:
            opened = open_source(source, **kwargs, start=restored.checkpoint.archive.position)
        engine = Replay.resume(out, opened, checkpoint=restored)
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
        prepare_out(out, force)
        forgetting = ({"half_life": half_life_time, "half_life_unit": "stream"} if half_life_time
                      else {"half_life": half_life})
        model = StreamingTopicModel(n_topics, vocabulary_size=vocabulary_size, warmup_documents=warmup_documents,
                                    seed=seed, refine_device=refine_device, refine_carry=refine_carry,
                                    refine_fill_restarts=refine_fill_restarts, max_time_skew=max_time_skew, **forgetting,
                                    **topic_settings(stop_words_file, strip_mail, max_df, anchor_min_df,
                                                     match_threshold, burn_in))
        if snapshot_every is None and snapshot_interval is None:
            snapshot_every = 1000
        if dask_scheduler:
            run_dask_replay(console, model, opened, out, dask_scheduler, snapshot_every, snapshot_interval,
                            show_topics, words)
            return
        engine = Replay(model, opened, out, every_documents=snapshot_every, every_seconds=snapshot_interval,
                        speed=speed, checkpoint_every=checkpoint_every)
    paced = engine.speed is not None  # a paced replay may rightly wait minutes between documents
    with live_service(console, serve_at, allow_remote, f"replay of {engine.source.name}",
                      stall_after=None if paced else 60.0) as service:
        run_replay(console, engine, "replay", stop_after, show_topics, words, out,
                   live=service[0] if service else None)
        if service and keep_serving:
            serve_until_interrupted(console, service[1])
