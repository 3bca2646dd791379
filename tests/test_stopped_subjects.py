"""A subject that stops while exact sums still hold its topic is announced dead at once, the topic
listed as ``stopped`` until it picks up again (issue 46; docs/design.md, "Topic identity")."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.config import ModelConfig
from streamtopics.refresh.alignment import l1_distances
from streamtopics.refresh.describe import recent_shares
from streamtopics.refresh.lineage import STOP_EVIDENCE, STOPPED_LATELY, STOPPED_SUBJECT, RefreshState
from streamtopics.synthetic import semi_synthetic, separable_topics
from streamtopics.text.documents import DocumentBatch
from streamtopics.text.vocabulary import Vocabulary


def test_recent_shares_against_a_plain_reference():
    """Four topics on disjoint words, each document on one of them (so its inferred mixture is
    about that topic alone): a topic's weight in the documents since the last refresh over its
    mean weight in the older pooled documents, and what those recent documents would hold at it."""
    n_words, rng = 40, np.random.default_rng(3)
    topic_word = np.zeros((n_words, 4))
    for k in range(4):
        topic_word[10 * k:10 * k + 10, k] = 0.1
    topics = TopicSnapshot(1, 0, [f"w{i}" for i in range(n_words)], topic_word, ["w0", "w10", "w20", "w30"],
                           [0, 1, 2, 3], np.ones(4) / 4, np.ones(4))
    subjects = np.concatenate([rng.integers(0, 4, 3000), rng.integers(0, 3, 1200)])  # topic 3 stops
    stamps = np.concatenate([np.repeat([0, 1000, 2000], 1000), np.full(1200, 3000)])
    documents = [np.sort(rng.choice(np.arange(10 * k, 10 * k + 10), 4, replace=False)) for k in subjects]
    reservoir = DocumentBatch.from_lists(documents, [np.ones(4) for _ in documents],
                                         np.arange(subjects.size, dtype=np.uint64))
    pool_rows = np.arange(0, subjects.size, 3)
    mixtures = rng.dirichlet(np.ones(4), pool_rows.size)
    share, expected = recent_shares(topics, reservoir, stamps, n_words, mixtures, stamps[pool_rows])
    older = mixtures[stamps[pool_rows] < 3000].mean(axis=0)  # reference
    recent = subjects[3000:]
    for k in range(4):
        assert share[k] == pytest.approx(np.mean(recent == k) / older[k], rel=0.02, abs=0.01)
        assert expected[k] == pytest.approx(1200 * older[k], rel=1e-12)
    assert share[3] < 0.02
    assert recent_shares(topics, reservoir, np.zeros(subjects.size), n_words, mixtures, stamps[pool_rows]) is None


FOUR = [range(0, 10), range(10, 20), range(20, 30), range(30, 40)]


def _result(recent, expected=(50.0,) * 4, columns=FOUR):
    """A refresh's result as :meth:`RefreshState.publish` reads it: four topics on ten words each,
    the last one's recent share and evidence as given."""
    topic_word = np.zeros((40, len(columns)))
    for k, words in enumerate(columns):
        topic_word[list(words), k] = 0.1
    k = len(columns)
    return SimpleNamespace(anchors=np.array([w[0] for w in columns]), topic_word=topic_word,
                           coefficients=np.ones((40, k)) / k, prevalence=np.ones(k) / k, alpha=np.ones(k),
                           background=None, background_share=0.0, older_share=np.ones(k), newer_share=np.ones(k),
                           recent_share=np.array([1.0] * (k - 1) + [recent])[:k],
                           recent_expected=np.array(expected[:k]))


def _kinds(snapshot):
    return [(e["type"], e["topic"]) for e in snapshot.events if e["type"] != "change"]


def test_a_held_topic_whose_subject_stopped_dies_once_and_returns_when_it_picks_up():
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    config = ModelConfig(n_topics=4, burn_in=0, birth_grace=0, death_grace=0)
    state = RefreshState(config)
    topic = state.publish(_result(1.0), vocabulary, 100).topic_ids[3]
    quiet = state.publish(_result(STOPPED_LATELY - 0.05), vocabulary, 200)
    assert _kinds(quiet) == [("death", topic)] and quiet.events[0]["held"]
    assert quiet.stopped == [topic] and topic in quiet.topic_ids and quiet.missing == []
    arrays, meta = state.state_dict(vocabulary)  # the stop travels with a checkpoint
    state = RefreshState(config)
    state.load_state_dict(arrays, meta, vocabulary)
    still = state.publish(_result(0.02), vocabulary, 300)
    assert _kinds(still) == [] and still.stopped == [topic]  # announced once
    back = state.publish(_result(STOPPED_SUBJECT), vocabulary, 400)
    assert _kinds(back) == [("return", topic)] and back.stopped == []
    state.publish(_result(0.02), vocabulary, 500)
    gone = state.publish(_result(1.0, columns=FOUR[:3]), vocabulary, 600)
    assert _kinds(gone) == [] and gone.missing == []  # it went after its death: no second one
    assert STOPPED_LATELY == 0.25


@pytest.mark.parametrize(("recent", "expected"), [(STOPPED_LATELY + 0.05, 50.0), (0.0, STOP_EVIDENCE - 1)])
def test_no_stop_on_a_share_above_the_bar_or_on_too_little_evidence(recent, expected):
    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=0, death_grace=0))
    state.publish(_result(1.0), vocabulary, 100)
    snapshot = state.publish(_result(recent, (50.0, 50.0, 50.0, expected)), vocabulary, 200)
    assert _kinds(snapshot) == [] and snapshot.stopped == []
    assert STOP_EVIDENCE == 10.0


def _stream(stops: bool):
    """Exact sums over a separable stream of 8 topics; with ``stops`` topic 0 stops after 6,000 of
    its 15,000 documents. Returns the snapshots, the refresh that first saw the stop, and the truth."""
    truth = separable_topics(300, 8, anchor_mass=0.05, seed=3).topic_word
    early, _ = semi_synthetic(truth, 6000, alpha=0.1, doc_length=150, seed=4)
    late, _ = semi_synthetic(truth[:, 1:] if stops else truth, 9000, alpha=0.1, doc_length=150, seed=5)
    model = StreamingTopicModel(8, vocabulary=[f"w{i}" for i in range(300)], seed=0, burn_in=2)
    snapshots = []
    for part in (early, late):
        for start in range(0, part.shape[0], 1000):
            model.learn_many(part[start:start + 1000])
            snapshots.append(model.refresh())
    return snapshots, 6, truth


@pytest.fixture(scope="module")
def stopping():
    return _stream(stops=True)


def test_a_stopped_subject_is_announced_dead_within_two_refreshes_and_stays_listed(stopping):
    snapshots, saw_it, truth = stopping
    deaths = [(r, e) for r, s in enumerate(snapshots) for e in s.events if e["type"] in ("death", "lost")]
    assert len(deaths) == 1
    r, event = deaths[0]
    assert event["type"] == "death" and event["held"] and saw_it <= r <= saw_it + 2
    held = snapshots[r].column(event["topic"])
    assert np.argmin(l1_distances(truth, snapshots[r].topic_word[:, [held]])[:, 0]) == 0  # the stopped subject
    assert all(s.stopped == [event["topic"]] for s in snapshots[r:])


def test_a_stationary_stream_stops_nothing():
    snapshots, _, _ = _stream(stops=False)
    assert not any(e["type"] == "death" for s in snapshots for e in s.events)
    assert not any(s.stopped for s in snapshots)


def test_the_api_and_the_console_mark_the_stopped_topic(stopping):
    with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx still works
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from consumers.cli.console import event_lines, snapshot_heading
    from consumers.service import LiveSource, create_app

    snapshots, _, _ = stopping
    dying = next(s for s in snapshots if any(e.get("held") for e in s.events))
    topic = dying.stopped[0]
    source = LiveSource(stall_after=30)
    source.publish(dying)
    client = TestClient(create_app(source))
    listed = {t["id"]: t["stopped"] for t in client.get("/api/snapshot").json()["topics"]}
    assert listed == {t: t == topic for t in dying.topic_ids}
    assert client.get(f"/api/topics/{topic}").json()["stopped"] is True
    assert f"stopped (dead, still held) {topic}" in snapshot_heading(dying)
    assert any(line.lstrip().startswith("- death") and "stopped, still held" in line for line in event_lines(dying))


def test_a_subject_that_starts_after_another_stopped_is_born():
    """Exact sums keep a stopped subject's fall for good, and the other topics share its words: the
    emerging-subjects step's drift guard (a topic losing head words) held every later start back
    until the stopped topics' own head words were left out of it (refresh/emerging.py)."""
    truth = separable_topics(300, 9, anchor_mass=0.05, seed=3).topic_word
    parts = [semi_synthetic(truth[:, :8], 6000, alpha=0.1, doc_length=150, seed=4)[0],  # topics 0-7
             semi_synthetic(truth[:, 1:8], 6000, alpha=0.1, doc_length=150, seed=5)[0],  # 0 stops
             semi_synthetic(truth[:, 1:9], 6000, alpha=0.1, doc_length=150, seed=6)[0]]  # 8 starts
    model = StreamingTopicModel(8, vocabulary=[f"w{i}" for i in range(300)], seed=0, burn_in=2)
    births = []
    for part in parts:
        for start in range(0, part.shape[0], 1000):
            model.learn_many(part[start:start + 1000])
            snapshot = model.refresh()
            for event in snapshot.events:
                if event["type"] == "birth":
                    column = snapshot.topic_word[:, [snapshot.column(event["topic"])]]
                    if np.argmin(l1_distances(truth, column)[:, 0]) == 8:  # the new subject
                        births.append(snapshot.documents_seen)
    assert births and births[0] <= 15000  # the refresh at 13,000 saw the start
