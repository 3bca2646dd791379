"""``topics``, ``events`` and ``plot``: look at the snapshots a run left."""

from __future__ import annotations

import json
from pathlib import Path

import click

from streamtopics import TopicSnapshot
from streamtopics.snapshot import EVENT_TYPES

from ..extras import require
from ..snapshot_directory import SnapshotDirectory
from .console import BadInput, event_lines, snapshot_heading, topic_table


@click.command()
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
    require("plot", "streamtopics plot")
    from ..plots import plot_snapshots

    try:
        written = plot_snapshots(path, out_path, kind=kind, top_n=top_n, max_topics=max_topics)
    except (ValueError, FileNotFoundError) as error:
        raise BadInput(str(error)) from None
    click.echo(f"wrote {written}")


def _snapshot_files(path: Path) -> list[Path]:
    try:
        return SnapshotDirectory.files_at(path)
    except FileNotFoundError as error:
        raise BadInput(str(error)) from None


def _load_snapshot(path: Path) -> TopicSnapshot:
    try:
        return TopicSnapshot.load(path)
    except (ValueError, KeyError, TypeError) as error:
        raise BadInput(f"{path}: not a snapshot file ({type(error).__name__}: {error})") from None


@click.command()
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


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--type", "types", type=click.Choice(EVENT_TYPES), multiple=True,
              help="Only these events (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event.")
def events(path, types, as_json):
    """Print topic births, deaths, returns and changes across the snapshots of a run directory.

    A run that ended inside the burn-in has no events yet: it says so and lists the topics it has.
    """
    snapshot = None
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
    if snapshot is not None and snapshot.forming and not as_json:
        click.echo(f"the run ended inside the burn-in (its topics still formed): no events yet; its "
                   f"{snapshot.n_topics} topics:")
        for row in topic_table(snapshot, 8):
            click.echo(row)
