"""Anchors for emerging subjects: a subject that starts late gets an anchor from its words' jump in
rate, a stationary stream never does (issue 46; streamtopics/refresh/emerging.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel
from streamtopics.refresh.alignment import l1_distances
from streamtopics.refresh.emerging import (EmergingAnchors, RecentWords, document_frequencies, lift_column,
                                          recent_documents, word_rise)
from streamtopics.synthetic import sample_documents, separable_topics
from streamtopics.text.documents import DocumentBatch

N_DOCS, EVERY, START = 7000, 500, 3500
FAINT = 0.05
NEW_ALPHA = 0.1  # the new subject's Dirichlet weight: 8 % of the tokens, the others' fall by as much


def _batch(rows: list[list[int]]) -> DocumentBatch:
    return DocumentBatch.from_lists([np.array(sorted(set(r)), np.int32) for r in rows],
                                    [np.ones(len(set(r))) for r in rows], np.arange(len(rows), dtype=np.uint64))


def test_word_rise_against_a_plain_reference():
    rng = np.random.default_rng(3)
    documents = [list(rng.integers(0, 12 if d < 40 else 9, size=5)) for d in range(110)]
    recent = np.arange(110) < 40
    in_recent, in_older = document_frequencies(_batch(documents), recent, 11)  # words 11 and up left out
    got = word_rise(in_recent, in_older, 40, 70)
    assert in_recent.shape == in_older.shape == (11,)
    for word in range(11):
        assert in_recent[word] == sum(word in doc for doc in documents[:40])
        assert in_older[word] == sum(word in doc for doc in documents[40:])
        rate_before = max(in_older[word], 0.5) / 70  # a word no older document has: half of one
        assert got[word] == pytest.approx(in_recent[word] / 40 / rate_before, rel=1e-12)


def test_lift_column_against_a_plain_reference():
    rng = np.random.default_rng(4)
    rows = [sorted(set(rng.integers(0, 10, size=6).tolist())) for _ in range(50)]
    counts = [rng.integers(1, 4, size=len(r)).astype(float) for r in rows]
    batch = DocumentBatch.from_lists([np.array(r, np.int32) for r in rows], counts, np.arange(50, dtype=np.uint64))
    present = sp.csc_matrix(np.array([[float(w in r) for w in range(10)] for r in rows]))
    matrix = sp.csr_matrix((batch.counts, batch.indices, batch.indptr), shape=(50, 10))
    got = lift_column(matrix, present, 3)
    everywhere, around = np.zeros(10), np.zeros(10)
    for r, c in zip(rows, counts):
        for w, n in zip(r, c):
            everywhere[w] += n
            if 3 in r:
                around[w] += n
    lift = np.maximum(around / around.sum() - everywhere / everywhere.sum(), 0.0)
    np.testing.assert_allclose(got, lift / lift.sum(), rtol=1e-12)
    assert got[3] == got.max()  # the word itself is in every one of its documents


def test_recent_documents_are_the_newest_refreshes_until_enough():
    stamps = np.array([0] * 3000 + [3000] * 500 + [3500] * 700)
    recent = recent_documents(stamps, min_recent=1000)
    np.testing.assert_array_equal(recent, stamps >= 3000)  # the last refresh's 700 are too few: one more
    np.testing.assert_array_equal(recent_documents(stamps, min_recent=600), stamps == 3500)
    assert recent_documents(np.zeros(5000, int), min_recent=1000) is None  # the stamps cannot tell
    assert recent_documents(stamps[2000:], min_recent=1000) is None  # fewer older documents than recent ones


def _stream(seed: int, start: int | None, diluted: float = 1.0):
    """Five separable topics over 300 words; the last is absent until document ``start`` (None:
    never), from where the fourth's weight is ``diluted`` times what it was. Returns the counts, the
    vocabulary, the topics and each topic's anchor words."""
    rng = np.random.default_rng(seed)
    pool = separable_topics(300, 5, anchors_per_topic=3, anchor_mass=0.2, concentration=0.1, seed=rng)
    topics = pool.topic_word.copy()
    topics[pool.anchors[4], 4] *= FAINT  # its anchor words rare: not yet candidates when it starts
    topics[:, 4] /= topics[:, 4].sum()
    mixtures = rng.dirichlet([0.3, 0.3, 0.3, 0.3, NEW_ALPHA], N_DOCS)
    if start is not None:
        mixtures[:start, 4] = 0.0
        mixtures[start:, 3] *= diluted
    else:
        mixtures[:, 4] = 0.0
    mixtures /= mixtures.sum(axis=1, keepdims=True)
    counts = sample_documents(topics, mixtures, 40, seed=rng)
    return sp.csr_matrix(counts), [f"w{i}" for i in range(300)], topics, pool.anchors


def _learned(counts, vocabulary, until: int) -> StreamingTopicModel:
    """A model refreshed every EVERY documents up to START, then given the documents up to ``until``."""
    model = StreamingTopicModel(5, vocabulary, seed=0)
    for first in range(0, until, EVERY):
        model.learn_many(counts[first:first + EVERY])
        if first + EVERY <= START:
            model.refresh()
    return model


def _apply(model, anchors: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """EmergingAnchors.apply on the model's statistics and reservoir, as the next refresh would."""
    emerging = EmergingAnchors()
    reservoir, stamps = model.ingest.stamped_reservoir()
    view = model.ingest.statistics.refresh_view(model.config)
    placed = emerging.apply(anchors, view, RecentWords.of(reservoir, stamps, view.n_words), model.vocabulary.words,
                            model.snapshot.topic_word)
    return placed, emerging.placed


def _owner(topics: np.ndarray, word: int) -> int:
    return int(np.argmax(topics[word]))


@pytest.mark.parametrize(("seed", "diluted"), [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0),
                                               (6, 1.0), (7, 1.0), (0, 0.3), (1, 0.3), (2, 0.3)])
def test_anchors_that_miss_a_starting_subject_get_one_of_its_words(seed, diluted):
    """Also while another topic loses weight, and so its words (``diluted``): that topic's drift
    guard holds back only subjects alike it."""
    counts, vocabulary, topics, anchor_words = _stream(seed, START, diluted)
    model = _learned(counts, vocabulary, START + 2 * EVERY)  # 1,000 documents since the start, none refreshed
    index = {w: i for i, w in enumerate(vocabulary)}
    # anchors that miss the subject, as where FastAnchorWords split an old topic instead: an anchor word of each
    # old topic and a second one of the first
    anchors = np.array([words[0] for words in anchor_words[:4]] + [anchor_words[0][1]])
    after, placed = _apply(model, anchors)
    assert len(placed) == 1 and _owner(topics, index[placed[0]]) == 4, placed
    changed = np.flatnonzero(after != anchors)
    assert changed.size == 1 and changed[0] in (0, 4) and vocabulary[after[changed[0]]] == placed[0]  # a duplicate
    assert _apply(model, after)[1] == []  # anchors that hold the subject already: nothing placed


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_a_stationary_stream_gets_no_emerging_anchor(seed):
    counts, vocabulary, _, _ = _stream(seed, None)
    model = _learned(counts, vocabulary, START + 2 * EVERY)
    index = {w: i for i, w in enumerate(vocabulary)}
    anchors = np.array([index[w] for w in model.snapshot.anchors])
    after, placed = _apply(model, anchors)
    assert placed == [] and np.array_equal(after, anchors)


def _run(counts, vocabulary, **settings):
    model = StreamingTopicModel(5, vocabulary, seed=0, **settings)
    refreshes = []
    for first in range(0, N_DOCS, EVERY):
        model.learn_many(counts[first:first + EVERY])
        snapshot = model.refresh()
        refreshes.append((first + EVERY, snapshot, list(model.last_refresh["emerging_anchors"])))
    return refreshes


def test_emerging_anchors_off_places_none():
    counts, vocabulary, _, _ = _stream(0, START)
    assert any(words for _, _, words in _run(counts, vocabulary))  # on, this stream gets some
    assert not any(words for _, _, words in _run(counts, vocabulary, emerging_anchors=False))


def test_the_placed_anchors_survive_a_checkpoint(tmp_path):
    counts, vocabulary, _, _ = _stream(0, START)
    model = StreamingTopicModel(5, vocabulary, seed=0)
    for first in range(0, N_DOCS, EVERY):
        model.learn_many(counts[first:first + EVERY])
        model.refresh()
        if model.last_refresh["emerging_anchors"]:
            break
    words = model.lineage.emerging.words
    assert words
    restored = StreamingTopicModel.load(model.save(tmp_path / "model.state"))
    assert restored.lineage.emerging.words == words


def test_losing_words_marks_each_topic_with_a_falling_head_word():
    """The drift guard holds back only the subjects most alike a topic that is losing words: which
    topics have a falling word among their DRIFT_WORDS most probable, against a plain reference."""
    from streamtopics.refresh.emerging import DRIFT_WORDS, _losing_words

    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(200, 0.05), size=6).T  # 200 words x 6 topics
    falling = np.zeros(200, bool)
    falling[rng.choice(200, size=3, replace=False)] = True
    got = _losing_words(topics, falling)
    for k in range(6):
        head = sorted(range(200), key=lambda w: -topics[w, k])[:DRIFT_WORDS]
        assert got[k] == any(falling[w] for w in head)
    assert got.any() and not got.all()
