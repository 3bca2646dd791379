"""A topic's share (its published prevalence) is what ``transform`` says of the stream's documents
on average: the mean of its weight in the mixtures of a pool of the documents the model keeps."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks.events import archive_texts
from streamtopics import StreamingTopicModel
from streamtopics.inference import infer_mixtures
from streamtopics.refresh import describe
from streamtopics.text.documents import DocumentBatch

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HELD_OUT = 4000


@pytest.fixture(scope="module")
def shuffled_newsgroups():
    """All 20 Newsgroups posts in a seeded shuffle (as the events benchmark reads them): a
    stationary stream of real text."""
    return archive_texts("20newsgroups", DATA, seed=0)


@pytest.fixture(scope="module")
def fitted(shuffled_newsgroups):
    model = StreamingTopicModel(20, warmup_documents=5000, seed=0)
    model.learn_many(shuffled_newsgroups[:-HELD_OUT])
    model.refresh()
    return model


def test_shares_agree_with_the_mean_mixture_transform_gives_the_streams_next_documents(fitted, shuffled_newsgroups):
    """The shares against the mean of ``transform_many`` over the stream's next 4,000 posts (the
    token shares the recovery gives were a median 40 % apart from it). Both sides are samples, so
    each topic's tolerance is three of its sampling errors (the spread of its weight over the
    posts) and the median difference must be under 10 %."""
    snapshot = fitted.snapshot
    mixtures = np.array([[row[t] for t in snapshot.topic_ids]
                         for row in fitted.transform_many(shuffled_newsgroups[-HELD_OUT:])])
    mean = mixtures.mean(axis=0)
    sampling_error = mixtures.std(axis=0) * np.sqrt(1 / HELD_OUT + 1 / describe.POOL)
    difference = np.abs(snapshot.prevalence - mean)
    assert np.median(difference / mean) < 0.10
    assert (difference <= 3 * sampling_error).all(), np.c_[snapshot.prevalence, mean, sampling_error]


def test_a_share_is_the_mean_weight_over_an_evenly_spaced_pool_of_the_kept_documents(fitted):
    """Against a reference written here: every ``ceil(n / POOL)``-th kept document, its words
    the snapshot has, inferred against the published topics (the refresh started them from the
    recovery's shares, hence the tolerance), documents with no known word left out."""
    snapshot = fitted.snapshot
    kept = fitted.ingest.reservoir_batch()
    assert len(kept) > describe.POOL  # the pool is a part of them
    pool = kept.select(np.arange(0, len(kept), -(-len(kept) // describe.POOL)))
    pool = pool.keep_entries(pool.indices < snapshot.topic_word.shape[0])
    columns, prior = snapshot.mixture_components()
    weights = snapshot.topic_part(infer_mixtures(pool, columns, prior, max_iter=describe.MIXTURE_UPDATES))
    reference = weights[pool.token_counts() > 0].mean(axis=0)
    np.testing.assert_allclose(snapshot.prevalence, reference / reference.sum(), rtol=0.02)
    assert np.isclose(snapshot.prevalence.sum(), 1.0)


def test_a_forgetting_models_pool_weighs_its_newest_documents_as_its_sums_do():
    """A reservoir of the newest documents, oldest first: with a half-life of 10 documents only
    the newest 80 are pooled, each weighing 2 ** -(documents after it / 10); the shares are the
    weighted means of the mixtures (reference: plain loops)."""
    ids = [np.array([d % 3], np.int32) for d in range(200)]
    batch = DocumentBatch.from_lists(ids, [np.array([1.0])] * 200, np.arange(200, dtype=np.uint64))
    pool, weights = describe.document_pool(batch, n_words=3, pool=1000, half_life=10.0)
    assert pool.keys.tolist() == list(range(120, 200))
    np.testing.assert_allclose(weights, [0.5 ** ((199 - d) / 10.0) for d in range(120, 200)])
    mixtures = np.random.default_rng(0).dirichlet(np.ones(4), size=80)
    expected = sum(w * m for w, m in zip(weights, mixtures)) / sum(weights)
    np.testing.assert_allclose(describe.topic_shares(pool, mixtures, weights), expected / expected.sum())
    thinned, _ = describe.document_pool(batch, n_words=3, pool=20, half_life=10.0)
    assert thinned.keys.tolist() == list(range(120, 200, 4))
