"""Figures of a run's snapshots (matplotlib, Agg backend: no display needed).

:func:`plot_snapshots` is what ``streamtopics plot`` calls::

    plot_snapshots("runs/demo", "prevalence.png")                    # prevalence over stream time
    plot_snapshots("runs/demo", "topics.svg", kind="top_words", top_n=10)

``kind="prevalence"`` draws every topic's prevalence at each snapshot against stream time (the
documents' timestamps, when every snapshot has one) or documents seen; a topic that is born or
dies simply starts or stops. The :data:`LABELLED` most prevalent topics at the end get a colour,
a line and a legend entry each; the others, the dead ones included, are summed into one grey
line, "other: N topics" (:func:`other_prevalence`, as the dashboard's chart does), so the legend
names every line. No two topics in one figure share a colour (:func:`topic_colours`: the palette,
then evenly spaced hues when there are more topics). ``kind="top_words"`` draws the latest
snapshot's topics as small bar charts of their ``top_n`` most probable words, most prevalent
topic first. The format follows the file name's suffix (``.png``, ``.svg``, ``.pdf``).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from streamtopics import TopicSnapshot  # noqa: E402
from streamtopics.snapshot import DISPLAY_RELEVANCE  # noqa: E402

from .snapshot_directory import SnapshotDirectory  # noqa: E402

KINDS = ("prevalence", "top_words")
FORMATS = (".png", ".svg", ".pdf")
LABELLED = 12  # topics named in the prevalence legend (the most prevalent at the end)


PALETTE = [c for i, c in enumerate(plt.get_cmap("tab20").colors) if i not in (14, 15)]  # no greys


OTHER = "0.7"  # the grey of the line summing the "other" topics


def topic_colours(topics) -> dict:
    """A distinct colour for each of ``topics`` (ids, in the order they are to be coloured): the
    palette's colours first, evenly spaced hues once it runs out."""
    topics = list(topics)
    if len(topics) <= len(PALETTE):
        return dict(zip(topics, PALETTE))
    hues = plt.get_cmap("hsv")
    return {t: hues(i / len(topics)) for i, t in enumerate(topics)}


def _prevalence_series(files: list[Path]):
    points = []  # (documents_seen, stream_time, {id: prevalence}, {id: label, or the anchor in older snapshots})
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        topics = data["topics"]
        points.append((data["documents_seen"], data.get("stream_time"),
                       {t["id"]: t["prevalence"] for t in topics}, {t["id"]: t.get("label") or t["anchor"] for t in topics}))
    return points


def other_prevalence(points, shown) -> list[float]:
    """At each point of :func:`_prevalence_series`, the summed prevalence of the topics not in
    ``shown``: the "other" line (0 where all of them are absent)."""
    return [sum(share for topic, share in point[2].items() if topic not in shown) for point in points]


def _save(fig, out_path: Path, dpi: int) -> None:
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "streamtopics"}):  # SVG text stays text
        fig.savefig(out_path, dpi=dpi, metadata={"Date": None} if out_path.suffix.lower() == ".svg" else None)


def plot_prevalence(files: list[Path], out_path: Path, title: str | None = None) -> Path:
    points = _prevalence_series(files)
    use_time = all(p[1] is not None for p in points)
    xs = [datetime.fromtimestamp(p[1], tz=timezone.utc) if use_time else p[0] for p in points]
    ids = sorted({t for p in points for t in p[2]})
    last_name = {}
    for p in points:
        last_name.update(p[3])
    final = points[-1][2]
    ranked = sorted(final, key=lambda t: -final[t])[:LABELLED]
    colours = topic_colours(sorted(ranked))
    others = [t for t in ids if t not in colours]
    marker = "o" if len(points) < 30 else None
    fig, ax = plt.subplots(figsize=(10, 5.2), layout="constrained")
    for topic in ranked:
        ax.plot(xs, [p[2].get(topic, math.nan) for p in points], color=colours[topic], linewidth=1.8,
                marker=marker, markersize=3, zorder=3, label=f"#{topic} {last_name[topic]}")
    if others:
        # the live topics summed are counted, the gone ones named apart
        live, gone = len(final) - len(ranked), len(others) - (len(final) - len(ranked))
        ax.plot(xs, other_prevalence(points, colours), color=OTHER, linewidth=0.9, marker=marker, markersize=3,
                zorder=2, label=f"other: {live} topic{'s' if live != 1 else ''}" + (f" (and {gone} gone)" if gone else ""))
    ax.set_ylabel("prevalence")
    ax.set_xlabel("stream time (UTC)" if use_time else "documents seen")
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=0))
    # the named lines set the axis: the summed others, often half the stream, would squeeze them (their
    # line runs off the top, as on the dashboard)
    named = [v for topic in ranked for p in points if not math.isnan(v := p[2].get(topic, math.nan))]
    ax.set_ylim(0, max(named, default=0.0) * 1.08 or None)
    ax.grid(True, alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title or f"Topic prevalence over {len(points)} snapshots", loc="left")
    if ids:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9,
                  title="topic (label)" + (f", top {LABELLED}" if others else ""))
    if use_time:
        fig.autofmt_xdate()
    _save(fig, out_path, 120)
    plt.close(fig)
    return out_path


def plot_top_words(file: Path, out_path: Path, top_n: int = 10, max_topics: int | None = None,
                   title: str | None = None) -> Path:
    snapshot = TopicSnapshot.load(file)
    top = snapshot.top_words(top_n, DISPLAY_RELEVANCE)
    order = sorted(range(snapshot.n_topics), key=lambda k: -snapshot.prevalence[k])[:max_topics]
    columns = min(4, len(order))
    rows = math.ceil(len(order) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 0.28 * top_n * rows + 0.9 * rows + 0.4),
                             layout="constrained", squeeze=False)
    colours = topic_colours(sorted(snapshot.topic_ids[k] for k in order))
    for ax in axes.ravel()[len(order):]:
        ax.set_visible(False)
    for ax, k in zip(axes.ravel(), order):
        topic = snapshot.topic_ids[k]
        words = top[topic]
        ax.barh(range(len(words)), [p for _, p in words], color=colours[topic])
        ax.set_yticks(range(len(words)), [w for w, _ in words], fontsize=9)
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
        ax.set_title(f"#{topic} {snapshot.labels[k]}  ({snapshot.prevalence[k]:.1%})", fontsize=10, loc="left")
    fig.suptitle(title or f"Top {top_n} words per topic, snapshot {snapshot.version} "
                          f"({snapshot.documents_seen:,} documents)", x=0.01, ha="left")
    _save(fig, out_path, 110)
    plt.close(fig)
    return out_path


def plot_snapshots(snapshot_dir, out_path, kind: str = "prevalence", top_n: int = 10,
                   max_topics: int | None = None, title: str | None = None) -> Path:
    """Write a figure of the snapshots in ``snapshot_dir`` (a run directory, or one snapshot
    file for ``top_words``) to ``out_path``; returns the path written.

    Raises :class:`ValueError` for an unknown ``kind``, format or ``top_n`` and
    :class:`FileNotFoundError` when there is no snapshot.
    """
    out_path = Path(out_path)
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    if out_path.suffix.lower() not in FORMATS:
        raise ValueError(f"{out_path.name}: the file name must end in {', '.join(FORMATS)}")
    if not 1 <= int(top_n) <= 100:
        raise ValueError(f"top_n must be between 1 and 100, got {top_n}")
    files = SnapshotDirectory.files_at(snapshot_dir)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "prevalence":
        return plot_prevalence(files, out_path, title)
    return plot_top_words(files[-1], out_path, int(top_n), max_topics, title)
