"""Sparse CVB0 (streamtopics.refresh.collapsed) against a plain reference sweep, its count invariants, its
independence from the number of threads, and the refinement that runs it."""

import numba
import numpy as np
import pytest

from streamtopics.refresh.collapsed import CollapsedShares, _keep_largest, _update_word_topic
from streamtopics.config import ModelConfig
from streamtopics.text.documents import DocumentBatch
from streamtopics.evaluation import matched_l1
from streamtopics.refresh.refinement import refine_topics
from streamtopics.synthetic import sample_documents, topic_proportions


def _lda_corpus(n_docs=800, n_words=200, n_topics=5, length=40, seed=3):
    """Documents drawn from LDA with Dirichlet(0.05) topics (not separable: no anchor words
    planted) and Dirichlet(0.1) mixtures, and a seed: the truth blurred halfway to random topics."""
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet(np.full(n_words, 0.05), n_topics).T
    docs = DocumentBatch.from_csr(sample_documents(truth, topic_proportions(n_docs, n_topics, alpha=0.1, seed=seed + 1),
                                                   length, seed=seed + 2))
    seed_topics = 0.5 * truth + 0.5 * rng.dirichlet(np.ones(n_words), n_topics).T
    return truth, docs, seed_topics


def _reference_sweep(batch, n_words, smoothing, prior, ids, weights, doc_topic, blocks):
    """One sweep as the module docstring states it, entry by entry in plain Python: the documents
    in ``blocks`` consecutive blocks, each block's against the phi of the shares its predecessors
    left; within a document, each entry sees the counts its predecessors left."""
    ids, weights, doc_topic = ids.copy(), weights.astype(np.float64), doc_topic.copy()
    top = ids.shape[1]
    edges = np.linspace(0, len(batch), blocks + 1).astype(int)
    for first, end in zip(edges[:-1], edges[1:]):
        word_topic = np.zeros((n_words, doc_topic.shape[1]))
        for e, w in enumerate(batch.indices):
            word_topic[w, ids[e]] += batch.counts[e] * weights[e]
        phi = (word_topic + smoothing) / (word_topic.sum(axis=0) + n_words * smoothing)
        for d in range(first, end):
            for e in range(batch.indptr[d], batch.indptr[d + 1]):
                w, c = batch.indices[e], batch.counts[e]
                for t in range(top):
                    doc_topic[d, ids[e, t]] -= c * weights[e, t]
                values = phi[w] * (np.maximum(doc_topic[d], 0.0) + prior)
                order = sorted(range(values.size), key=lambda k: (-values[k], k))[:top]
                ids[e] = order
                weights[e] = values[order] / values[order].sum()
                for t in range(top):
                    doc_topic[d, ids[e, t]] += c * weights[e, t]
    return ids, weights, doc_topic


@pytest.mark.parametrize("top, blocks", [(5, 1), (2, 1), (4, 3)])
def test_a_sweep_is_the_reference_sweep(top, blocks):
    _, docs, seed_topics = _lda_corpus(n_docs=60)
    shares = CollapsedShares.seeded(docs, seed_topics, top=top)
    ids, weights, doc_topic = _reference_sweep(docs, seed_topics.shape[0], 0.01, 0.03, shares.topic_ids,
                                               shares.weights, shares.doc_topic, blocks)
    shares.sweep(0.03, 0.01, blocks=blocks)
    np.testing.assert_array_equal(shares.topic_ids, ids)
    np.testing.assert_allclose(shares.weights, weights, rtol=1e-6, atol=1e-7)  # float32 weights
    np.testing.assert_allclose(shares.doc_topic, doc_topic, rtol=1e-5, atol=1e-5)
    word_topic = np.zeros_like(shares.word_topic)
    for e, w in enumerate(docs.indices):
        word_topic[w, shares.topic_ids[e]] += docs.counts[e] * shares.weights[e]
    np.testing.assert_array_equal(shares.word_topic, word_topic)  # each cell's changes in entry order, as here


@pytest.mark.parametrize("moving", [False, True])
def test_any_split_of_the_words_between_threads_gives_the_sums_of_one_pass_in_entry_order(moving):
    rng = np.random.default_rng(5)
    n_entries, n_words, n_topics, top = 3000, 40, 7, 3
    indices = rng.integers(0, n_words, n_entries).astype(np.int32)
    counts = rng.integers(1, 5, n_entries).astype(np.float64)
    ids, ids_before = (rng.integers(0, n_topics, (n_entries, top)).astype(np.int16) for _ in range(2))
    weights, weights_before = (rng.dirichlet(np.ones(top), n_entries).astype(np.float32) for _ in range(2))
    start = rng.random((n_words, n_topics)) * 100
    expected = start.copy()
    for e in range(n_entries):
        for t in range(top):
            if moving:
                expected[indices[e], ids_before[e, t]] -= counts[e] * weights_before[e, t]
            expected[indices[e], ids[e, t]] += counts[e] * weights[e, t]
    for parts in (1, 2, 5):
        owners = rng.integers(0, parts, n_words).astype(np.int32)  # any split, ranges or not
        word_topic = start.copy()
        _update_word_topic(indices, counts, ids, weights, word_topic, ids_before, weights_before, moving, owners, parts)
        np.testing.assert_array_equal(word_topic, expected)


def test_the_counts_keep_every_token_and_the_topics_are_distributions():
    _, docs, seed_topics = _lda_corpus()
    shares = CollapsedShares.seeded(docs, seed_topics)
    for _ in range(3):
        shares.sweep(0.03, 0.01)
        tokens = np.add.reduceat(docs.counts, docs.indptr[:-1])
        np.testing.assert_allclose(shares.doc_topic.sum(axis=1), tokens, rtol=1e-5)
        np.testing.assert_allclose(shares.word_topic.sum(axis=1), np.bincount(docs.indices, docs.counts, 200), rtol=1e-5)
        np.testing.assert_allclose(shares.weights.sum(axis=1), 1.0, rtol=1e-6)
        np.testing.assert_allclose(shares.topic_word(0.01).sum(axis=0), 1.0)


def test_the_sweeps_do_not_depend_on_the_number_of_threads():
    _, docs, seed_topics = _lda_corpus()
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        previous = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            shares = CollapsedShares.seeded(docs, seed_topics)
            for _ in range(3):
                shares.sweep(0.03, 0.01)
        finally:
            numba.set_num_threads(previous)
        results.append(shares.topic_word(0.01))
    np.testing.assert_array_equal(results[0], results[1])


def test_a_topic_no_entry_holds_keeps_its_seed_column():
    _, docs, seed_topics = _lda_corpus(n_docs=50)
    # one more word that no document has, and a topic that is all that word: no entry can lean to it
    seed = np.zeros((seed_topics.shape[0] + 1, seed_topics.shape[1] + 1))
    seed[:-1, :-1], seed[-1, -1] = seed_topics, 1.0
    shares = CollapsedShares.seeded(docs, seed, top=2)
    shares.sweep(0.03, 0.01)
    assert shares.word_topic[:, -1].sum() == 0.0
    np.testing.assert_array_equal(shares.topic_word(0.01)[:, -1], seed[:, -1])


def test_the_sweeps_after_kl_tem_move_a_blurred_seed_towards_the_lda_truth():
    truth, docs, seed_topics = _lda_corpus()
    kl_tem = refine_topics(seed_topics, docs, iterations=15, smoothing=0.01)
    both = refine_topics(seed_topics, docs, iterations=15, smoothing=0.01, sweeps=10)
    assert (both.kept_iteration, both.heldout) == (kl_tem.kept_iteration, kl_tem.heldout)  # the same KL-tEM phase
    assert both.sweeps == 10 and kl_tem.sweeps == 0
    np.testing.assert_allclose(both.topic_word.sum(axis=0), 1.0)
    assert matched_l1(truth, both.topic_word) < matched_l1(truth, kl_tem.topic_word) < matched_l1(truth, seed_topics)


def test_cvb0_holds_on_short_documents_where_kl_tem_drifts():
    # short documents: the regime where KL-tEM's mixture-of-multinomials fixed point moves away
    truth, docs, seed_topics = _lda_corpus(n_docs=3000, length=12, seed=8)
    seed_topics = 0.8 * truth + 0.2 * seed_topics
    shares = CollapsedShares.seeded(docs, seed_topics)
    for _ in range(15):
        shares.sweep(0.03, 0.01)
    kl_tem = refine_topics(seed_topics, docs, iterations=15, smoothing=0.01, tolerance=np.inf)
    assert matched_l1(truth, shares.topic_word(0.01)) < matched_l1(truth, kl_tem.topic_word)


def test_a_negative_number_of_sweeps_is_refused():
    with pytest.raises(ValueError, match="refine_sweeps"):
        ModelConfig(5, refine_sweeps=-1)


@pytest.mark.parametrize("previous", [[0, 3], [4, 2], [2, 1]])
def test_the_largest_shares_are_kept_whatever_the_entry_held_before_and_ties_go_to_the_lower_topic(previous):
    values = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    ids, weights = np.array([previous], np.int16), np.zeros((1, 2), np.float32)
    for warm in (False, True):
        _keep_largest(values, ids, weights, 0, np.empty(2), np.empty(2, np.int64),
                      np.empty(values.size, np.int64), warm)
        assert ids[0].tolist() == [1, 2] and weights[0].tolist() == [0.5, 0.5]
        ids[0] = previous


def test_the_largest_shares_of_many_topics_are_those_of_a_plain_sort():
    """Values with many ties (rounded to one decimal), warm from random distinct topics or
    cold, against sorting by (-value, topic)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        values = np.round(rng.random(int(rng.integers(8, 40))), 1)
        expected = sorted(range(values.size), key=lambda k: (-values[k], k))[:4]
        for warm in (False, True):
            ids = np.array([rng.choice(values.size, 4, replace=False)], np.int16)
            weights = np.zeros((1, 4), np.float32)
            _keep_largest(values, ids, weights, 0, np.empty(4), np.empty(4, np.int64),
                          np.empty(values.size, np.int64), warm)
            assert ids[0].tolist() == expected
