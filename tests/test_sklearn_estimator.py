"""The scikit-learn estimator (issue 16): scikit-learn's own estimator checks, and the same
topics as the streaming model it wraps."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from streamtopics import StreamingTopicModel
from streamtopics.integrations.sklearn import StreamingTopicsEstimator

from test_labels import texts

# Checks that do not apply, with the reason (passed to parametrize_with_checks, so each is
# reported as an expected failure rather than hidden). Every other check applies and passes.
# check_array_api_input skips itself unless SCIPY_ARRAY_API is set: the estimator converts X to
# numpy / scipy.sparse (the engine's kernels are numba over numpy), as scikit-learn's own
# LatentDirichletAllocation does.
NOT_APPLICABLE: dict[str, str] = {}

# The checks run on matrices of 2 to 5 features: at the defaults (n_components=10) every fit gets
# one topic per feature, with a warning; n_components=2 also checks fits with fewer topics than words.
CHECKED = [StreamingTopicsEstimator(), StreamingTopicsEstimator(n_components=2)]


with warnings.catch_warnings():  # by design: scikit-learn stays an optional extra (module docstring)
    warnings.filterwarnings("ignore", message="Estimator StreamingTopicsEstimator does not inherit from")
    ALL_CHECKS = parametrize_with_checks(CHECKED, expected_failed_checks=lambda estimator: NOT_APPLICABLE)


@ALL_CHECKS
@pytest.mark.filterwarnings("ignore:n_components=10 is greater than n_features")
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_the_module_does_not_import_scikit_learn():
    code = "import sys, streamtopics.integrations.sklearn; assert 'sklearn' not in sys.modules, 'sklearn imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def corpus():
    vectorizer = CountVectorizer()
    X = vectorizer.fit_transform([text for _, text in texts(600)])
    return X, list(vectorizer.get_feature_names_out())


def test_fit_gives_the_streaming_models_topics(corpus):
    X, words = corpus
    estimator = StreamingTopicsEstimator(n_components=3, vocabulary=words, anchor_min_df=5, refine_iterations=5,
                                         reservoir_size=200, random_state=1).fit(X)
    model = StreamingTopicModel(3, vocabulary=words, anchor_min_df=5, refine_iterations=5, reservoir_size=200, seed=1)
    model.learn_many(X)
    snapshot = model.refresh()
    np.testing.assert_array_equal(estimator.components_, snapshot.topic_word.T)
    assert estimator.components_.shape == (3, len(words)) and estimator.n_features_in_ == len(words)
    np.testing.assert_allclose(estimator.components_.sum(axis=1), 1.0)
    np.testing.assert_array_equal(estimator.transform(X), model.infer(X))
    np.testing.assert_array_equal(estimator.transform(X.toarray()), model.infer(X))  # dense counts alike
    assert list(estimator.get_feature_names_out()) == [f"topic_{t}" for t in snapshot.topic_ids]
    assert set(estimator.model_.topic_info()["label"]) == set(snapshot.labels)


def test_partial_fit_learns_in_mini_batches_and_keeps_topic_ids(corpus):
    X, words = corpus
    whole = StreamingTopicsEstimator(n_components=3, vocabulary=words, anchor_min_df=5, refine_iterations=0).fit(X)
    batches = StreamingTopicsEstimator(n_components=3, vocabulary=words, anchor_min_df=5, refine_iterations=0)
    for start in range(0, X.shape[0], 200):
        batches.partial_fit(X[start:start + 200])
        ids = list(batches.topic_ids_)
    assert sorted(ids) == [0, 1, 2] and batches.model_.snapshot.version == 3  # no new id: the same three topics
    # the sums are exact: the last mini-batch's topics are the one-pass fit's
    np.testing.assert_allclose(batches.components_, whole.components_, atol=1e-9)
    with pytest.raises(ValueError, match="X has 5 features, but StreamingTopicsEstimator is expecting"):
        batches.partial_fit(sp.csr_matrix(np.ones((3, 5))))


def test_parameters_clone_and_pipeline(corpus):
    estimator = StreamingTopicsEstimator(n_components=3, anchor_min_df=5, refine_iterations=0)
    assert estimator.get_params() == {"anchor_min_df": 5, "background_topic": True, "n_components": 3,
                                      "random_state": None, "refine_iterations": 0, "reservoir_size": "auto",  # the model's default
                                      "vocabulary": None}
    assert estimator.set_params(n_components=4) is estimator and clone(estimator).n_components == 4
    assert repr(estimator) == "StreamingTopicsEstimator(anchor_min_df=5, n_components=4, refine_iterations=0)"
    with pytest.raises(ValueError, match="invalid parameter 'topics'"):
        estimator.set_params(topics=3)
    pipeline = make_pipeline(CountVectorizer(), StreamingTopicsEstimator(n_components=3, anchor_min_df=5,
                                                                          refine_iterations=0))
    mixtures = pipeline.fit_transform([text for _, text in texts(300)])
    assert mixtures.shape == (300, 3)
    np.testing.assert_allclose(mixtures.sum(axis=1), 1.0)


def test_more_topics_than_words_fits_one_topic_per_word_with_a_warning():
    X = np.array([[3, 1, 0], [0, 2, 3], [1, 0, 2]] * 10)
    with pytest.warns(UserWarning, match="n_components=10 is greater than n_features=3: each topic needs an anchor"):
        estimator = StreamingTopicsEstimator().fit(X)
    assert estimator.n_components == 10 and estimator.n_components_ == 3  # the parameter stays as given
    assert estimator.components_.shape == (3, 3) and estimator.transform(X).shape == (30, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StreamingTopicsEstimator(n_components=3).fit(X).n_components_ == 3


def test_bad_input_is_refused_with_one_clear_line():
    estimator = StreamingTopicsEstimator(n_components=3)
    with pytest.raises(ValueError, match="n_components must be a positive int, got 0"):
        StreamingTopicsEstimator(n_components=0).fit(np.ones((5, 2)))
    with pytest.raises(ValueError, match="Negative values"):
        estimator.fit(-np.ones((5, 4)))
    with pytest.raises(ValueError, match="vocabulary has 2 words, X has 4 feature"):
        StreamingTopicsEstimator(n_components=3, vocabulary=["a", "b"]).fit(np.ones((5, 4)))
    with pytest.raises(ValueError, match="no document of X"):
        estimator.fit(np.full((5, 4), 0.1))
