"""The pandas views of a model (issue 16): topic_info, topics_over_time, document_topics, and
inference that says which documents had no known word."""

import numpy as np
import pandas as pd
import pytest

from streamtopics import StreamingTopicModel

from test_labels import WORDS, texts


@pytest.fixture(scope="module")
def model():
    model = StreamingTopicModel(3, vocabulary=WORDS, anchor_min_df=5, reservoir_size=150, refine_iterations=5,
                                history_size=4)
    for i, (key, text) in enumerate(texts(900)):
        model.learn_one(text, key=key, stream_time=1000.0 + i)
        if (i + 1) % 150 == 0:
            model.refresh()
    return model


def test_topic_info_is_one_row_per_topic_most_prevalent_first(model):
    snapshot = model.snapshot
    info = model.topic_info()
    assert list(info.columns) == ["topic", "label", "anchor", "prevalence", "coherence", "top_words",
                                  "representative_docs"]
    assert list(info["prevalence"]) == sorted(snapshot.prevalence.tolist(), reverse=True)
    top = snapshot.top_words(10, relevance=0.6)
    for row in info.itertuples():
        k = snapshot.column(row.topic)
        assert (row.label, row.anchor, row.prevalence, row.coherence) == (
            snapshot.labels[k], snapshot.anchors[k], snapshot.prevalence[k], snapshot.coherence[k])
        assert row.top_words == [w for w, _ in top[row.topic]]
        assert row.representative_docs == [d["text"] for d in snapshot.representatives[row.topic]]


def test_topics_over_time_is_one_row_per_recorded_snapshot_and_topic(model):
    frame = model.topics_over_time()
    records = model.history.records
    assert [r["version"] for r in records] == [1, 3, 5, 6]  # capacity 4: halved once
    assert len(frame) == sum(len(r["prevalence"]) for r in records) == 12
    assert list(frame.columns) == ["version", "documents_seen", "stream_time", "topic", "label", "prevalence", "words"]
    last = frame[frame["version"] == model.snapshot.version]
    snapshot = model.snapshot
    top = snapshot.top_words(5, relevance=0.6)
    assert list(last["topic"]) == snapshot.topic_ids
    assert list(last["label"]) == snapshot.labels
    assert list(last["prevalence"]) == pytest.approx(snapshot.prevalence.tolist())
    assert list(last["words"]) == [[w for w, _ in top[t]] for t in snapshot.topic_ids]
    assert last["stream_time"].iloc[0] == 1899.0 and last["documents_seen"].iloc[0] == 900
    assert frame["version"].is_monotonic_increasing


def test_document_topics_gives_each_documents_mixture_and_flags_unknown_ones(model):
    documents = ["apple pear plum apple", "rocket orbit moon", "zebra giraffe", "", "goal goal team"]
    frame = model.document_topics(documents)
    mixtures = model.infer(documents)
    snapshot = model.snapshot
    np.testing.assert_array_equal(frame[[f"topic_{t}" for t in snapshot.topic_ids]].to_numpy(), mixtures)
    assert list(frame["known_tokens"]) == [4.0, 3.0, 0.0, 0.0, 3.0]  # counted by hand
    best = [snapshot.topic_ids[k] for k in mixtures.argmax(axis=1)]
    assert list(frame["topic"][[0, 1, 4]]) == [best[0], best[1], best[4]]
    assert frame["topic"][[2, 3]].isna().all() and frame["label"][[2, 3]].isna().all()
    assert list(frame["label"][[0, 1, 4]]) == [snapshot.label(best[d]) for d in (0, 1, 4)]
    assert list(frame["weight"]) == pytest.approx(mixtures.max(axis=1).tolist())
    assert len({frame["topic"][0], frame["topic"][1], frame["topic"][4]}) == 3


def test_infer_returns_the_known_tokens_of_each_document(model):
    documents = ["apple apple zebra", "zebra", {"pear": 2, "moon": 1, "unknown": 7}]
    mixtures, known = model.infer(documents, return_known=True)
    np.testing.assert_array_equal(known, [2.0, 0.0, 3.0])
    prior = model.snapshot.prevalence / model.snapshot.prevalence.sum()
    np.testing.assert_allclose(mixtures[1], prior)  # what "no known word" hides without the flag
    np.testing.assert_array_equal(mixtures, model.infer(documents))
    empty_first = model.infer(["zebra", "pear pear"], return_known=True)[1]
    np.testing.assert_array_equal(empty_first, [0.0, 2.0])


def test_frames_need_a_snapshot():
    with pytest.raises(RuntimeError, match="no snapshot yet"):
        StreamingTopicModel(3, vocabulary=WORDS).topic_info()
    assert isinstance(StreamingTopicModel(3, vocabulary=WORDS).topics_over_time(), pd.DataFrame)
