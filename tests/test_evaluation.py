import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics.evaluation import (
    _pair_counts,
    coherence_npmi,
    coherence_umass,
    heldout_log_likelihood,
    match_topics,
    matched_l1,
    matched_l1_per_topic,
    top_word_ids,
    top_words,
    topic_uniqueness,
)
from streamtopics.synthetic import sample_documents, separable_topics, topic_proportions


def fit_mixtures(topic_word, iterations=100):
    """An infer_fn: per-document KL fit of the mixture by multiplicative updates (docs/design.md, "Inference")."""
    def infer(observed):
        f = observed.toarray()
        theta = np.full((f.shape[0], topic_word.shape[1]), 1.0 / topic_word.shape[1])
        for _ in range(iterations):
            p = np.maximum(theta @ topic_word.T, 1e-300)
            theta *= (f / p) @ topic_word
            theta /= np.maximum(theta.sum(axis=1, keepdims=True), 1e-300)
        return np.where(f.sum(axis=1, keepdims=True) > 0, theta, 1.0 / topic_word.shape[1])
    return infer


# --- matching and L1 error -----------------------------------------------------------------------


def test_matching_undoes_a_permutation():
    a = separable_topics(40, 6, seed=1).topic_word
    perm = np.random.default_rng(0).permutation(6)
    true_ids, est_ids = match_topics(a, a[:, perm])
    np.testing.assert_array_equal(true_ids, np.arange(6))
    np.testing.assert_array_equal(perm[est_ids], np.arange(6))
    assert matched_l1(a, a[:, perm]) == 0.0


def test_matched_l1_of_a_known_perturbation():
    a = np.array([[0.5, 0.1, 0.2], [0.3, 0.6, 0.2], [0.2, 0.3, 0.6]])
    b = a.copy()
    b[:, 1] = [0.2, 0.5, 0.3]  # moves 0.1 of topic 1's mass: L1 = 0.2
    b = b[:, [2, 0, 1]]
    np.testing.assert_allclose(matched_l1_per_topic(a, b), [0.0, 0.2, 0.0])
    assert matched_l1(a, b) == pytest.approx(0.2 / 3)


def test_matched_l1_with_a_different_number_of_topics():
    a = np.eye(4)
    np.testing.assert_allclose(matched_l1_per_topic(a, a[:, [3, 1]]), [2.0, 0.0, 2.0, 0.0])
    extra = np.hstack([a, np.full((4, 2), 0.25)])
    assert matched_l1(a, extra) == 0.0


# --- held-out likelihood -------------------------------------------------------------------------


def test_heldout_split_and_true_model_beats_a_random_one():
    model = separable_topics(60, 4, anchors_per_topic=2, anchor_mass=0.3, concentration=0.2,
                             seed=2)
    docs = sample_documents(model.topic_word, topic_proportions(300, 4, alpha=0.1, seed=3),
                            60, seed=4)
    seen = []

    def recording(infer):
        def infer_and_record(observed):
            seen.append(observed)
            return infer(observed)
        return infer_and_record

    truth = heldout_log_likelihood(model.topic_word, docs,
                                   recording(fit_mixtures(model.topic_word)), seed=5)
    observed = seen[0]
    np.testing.assert_array_equal(observed.sum(axis=1).A1, 30)
    assert np.all((docs - observed).toarray() >= 0)

    random_topics = np.random.default_rng(6).dirichlet(np.full(60, 0.5), size=4).T
    baseline = heldout_log_likelihood(random_topics, docs, fit_mixtures(random_topics), seed=5)
    uniform = -np.log(60)
    assert truth > baseline + 0.3
    assert truth > uniform
    assert heldout_log_likelihood(model.topic_word, docs, fit_mixtures(model.topic_word),
                                  seed=5) == truth


def test_heldout_split_is_exact_for_odd_lengths():
    docs = sp.csr_matrix(np.array([[3.0, 2.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    seen = []

    def uniform(observed):
        seen.append(observed)
        return np.ones((3, 1))

    ll = heldout_log_likelihood(np.full((3, 1), 1 / 3), docs, uniform, seed=0)
    assert ll == pytest.approx(-np.log(3))
    np.testing.assert_array_equal(seen[0].sum(axis=1).A1, [2, 0, 0])


def test_heldout_smoothing_keeps_zero_probabilities_finite():
    topics = np.array([[1.0], [0.0]])
    docs = sp.csr_matrix(np.array([[2.0, 2.0]]))
    ll = heldout_log_likelihood(topics, docs, lambda observed: np.ones((1, 1)),
                                observed_fraction=0.0, smoothing=1e-6)
    expected = (2 * np.log(1 - 1e-6 + 0.5e-6) + 2 * np.log(0.5e-6)) / 4
    assert ll == pytest.approx(expected)


def test_heldout_rejects_fractional_counts():
    with pytest.raises(ValueError):
        heldout_log_likelihood(np.eye(2), sp.csr_matrix([[0.5, 1.0]]), lambda o: np.ones((1, 2)))


# --- coherence -----------------------------------------------------------------------------------

# six documents over words 0..3: 0 and 1 always occur together, 2 never with 0 or 1
REFERENCE = sp.csr_matrix(np.array([
    [1, 1, 0, 1],
    [2, 1, 0, 0],
    [1, 3, 0, 0],
    [0, 0, 1, 1],
    [0, 0, 1, 1],
    [0, 0, 0, 0],
], dtype=float))


def topic_over(*words, n_words=4):
    column = np.zeros(n_words)
    column[list(words)] = np.linspace(0.5, 0.4, len(words))
    return (column / column.sum())[:, None]


def test_npmi_extremes():
    assert coherence_npmi(topic_over(0, 1), REFERENCE, top_n=2)[0] == pytest.approx(1.0)
    assert coherence_npmi(topic_over(0, 2), REFERENCE, top_n=2)[0] == -1.0
    docs = sp.csr_matrix(np.array([[1, 1], [1, 0], [0, 1], [0, 0]], dtype=float))
    assert coherence_npmi(topic_over(0, 1, n_words=2), docs, top_n=2)[0] == pytest.approx(0.0)
    everywhere = sp.csr_matrix(np.ones((3, 2)))
    assert coherence_npmi(topic_over(0, 1, n_words=2), everywhere, top_n=2)[0] == 1.0


def test_npmi_is_per_topic_mean_over_pairs():
    topics = np.hstack([topic_over(0, 1, 2), topic_over(0, 1)])
    scores = coherence_npmi(topics, REFERENCE, top_n=3)
    # topic 0: pairs (0,1) -> 1, (0,2) -> -1, (1,2) -> -1; topic 1's 3rd word is a tie-broken 2
    np.testing.assert_allclose(scores, [-1 / 3, -1 / 3])


def test_umass_by_hand():
    # D(0) = 3, D(0, 1) = 3, D(0, 3) = 1, D(1) = 3, D(1, 3) = 1; order of probability 0, 1, 3
    score = coherence_umass(topic_over(0, 1, 3), REFERENCE, top_n=3, epsilon=0.01)
    expected = np.log(3.01 / 3) + np.log(1.01 / 3) + np.log(1.01 / 3)
    np.testing.assert_allclose(score, [expected])
    assert coherence_umass(topic_over(0, 1), REFERENCE, top_n=2) > coherence_umass(
        topic_over(0, 2), REFERENCE, top_n=2)


# --- uniqueness and top words --------------------------------------------------------------------


def test_topic_uniqueness():
    assert topic_uniqueness(np.eye(5)[:, :3], top_n=1) == 1.0
    identical = np.tile(np.array([[0.4], [0.3], [0.2], [0.1]]), (1, 4))
    assert topic_uniqueness(identical, top_n=2) == pytest.approx(1 / 4)
    # two topics share one of their two top words: (1 + 1/2 + 1/2 + 1) / 4
    a = np.array([[0.6, 0.0], [0.4, 0.4], [0.0, 0.6]])
    assert topic_uniqueness(a, top_n=2) == pytest.approx(0.75)


def test_top_words_in_order_of_probability():
    a = np.array([[0.1, 0.5], [0.6, 0.2], [0.3, 0.3]])
    np.testing.assert_array_equal(top_word_ids(a, 2), [[1, 2], [0, 2]])
    assert top_words(a, ["x", "y", "z"], 3) == [["y", "z", "x"], ["x", "z", "y"]]


def test_pair_counts_match_a_dense_count_of_documents_holding_both_words():
    rng = np.random.default_rng(7)
    dense = rng.poisson(0.3, size=(300, 50)).astype(float)
    dense[rng.random(dense.shape) < 0.1] = 0.0
    reference = sp.csr_matrix(dense)
    reference.data[::7] = 0.0  # explicit zeros are absent words
    present = reference.toarray() != 0
    topics = rng.dirichlet(np.full(50, 0.2), 4).T
    df, co_df, n_docs = _pair_counts(topics, reference, top_n=6)
    ids = top_word_ids(topics, 6)
    assert n_docs == 300
    for k in range(4):
        for a in range(6):
            assert df[k, a] == present[:, ids[k, a]].sum()
            for b in range(6):
                assert co_df[k, a, b] == (present[:, ids[k, a]] & present[:, ids[k, b]]).sum()
