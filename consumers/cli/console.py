"""What the commands print and how they fail: the :class:`Console` (lines that do not tear a
progress bar), topic tables and event lines, and the exceptions that become exit codes."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from streamtopics.snapshot import DISPLAY_RELEVANCE, EVENT_TYPES

from ..records import Malformed

if TYPE_CHECKING:
    from tqdm import tqdm

    from streamtopics import TopicSnapshot


MALFORMED_SHOWN = 20  # malformed records printed one by one; the summary counts them all


class BadInput(click.ClickException):
    exit_code = 2


class Failure(click.ClickException):
    exit_code = 1


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
        from tqdm import tqdm

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
    """Topics as aligned text rows, most prevalent first: id, share (of the stream's tokens, the
    topic's prevalence), label, anchor (``-`` when it is not among the topic's words,
    :meth:`~streamtopics.snapshot.TopicSnapshot.shown_anchors`), top words."""
    top = snapshot.top_words(words, DISPLAY_RELEVANCE)
    order = sorted(range(snapshot.n_topics), key=lambda k: (-snapshot.prevalence[k], snapshot.topic_ids[k]))
    shown = {t: anchor or "-" for t, anchor in snapshot.shown_anchors().items()}
    anchor_width = max([len("anchor")] + [len(a) for a in shown.values()])
    label_width = max([len("label")] + [len(label) for label in snapshot.labels])
    rows = [f"{'id':>4}  {'share':>6}  {'label':<{label_width}}  {'anchor':<{anchor_width}}  top words"]
    for k in order:
        topic = snapshot.topic_ids[k]
        rows.append(f"{topic:>4}  {snapshot.prevalence[k]:>6.1%}  {snapshot.labels[k]:<{label_width}}  "
                    f"{shown[topic]:<{anchor_width}}  " + " ".join(w for w, _ in top[topic]))
    return rows


def event_lines(snapshot: TopicSnapshot, words: int = 6) -> list[str]:
    """One line per birth, topic found, return and change in ``snapshot.events``, one for all deaths (those still held:
    their subject stopped while the sums hold the topic) and one for all topics lost; each topic
    with its label (events written before labels existed: without)."""
    top = snapshot.top_words(words, DISPLAY_RELEVANCE)
    lines = []
    for event in snapshot.events:
        topic = event["topic"]
        name = f"topic {topic:<4}" + (f" {event['label']}" if event.get("label") else "")
        tail = ": " + " ".join(w for w, _ in top[topic]) if topic in top else ""
        if event["type"] in ("birth", "found", "return"):
            sign = {"birth": "+", "found": "*", "return": "<"}[event["type"]]
            lines.append(f"  {sign} {event['type']:<7} {name}  anchor {event['anchor']!r}{tail}")
        elif event["type"] == "change":
            moved = " ".join([f"+{w}" for w in event.get("words_in", [])[:3]]
                             + [f"-{w}" for w in event.get("words_out", [])[:3]])
            before, after = event["anchor_before"], event["anchor_after"]
            anchor = repr(after) if before == after else f"{before!r} -> {after!r}"
            lines.append(f"  ~ change  {name}  anchor {anchor}, moved {event['distance']:.2f}{tail}"
                         + (f"  ({moved})" if moved else ""))
    for kind, sign in (("death", "-"), ("lost", "/")):
        gone = sorted((e["topic"], e.get("label"), e.get("held", False)) for e in snapshot.events if e["type"] == kind)
        if gone:
            named = ", ".join(str(topic) + (f" ({label})" if label else "") + (" stopped, still held" if held else "")
                              for topic, label, held in gone)
            lines.append(f"  {sign} {kind:<7} topic{'s' if len(gone) > 1 else ''} {named}")
    return lines


def snapshot_heading(snapshot: TopicSnapshot, path: Path | None = None) -> str:
    parts = [f"snapshot {snapshot.version}", f"{snapshot.documents_seen:,} documents"]
    if snapshot.stream_time is not None:
        parts.append(f"stream time {_format_time(snapshot.stream_time)}")
    if snapshot.forming:
        parts.append("topics forming (events wait for the burn-in)")
    else:
        counts = {t: sum(e["type"] == t for e in snapshot.events) for t in EVENT_TYPES}
        parts.append(", ".join(f"{n} {t}{'s' if n != 1 and t not in ('found', 'lost') else ''}"
                               for t, n in counts.items() if n or t not in ("found", "lost", "return")))  # rare ones
        # named when there are some
        # with these the events add up: the topics listed are the ones announced plus the tentative and stopped
        if snapshot.tentative:
            parts.append(f"tentative (born if they last) {', '.join(map(str, snapshot.tentative))}")
        if snapshot.missing:
            parts.append(f"missing (dead if they stay away) {', '.join(map(str, snapshot.missing))}")
        if snapshot.stopped:
            parts.append(f"stopped (dead, still held) {', '.join(map(str, snapshot.stopped))}")
    if path is not None:
        parts.append(str(path))
    return " | ".join(parts)
