"""Figures from a snapshot directory: prevalence over stream time and top words per topic."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from matplotlib.colors import to_hex, to_rgba

from consumers.plots import LABELLED, OTHER, PALETTE, other_prevalence, plot_snapshots, topic_colours
from run_helpers import finished_run
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import sample_documents, separable_topics, topic_proportions

N_WORDS, N_TOPICS = 50, 4


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Four snapshots of a stream, with stream times one day apart."""
    out = tmp_path_factory.mktemp("run")
    topics = separable_topics(N_WORDS, N_TOPICS, anchors_per_topic=2, seed=4)
    documents = sample_documents(topics.topic_word, topic_proportions(2000, N_TOPICS, alpha=0.3, seed=5), 40, seed=6)
    model = StreamingTopicModel(N_TOPICS, vocabulary=[f"word{i}" for i in range(N_WORDS)], anchor_min_df=5)
    for i in range(4):
        model.learn_many(documents[i * 500:(i + 1) * 500])
        snapshot = model.refresh(stream_time=1.7e9 + 86400 * i)
        snapshot.save(out / f"snapshot-{snapshot.version:06d}.json")
    (out / "checkpoint.json").write_text("{}")
    return out


def test_prevalence_png_and_svg(run_dir, tmp_path):
    png = plot_snapshots(run_dir, tmp_path / "prevalence.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    svg = plot_snapshots(run_dir, tmp_path / "figs" / "prevalence.svg", kind="prevalence")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    text = svg.read_text()
    assert "stream time" in text and "#0" in text  # text stays text in SVG


def test_top_words_png_and_svg(run_dir, tmp_path):
    png = plot_snapshots(run_dir, tmp_path / "topics.png", kind="top_words", top_n=5)
    assert png.read_bytes()[:4] == b"\x89PNG"
    one_file = sorted(run_dir.glob("snapshot-*.json"))[0]
    svg = plot_snapshots(one_file, tmp_path / "topics.svg", kind="top_words", top_n=3)
    assert ET.parse(svg).getroot().tag.endswith("svg")


def test_bad_arguments(run_dir, tmp_path):
    with pytest.raises(ValueError):
        plot_snapshots(run_dir, tmp_path / "x.png", kind="pie")
    with pytest.raises(ValueError):
        plot_snapshots(run_dir, tmp_path / "x.gif")
    with pytest.raises(ValueError):
        plot_snapshots(run_dir, tmp_path / "x.png", kind="top_words", top_n=0)
    with pytest.raises(FileNotFoundError):
        plot_snapshots(tmp_path / "missing", tmp_path / "x.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        plot_snapshots(tmp_path / "empty", tmp_path / "x.png")


def test_no_two_topics_share_a_colour_and_the_legend_covers_every_line(tmp_path):
    """More topics than the palette has colours: the figures still give each its own, and the
    prevalence legend names the labelled topics plus one entry for all the others."""
    many = 40
    colours = topic_colours(range(many))
    assert len({tuple(np.round(to_rgba(c), 4)) for c in colours.values()}) == many

    run = tmp_path / "run"
    finished_run(run, n_topics=24, n_documents=1500)
    snapshots = [json.loads(f.read_text()) for f in sorted(run.glob("snapshot-*.json"))]
    n_topics = len(snapshots[-1]["topics"])
    ever = {t["id"] for snapshot in snapshots for t in snapshot["topics"]}  # the dead ones too
    assert n_topics > len(PALETTE)
    svg = plot_snapshots(run, tmp_path / "topics.svg", kind="top_words", top_n=3).read_text()
    fills = set(re.findall(r"fill: (#[0-9a-f]{6})", svg)) - {"#ffffff"}
    assert len(fills) >= n_topics, (len(fills), n_topics)

    text = plot_snapshots(run, tmp_path / "prevalence.svg").read_text()
    named = re.findall(r">#(\d+) ", text)
    assert len(named) == LABELLED
    gone = len(ever) - n_topics
    assert f"other: {n_topics - LABELLED} topics" + (f" (and {gone} gone)" if gone else "") in text
    strong = set(re.findall(r"stroke: (#[0-9a-f]{6}); stroke-width: 1\.8", text))
    assert len(strong) == LABELLED  # one colour per labelled topic (each drawn twice: line and legend)
    assert text.count(f"stroke: {to_hex(OTHER)}; stroke-width: 0.9") == 2  # one "other" line, and its legend


def test_the_other_line_sums_the_prevalence_of_every_topic_not_shown():
    """As the dashboard's chart: the topics past the labelled ones, dead ones included, make one
    line of their summed prevalence (issue 48 item 9d)."""
    points = [(100, None, {1: 0.5, 2: 0.3, 3: 0.2}, {}), (200, None, {1: 0.6, 4: 0.4}, {}), (300, None, {1: 1.0}, {})]
    assert other_prevalence(points, {1}) == pytest.approx([0.5, 0.4, 0.0])
    assert other_prevalence(points, {1, 2, 3, 4}) == [0, 0, 0]
