import gzip
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics.swimmer import (
    swimmer_corpus,
    swimmer_corpus_distributions,
    swimmer_images,
    swimmer_limb_topics,
    swimmer_proportions,
)
from streamtopics.synthetic import (
    dirichlet_topic_covariance,
    load_uci_bow,
    population_cooccurrence,
    sample_documents,
    semi_synthetic,
    separable_topics,
    topic_proportions,
)

KOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci-kos"  # ../shared beside the checkout


def assert_canonical_counts(documents, shape):
    assert sp.isspmatrix_csr(documents)
    assert documents.shape == shape
    assert documents.dtype == np.float64
    assert documents.has_canonical_format
    assert np.all(documents.data > 0)
    assert np.all(documents.data == np.round(documents.data))


def cooccurrence_average(documents):
    """Mean over documents of (H H^T - diag H) / (n (n - 1)), computed densely (docs/design.md,
    "Co-occurrence sums")."""
    h = documents.toarray()
    n = h.sum(axis=1)
    h, n = h[n >= 2], n[n >= 2]
    scaled = h / (n * (n - 1))[:, None]
    return (scaled.T @ h - np.diag(scaled.sum(axis=0))) / len(h)


# --- separable topics ----------------------------------------------------------------------------


@pytest.mark.parametrize("anchor_mass", [None, 0.2])
def test_separable_topics_are_distributions_with_anchors_in_one_topic(anchor_mass):
    model = separable_topics(200, 6, anchors_per_topic=3, anchor_mass=anchor_mass, seed=3)
    a = model.topic_word
    assert a.shape == (200, 6) and np.all(a >= 0)
    np.testing.assert_allclose(a.sum(axis=0), 1.0)
    assert model.anchors.shape == (6, 3)
    assert len(np.unique(model.anchors)) == 18
    for k, anchors in enumerate(model.anchors):
        assert np.all(a[anchors, k] > 0)
        assert np.all(np.delete(a[anchors], k, axis=1) == 0)
    non_anchors = np.setdiff1d(np.arange(200), model.anchors)
    assert np.all((a[non_anchors] > 0).sum(axis=1) > 1)
    if anchor_mass is not None:
        np.testing.assert_allclose(a[model.anchors, np.arange(6)[:, None]].sum(axis=1), 0.2)


def test_separable_topics_reproducible_and_validated():
    first, again = separable_topics(100, 4, seed=7), separable_topics(100, 4, seed=7)
    np.testing.assert_array_equal(first.topic_word, again.topic_word)
    np.testing.assert_array_equal(first.anchors, again.anchors)
    assert not np.array_equal(first.topic_word, separable_topics(100, 4, seed=8).topic_word)
    with pytest.raises(ValueError):
        separable_topics(10, 5, anchors_per_topic=2)
    with pytest.raises(ValueError):
        separable_topics(100, 4, anchor_mass=1.0)


# --- topic proportions ---------------------------------------------------------------------------


def test_dirichlet_proportions_have_dirichlet_mean():
    alpha = np.array([0.2, 0.5, 1.3])
    w = topic_proportions(20000, 3, alpha=alpha, seed=1)
    assert w.shape == (20000, 3)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w.mean(axis=0), alpha / alpha.sum(), atol=0.01)


def test_logistic_normal_has_block_covariance():
    k, rho = 4, 0.8
    w = topic_proportions(40000, k, kind="logistic_normal", correlation=rho, n_blocks=2, seed=2)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    # centred log-ratios clr(w) = C eta with C = I - 1/K, so their covariance is C Sigma C.
    sigma = np.array([[1, rho, 0, 0], [rho, 1, 0, 0], [0, 0, 1, rho], [0, 0, rho, 1]])
    centre = np.eye(k) - 1.0 / k
    clr = np.log(w) - np.log(w).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.cov(clr.T), centre @ sigma @ centre, atol=0.03)


def test_unknown_proportion_kind_is_rejected():
    with pytest.raises(ValueError):
        topic_proportions(5, 3, kind="uniform")


# --- sampling ------------------------------------------------------------------------------------


def test_documents_have_requested_lengths_and_canonical_format():
    model = separable_topics(50, 4, seed=0)
    w = topic_proportions(30, 4, seed=0)
    fixed = sample_documents(model.topic_word, w, 25, seed=0)
    assert_canonical_counts(fixed, (30, 50))
    np.testing.assert_array_equal(fixed.sum(axis=1).A1, 25)
    lengths = np.arange(30) % 7
    varied = sample_documents(model.topic_word, w, lengths, seed=0)
    assert_canonical_counts(varied, (30, 50))
    np.testing.assert_array_equal(varied.sum(axis=1).A1, lengths)


def test_poisson_lengths():
    model = separable_topics(50, 4, seed=0)
    docs = sample_documents(model.topic_word, topic_proportions(4000, 4, seed=1), 20,
                            poisson=True, seed=2)
    lengths = docs.sum(axis=1).A1
    assert abs(lengths.mean() - 20) < 0.3 and abs(lengths.var() - 20) < 2


def test_same_seed_same_corpus_different_seed_differs():
    model = separable_topics(80, 5, seed=0)
    w = topic_proportions(40, 5, seed=0)
    first = sample_documents(model.topic_word, w, 30, seed=11)
    again = sample_documents(model.topic_word, w, 30, seed=11)
    other = sample_documents(model.topic_word, w, 30, seed=12)
    assert (first != again).nnz == 0
    assert (first != other).nnz > 0


def test_tokens_follow_the_document_distributions():
    topics = np.array([[0.5, 0.0], [0.5, 0.1], [0.0, 0.9]])
    w = np.array([[1.0, 0.0], [0.0, 1.0], [0.25, 0.75]])
    docs = sample_documents(topics, np.repeat(w, 2000, axis=0), 50, seed=4).toarray()
    assert docs[:2000, 2].sum() == 0 and docs[2000:4000, 0].sum() == 0
    for d in range(3):
        frequencies = docs[2000 * d:2000 * (d + 1)].sum(axis=0) / (2000 * 50)
        np.testing.assert_allclose(frequencies, topics @ w[d], atol=0.01)


def test_semi_synthetic_is_lda_with_given_topics():
    topics = separable_topics(60, 5, seed=1).topic_word
    docs, w = semi_synthetic(topics, 100, alpha=0.05, doc_length=40, seed=3)
    assert_canonical_counts(docs, (100, 60))
    assert w.shape == (100, 5)
    np.testing.assert_array_equal(docs.sum(axis=1).A1, 40)
    assert np.mean(w.max(axis=1) > 0.9) > 0.5  # small alpha: mostly one topic per document
    again, _ = semi_synthetic(topics, 100, alpha=0.05, doc_length=40, seed=3)
    assert (docs != again).nnz == 0


# --- population co-occurrence --------------------------------------------------------------------


def test_dirichlet_topic_covariance_matches_monte_carlo():
    alpha = np.array([0.1, 0.4, 0.5])
    r = dirichlet_topic_covariance(alpha)
    assert r.sum() == pytest.approx(1.0)
    w = topic_proportions(100000, 3, alpha=alpha, seed=5)
    np.testing.assert_allclose(w.T @ w / len(w), r, atol=0.005)
    np.testing.assert_allclose(dirichlet_topic_covariance(0.3, n_topics=3),
                               dirichlet_topic_covariance(np.full(3, 0.3)))
    with pytest.raises(ValueError):
        dirichlet_topic_covariance(0.3)


def test_population_cooccurrence_is_the_mean_of_document_cooccurrences():
    model = separable_topics(20, 3, anchors_per_topic=2, anchor_mass=0.3, seed=6)
    alpha = 0.3
    q = population_cooccurrence(model.topic_word, dirichlet_topic_covariance(alpha, 3))
    assert q.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(q, q.T)
    docs = sample_documents(model.topic_word, topic_proportions(30000, 3, alpha=alpha, seed=7),
                            8, seed=8)
    q_hat = cooccurrence_average(docs)
    assert q_hat.sum() == pytest.approx(1.0)
    assert np.abs(q_hat - q).sum() < 0.03
    # the check has power: ignoring topic correlation (R = diag) is far off
    q_wrong = population_cooccurrence(model.topic_word,
                                      np.diag(np.diag(dirichlet_topic_covariance(alpha, 3))))
    assert np.abs(q_hat - q_wrong / q_wrong.sum()).sum() > 0.1


# --- real corpora --------------------------------------------------------------------------------


def test_load_uci_kos():
    docs, vocab = load_uci_bow(f"{KOS}/docword.kos.txt.gz", f"{KOS}/vocab.kos.txt.gz")
    assert_canonical_counts(docs, (3430, 6906))
    assert docs.nnz == 353160
    assert docs.sum() == 467714
    assert len(vocab) == 6906 and vocab[:2] == ["aarp", "abandon"]
    assert vocab[int(np.argmax(docs.sum(axis=0).A1))] == "bush"


def test_load_uci_plain_and_malformed(tmp_path):
    (tmp_path / "vocab.txt").write_text("a\nb\nc\n")
    (tmp_path / "docword.txt").write_text("2\n3\n3\n1 1 2\n1 3 1\n2 2 5\n")
    docs, vocab = load_uci_bow(tmp_path / "docword.txt", tmp_path / "vocab.txt")
    np.testing.assert_array_equal(docs.toarray(), [[2, 0, 1], [0, 5, 0]])
    assert vocab == ["a", "b", "c"]
    with gzip.open(tmp_path / "short.txt.gz", "wt") as f:
        f.write("2\n3\n3\n1 1 2\n1 3 1\n")
    with pytest.raises(ValueError):
        load_uci_bow(tmp_path / "short.txt.gz", tmp_path / "vocab.txt")
    (tmp_path / "vocab2.txt").write_text("a\nb\n")
    with pytest.raises(ValueError):
        load_uci_bow(tmp_path / "docword.txt", tmp_path / "vocab2.txt")


# --- swimmer -------------------------------------------------------------------------------------


def test_swimmer_images():
    images = swimmer_images()
    assert images.shape == (256, 1024)
    assert set(np.unique(images)) == {0.0, 1.0}
    assert len(np.unique(images, axis=0)) == 256
    assert len(set(images.sum(axis=1))) == 1  # every swimmer has the same number of pixels
    # the 13-dimensional hull of Ding et al.: 16 limb positions, but 256 images of rank 13
    assert np.linalg.matrix_rank(images) == 13


@pytest.mark.parametrize("background_weight", [0.0, 1.0])
def test_swimmer_topics_explain_the_images(background_weight):
    topics = swimmer_limb_topics(background_weight=background_weight)
    assert topics.shape == (1024, 16)
    np.testing.assert_allclose(topics.sum(axis=0), 1.0)
    assert np.linalg.matrix_rank(topics) == 16
    w = swimmer_proportions()
    assert w.shape == (256, 16)
    np.testing.assert_allclose(w.reshape(256, 4, 4).sum(axis=2), 0.25)
    distributions = swimmer_corpus_distributions(background_weight=background_weight)
    np.testing.assert_allclose(w @ topics.T, distributions)
    # topics are linearly independent but the co-occurrence Q = A R A^T has rank 13 only
    q = population_cooccurrence(topics, w.T @ w / 256)
    eigenvalues = np.linalg.eigvalsh(q)
    assert np.sum(eigenvalues > 1e-10 * eigenvalues.max()) == 13


def test_clean_swimmer_topics_are_separable():
    topics = swimmer_limb_topics(background_weight=0.0)
    anchors = (topics > 0).sum(axis=1) == 1
    owner = topics[anchors].argmax(axis=1)
    np.testing.assert_array_equal(np.bincount(owner, minlength=16), 7)  # 7 pixels per limb


def test_swimmer_corpus():
    corpus = swimmer_corpus(n_docs=512, seed=3)
    assert_canonical_counts(corpus, (512, 1024))
    np.testing.assert_array_equal(corpus.sum(axis=1).A1, 200)
    assert (corpus[:256] != corpus[256:]).nnz > 0  # repeated images, fresh noise
    assert (swimmer_corpus(n_docs=512, seed=3) != corpus).nnz == 0
    body = swimmer_images().astype(bool)
    counts = corpus[:256].toarray()
    per_pixel_body = counts[body].mean()
    per_pixel_background = counts[~body].mean()
    assert 9 < per_pixel_body / per_pixel_background < 11
