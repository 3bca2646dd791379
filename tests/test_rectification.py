"""Rectified anchor search (streamtopics.refresh.rectification): the alternating projections against a
reference with exact eigendecompositions, the candidates' block against the plain sums, and the
anchors it leads to on a planted truth and from the model."""

from __future__ import annotations

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.statistics.cooccurrence import DenseCooccurrence
from streamtopics.refresh.rectification import candidate_block, rectified_rows, rectify
from streamtopics.refresh.anchor_selection import select_anchors
from streamtopics.synthetic import semi_synthetic, separable_topics


def reference_rectify(block, rank, iterations):
    """Alternating projections as Lee, Bindel & Mimno (2015) write them: a full eigendecomposition
    for the rank-K PSD projection, then the sum-one and non-negative projections."""
    c = (block + block.T) / 2
    c = c / c.sum()
    n = c.shape[0]
    for _ in range(iterations):
        values, vectors = np.linalg.eigh(c)
        top = np.argsort(values)[::-1][:rank]
        c = (vectors[:, top] * np.maximum(values[top], 0)) @ vectors[:, top].T
        c = c + (1 - c.sum()) / n ** 2
        c = np.maximum(c, 0)
    return c


def noisy_cooccurrence(n_words=80, rank=5, noise=3e-5, seed=0):
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_words, 0.1), rank).T
    clean = topics @ np.diag(rng.dirichlet(np.ones(rank))) @ topics.T
    noisy = clean + rng.normal(0, noise, clean.shape)
    return clean, (noisy + noisy.T) / 2


def test_rectify_equals_alternating_projections_with_exact_eigendecompositions():
    clean, noisy = noisy_cooccurrence()
    for iterations in (1, 5, 20):
        reference = reference_rectify(noisy, 5, iterations)
        ours = rectify(noisy, 5, iterations, single=False)
        assert np.abs(ours - reference).sum() < 1e-8 * np.abs(reference).sum()
        # the default's float32 products: float32 rounding, not another iterate
        single = rectify(noisy, 5, iterations, single=True)
        assert single.dtype == np.float64 and np.abs(single - reference).sum() < 1e-5 * np.abs(reference).sum()
    assert rectify(noisy, 5, 0) is not noisy and np.allclose(rectify(noisy, 5, 0), noisy)  # 0 steps: as given
    fixed = rectify(noisy * 7.0, 5, 20)  # any scale: the iterate sums to one
    assert fixed.min() >= 0 and abs(fixed.sum() - 1) < 1e-3
    assert np.abs(fixed - clean / clean.sum()).sum() < 0.5 * np.abs(noisy / noisy.sum() - clean / clean.sum()).sum()


def test_the_candidate_block_and_its_rows_come_from_the_sums():
    truth = separable_topics(300, 6, anchor_mass=0.05, seed=2)
    docs, _ = semi_synthetic(truth.topic_word, 400, alpha=0.1, doc_length=60, seed=3)
    model = StreamingTopicModel(6, vocabulary=[f"w{i}" for i in range(300)])
    model.learn_many(docs)
    counts = docs.toarray().astype(float)
    lengths = counts.sum(axis=1)
    q = sum((np.outer(d, d) - np.diag(d)) / (n * (n - 1)) for d, n in zip(counts, lengths) if n >= 2)
    ids = np.array([3, 17, 42, 299, 0])
    assert np.allclose(candidate_block(model.statistics(), ids, chunk=2), q[np.ix_(ids, ids)], rtol=1e-12, atol=1e-15)
    # read from the packed triangle, the block is the full rows' cells bit for bit, in any order of ids
    stats = model.statistics()
    for order in (ids, np.sort(ids), ids[::-1]):
        assert np.array_equal(candidate_block(stats, order), stats.rows(order)[:, order])
    rows = rectified_rows(DenseCooccurrence(q), ids, 3, 4)
    expected = reference_rectify(q[np.ix_(ids, ids)], 3, 4)
    assert np.allclose(rows, expected / expected.sum(axis=1, keepdims=True), atol=1e-9)


def test_rectified_search_finds_one_planted_anchor_per_topic():
    n_words, k = 1000, 20
    truth = separable_topics(n_words, k, anchor_mass=0.05, seed=11)
    owner = {int(a): t for t in range(k) for a in truth.anchors[t]}
    docs, _ = semi_synthetic(truth.topic_word, 2000, alpha=0.1, doc_length=100, seed=0)
    model = StreamingTopicModel(k, vocabulary=[f"w{i}" for i in range(n_words)])
    model.learn_many(docs)
    anchors = select_anchors(model.statistics(), k, model.min_document_frequency(), model.anchor_candidate_limit(),
                             rectify=5)
    assert sorted(owner.get(int(a), -1) for a in anchors) == list(range(k))


def test_the_model_searches_rectified_rows_unless_told_not_to(monkeypatch):
    import streamtopics.refresh.anchor_selection as refresh

    truth = separable_topics(400, 8, anchor_mass=0.05, seed=5)
    docs, _ = semi_synthetic(truth.topic_word, 1500, alpha=0.1, doc_length=80, seed=1)
    words = [f"w{i}" for i in range(400)]
    calls = []
    monkeypatch.setattr(refresh, "rectified_rows", lambda view, ids, rank, steps, seed: calls.append(steps)
                        or rectified_rows(view, ids, rank, steps, seed))
    for steps in (5, 0):
        model = StreamingTopicModel(8, vocabulary=words, anchor_rectification=steps, refine_iterations=0)
        model.learn_many(docs)
        view = model.statistics()
        expected = select_anchors(view, 8, model.min_document_frequency(), model.anchor_candidate_limit(),
                                  model.projection_dim, model.anchor_cleanup, model.seed, rectify=steps)
        assert model.refresh().anchors == [words[i] for i in expected]
    assert calls == [5, 5]  # the reference's and the model's with 5 steps; none with 0
    assert StreamingTopicModel(8).get_config()["anchor_rectification"] == 5


def test_a_rectified_block_of_fewer_than_k_directions_gives_the_raw_rows_search():
    """Where the block's largest eigenvalues are mostly negative (a strongly negative diagonal, as
    the diagonal correction of short documents gives), its rank-K PSD part keeps fewer than K
    directions: the rectified rows cannot tell K anchors apart, and the search runs over the raw
    rows, as with ``rectify=0`` (before, the missing anchors were picked along rounding: V =
    15,000, K = 100, 70-96 distinct anchors of 100)."""
    rng = np.random.default_rng(0)
    n_words, rank, k = 80, 4, 8
    topics = rng.dirichlet(np.ones(n_words), rank).T
    clean = topics @ np.diag(rng.dirichlet(np.ones(rank))) @ topics.T
    noise = rng.normal(0, 1e-6, clean.shape)
    view = DenseCooccurrence(clean + (noise + noise.T) / 2 - np.diag(np.full(n_words, 1e-4)))
    rows = rectified_rows(view, np.arange(n_words), k, 5)
    singular = np.linalg.svd(rows, compute_uv=False)
    assert singular[k - 1] < 1e-6 * singular[0]  # the rectified rows span fewer than k directions
    rectified = select_anchors(view, k, 0, None, rectify=5)
    assert np.array_equal(rectified, select_anchors(view, k, 0, None, rectify=0))
    assert len(set(rectified.tolist())) == k


def test_after_a_fallback_the_search_takes_the_raw_rows_until_the_stream_doubles(monkeypatch, tmp_path):
    """A rectified block that keeps fewer than K directions (here every rectified row the same)
    sends the search to the raw rows; the refreshes after it skip the rectification until the
    documents seen have doubled (or 8 refreshes have skipped it), then try again, with the anchors
    of the raw rows' search each time; the schedule survives a checkpoint. A stream whose block
    rectifies rectifies every refresh."""
    import streamtopics.refresh.anchor_selection as refresh
    from streamtopics.refresh import rectification

    truth = separable_topics(400, 8, anchor_mass=0.05, seed=5)
    docs, _ = semi_synthetic(truth.topic_word, 2400, alpha=0.1, doc_length=80, seed=1)
    words = [f"w{i}" for i in range(400)]
    tried = []

    def flat_rows(view, ids, rank, steps, seed):  # a block of one direction: fewer than K
        tried.append(view.n_docs)
        return np.ones((ids.size, ids.size)) / ids.size

    monkeypatch.setattr(refresh, "rectified_rows", flat_rows)
    model = StreamingTopicModel(8, vocabulary=words, refine_iterations=0)
    for start in range(0, 1500, 300):
        model.learn_many(docs[start:start + 300])
        view = model.statistics()
        raw = select_anchors(view, 8, model.min_document_frequency(), model.anchor_candidate_limit(),
                             model.projection_dim, model.anchor_cleanup, model.seed, rectify=0)
        assert model.refresh().anchors == [words[i] for i in raw]
    assert tried == [300, 600, 1200]  # then not before 2,400
    model.save(tmp_path / "model.st")
    resumed = StreamingTopicModel.load(tmp_path / "model.st")
    for each in (model, resumed):
        each.learn_many(docs[1500:2300])
        each.refresh()
    assert tried == [300, 600, 1200]
    for each in (model, resumed):
        each.learn_many(docs[2300:])
        each.refresh()
    assert tried == [300, 600, 1200, 2400, 2400]

    # a stream that no longer doubles (a window, forgetting, a long run) tries again after 8 skipped refreshes
    monkeypatch.setattr(rectification, "RETRY_GROWTH", 1e9)
    tried.clear()
    for _ in range(2 * (rectification.RETRY_REFRESHES + 1)):
        model.learn_many(docs[:10])
        model.refresh()
    assert len(tried) == 2

    monkeypatch.setattr(refresh, "rectified_rows", lambda view, ids, rank, steps, seed: tried.append(-1)
                        or rectified_rows(view, ids, rank, steps, seed))
    tried.clear()
    model = StreamingTopicModel(8, vocabulary=words, refine_iterations=0)
    for start in range(0, 1200, 300):
        model.learn_many(docs[start:start + 300])
        model.refresh()
    assert tried == [-1] * 4
