"""Sketched co-occurrence statistics (large-vocabulary mode, issue 17): the sketch against a plain
numpy reference written here, its exactness properties (order, batching, merge, resume,
forgetting, window, open vocabulary) and the low-rank view it gives the refresh."""

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel
from streamtopics.config import SKETCH_ABOVE_WORDS, ModelConfig
from streamtopics.statistics.cooccurrence import CooccurrenceStats
from streamtopics.text.documents import DocumentBatch
from streamtopics.evaluation import matched_l1
from streamtopics.refresh.anchors import random_projection
from streamtopics.statistics import sketch as sketch_module
from streamtopics.statistics import sketch_view
from streamtopics.statistics.sketch import SketchedCooccurrence, gaussian_rows
from streamtopics.statistics.sketch_view import LowRankView, low_rank
from streamtopics.synthetic import separable_topics, semi_synthetic

V, S, R, SEED = 300, 24, 8, 5


def documents(n_docs, seed, n_words=V, length=40):
    """Counts (csr) with a Zipf-like vocabulary, a few one-token documents among them."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_words + 1)
    p /= p.sum()
    lengths = rng.integers(2, length, n_docs)
    lengths[::17] = 1  # carries no pair: ignored by the sums
    rows = [np.bincount(rng.choice(n_words, size=n, p=p), minlength=n_words) for n in lengths]
    return sp.csr_matrix(np.array(rows, dtype=np.float64))


def reference(docs, weights=None):
    """P = sum_d w_d H_d H_d^T / (n (n - 1)), c, diag(Q) and word mass, with plain numpy."""
    h = docs.toarray()
    n = h.sum(axis=1)
    keep = n >= 2
    h, n = h[keep], n[keep]
    w = np.ones(len(n)) if weights is None else np.asarray(weights)[keep]
    f = w / (n * (n - 1))
    p = (h * f[:, None]).T @ h
    c = (h * f[:, None]).sum(axis=0)
    return p, c, np.diag(p) - c, (h * (w / n)[:, None]).sum(axis=0)


def rounded_test_matrix(n_words=V, generations=None):
    """The sketch's test matrix as defined: the Gaussian rows rounded to float32, as float64."""
    return gaussian_rows(SEED, n_words, S, generations).astype(np.float32).astype(np.float64)


def sketch_of(docs, batch_size=None, **options):
    stats = SketchedCooccurrence(docs.shape[1], S, R, seed=SEED, **options)
    batch = DocumentBatch.from_csr(docs)
    step = batch_size or len(batch)
    for start in range(0, len(batch), step):
        stats.update(batch.select(np.arange(start, min(start + step, len(batch)))))
    return stats


def test_sketch_is_p_times_the_test_matrix():
    docs = documents(400, seed=1)
    stats = sketch_of(docs, batch_size=64)
    p, c, diagonal, mass = reference(docs)
    omega = rounded_test_matrix()
    assert omega.shape == (V, S) and abs(omega.std() - 1.0) < 0.05  # standard Gaussian entries
    np.testing.assert_allclose(stats.sketch, p @ omega, rtol=1e-12, atol=1e-12 * np.abs(p @ omega).max())
    np.testing.assert_allclose(stats.linear, c, rtol=1e-12)
    np.testing.assert_allclose(stats.diagonal, diagonal, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stats.word_mass, mass, rtol=1e-12)
    exact = CooccurrenceStats(V)
    exact.update(DocumentBatch.from_csr(docs))
    q = exact.to_dense()
    # the sketch of Q_sum itself follows exactly: Y - diag(c) Omega = Q_sum Omega
    np.testing.assert_allclose(stats.sketch - c[:, None] * omega, q @ omega, atol=1e-11 * np.abs(q @ omega).max())
    np.testing.assert_array_equal(stats.document_frequency, exact.document_frequency)
    assert stats.n_docs == exact.n_docs


def test_test_matrix_rows_depend_only_on_seed_word_and_generation():
    full = gaussian_rows(3, 50, 7)
    np.testing.assert_array_equal(gaussian_rows(3, 80, 7)[:50], full)  # growing keeps the old rows
    np.testing.assert_array_equal(gaussian_rows(3, 50, 7, words=[9, 2]), full[[9, 2]])
    generations = np.zeros(50, np.int64)
    generations[4] = 1
    other = gaussian_rows(3, 50, 7, generations)
    assert not np.allclose(other[4], full[4]) and np.array_equal(np.delete(other, 4, 0), np.delete(full, 4, 0))
    assert not np.allclose(gaussian_rows(4, 50, 7), full)


def test_test_matrix_is_held_in_float32_and_rounds_the_gaussians():
    stats = sketch_of(documents(50, seed=9))
    assert stats.omega.dtype == np.float32 and stats.state_dict()["sketch_omega_dtype"] == "float32"
    np.testing.assert_array_equal(stats.omega, gaussian_rows(SEED, V, S).astype(np.float32))
    np.testing.assert_array_equal(gaussian_rows(SEED, V, S, dtype=np.float32), stats.omega)


def test_a_state_saved_before_float32_keeps_its_float64_test_matrix(monkeypatch):
    docs = documents(300, seed=10)
    monkeypatch.setattr(sketch_module, "OMEGA_DTYPE", np.float64)  # how states were made before
    old = sketch_of(docs[:130])
    whole = sketch_of(docs)
    monkeypatch.undo()
    state = {k: np.array(v) for k, v in old.state_dict().items() if k != "sketch_omega_dtype"}
    resumed = SketchedCooccurrence.from_state_dict(state)
    assert resumed.omega.dtype == np.float64
    resumed.update(DocumentBatch.from_csr(docs[130:]))
    np.testing.assert_array_equal(resumed.sketch, whole.sketch)
    p, *_ = reference(docs)
    expected = p @ gaussian_rows(SEED, V, S)
    np.testing.assert_allclose(resumed.sketch, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    with pytest.raises(ValueError, match="different test matrices"):
        resumed.merge(sketch_of(docs[130:]))  # a float32 sketch of the rest


def test_batching_changes_nothing_and_order_only_rounding():
    docs = documents(300, seed=2)
    whole = sketch_of(docs)
    for batch_size in (1, 7, 128):
        np.testing.assert_array_equal(sketch_of(docs, batch_size=batch_size).sketch, whole.sketch)
    shuffled = sketch_of(docs[np.random.default_rng(0).permutation(docs.shape[0])], batch_size=50)
    np.testing.assert_allclose(shuffled.sketch, whole.sketch, rtol=1e-12, atol=1e-13 * np.abs(whole.sketch).max())
    np.testing.assert_allclose(shuffled.word_mass, whole.word_mass, rtol=1e-12)


def test_merge_of_disjoint_halves_is_the_whole_and_refuses_other_test_matrices():
    docs = documents(300, seed=3)
    whole = sketch_of(docs)
    merged = sketch_of(docs[:120]).merge(sketch_of(docs[120:]))
    np.testing.assert_allclose(merged.sketch, whole.sketch, rtol=1e-12, atol=1e-13 * np.abs(whole.sketch).max())
    np.testing.assert_array_equal(merged.document_frequency, whole.document_frequency)
    assert merged.n_docs == whole.n_docs
    with pytest.raises(ValueError, match="different test matrices"):
        sketch_of(docs).merge(SketchedCooccurrence(V, S, R, seed=SEED + 1))
    with pytest.raises(ValueError, match="different test matrices"):
        sketch_of(docs).merge(SketchedCooccurrence(V, S + 2, R, seed=SEED))
    with pytest.raises(ValueError, match="exact co-occurrence sums into a sketch"):
        sketch_of(docs).merge(CooccurrenceStats(V))


def test_state_dict_resumes_exactly():
    docs = documents(300, seed=4)
    first = sketch_of(docs[:130])
    resumed = SketchedCooccurrence.from_state_dict({k: np.array(v) for k, v in first.state_dict().items()})
    assert "omega" not in first.state_dict()  # the test matrix is regenerated, never saved
    resumed.update(DocumentBatch.from_csr(docs[130:]))
    first.update(DocumentBatch.from_csr(docs[130:]))
    np.testing.assert_array_equal(resumed.sketch, first.sketch)
    np.testing.assert_array_equal(resumed.sketch, sketch_of(docs).sketch)


def test_forgetting_matches_decayed_reference():
    docs = documents(400, seed=5)
    half_life = 60.0
    stats = sketch_of(docs, batch_size=33, half_life=half_life)
    stats.settle()
    kept = np.flatnonzero(np.asarray(docs.sum(axis=1)).ravel() >= 2)
    weights = np.zeros(docs.shape[0])
    times = np.arange(1, kept.size + 1)  # arrival index among the documents that count
    weights[kept] = 2.0 ** (-(times[-1] - times) / half_life)
    p, c, diagonal, mass = reference(docs, weights)
    omega = rounded_test_matrix()
    np.testing.assert_allclose(stats.sketch, p @ omega, rtol=1e-9, atol=1e-11 * np.abs(p @ omega).max())
    np.testing.assert_allclose(stats.diagonal, diagonal, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(stats.word_mass, mass, rtol=1e-9)
    np.testing.assert_allclose(stats.effective_documents, weights.sum(), rtol=1e-9)


def test_window_keeps_only_the_last_documents():
    docs = documents(500, seed=6, length=30)
    docs = docs[np.flatnonzero(np.asarray(docs.sum(axis=1)).ravel() >= 2)]
    words = [f"w{i}" for i in range(V)]
    model = StreamingTopicModel(4, vocabulary=words, cooccurrence="sketch", sketch_size=S, sketch_rank=R,
                                seed=SEED, window=150, batch_size=40, refine_iterations=0)
    model.learn_many(docs)
    stats = model.statistics()
    p, *_ = reference(docs[-150:])
    expected = p @ rounded_test_matrix()
    np.testing.assert_allclose(stats.sketch, expected, atol=1e-10 * np.abs(expected).max())
    assert model.ingest.statistics.refresh_view(model.config).n_docs == 150


def test_open_vocabulary_growth_and_retirement():
    docs = documents(200, seed=7, n_words=V + 20)
    before, after = docs[:100].tolil(), docs[100:]
    before[:, V:] = 0
    before = before.tocsr()
    stats = SketchedCooccurrence(V, S, R, seed=SEED)
    stats.update(DocumentBatch.from_csr(before[:, :V]))
    stats.grow(V + 20)
    stats.update(DocumentBatch.from_csr(after))
    p_before, *_ = reference(before)
    p_after, *_ = reference(after)
    omega = rounded_test_matrix(V + 20)
    expected = (p_before + p_after) @ omega
    np.testing.assert_allclose(stats.sketch, expected, atol=1e-11 * np.abs(expected).max())
    # retirement: the slot's row restarts from zero with a new test row; the old word's column
    # stays in the other rows along its old test row (not recoverable from the sketch)
    word = 7
    stats.clear_word(word)
    assert not stats.sketch[word].any() and stats.word_mass[word] == 0 and stats.generations[word] == 1
    later = documents(100, seed=8, n_words=V + 20)
    stats.update(DocumentBatch.from_csr(later))
    p_later, *_ = reference(later)
    new_omega = rounded_test_matrix(V + 20, stats.generations)
    assert not np.allclose(new_omega[word], omega[word])
    expected = (p_before + p_after) @ omega + p_later @ new_omega
    expected[word] = p_later[word] @ new_omega
    np.testing.assert_allclose(stats.sketch, expected, atol=1e-11 * np.abs(expected).max())


@pytest.mark.parametrize("signs", [(1.0, 1.0), (1.0, -1.0)])
def test_low_rank_view_reconstructs_a_planted_low_rank_matrix(signs):
    rng = np.random.default_rng(9)
    factors = rng.random((V, 6))
    weights = np.array([3.0, 2.0, 1.0, 0.5, signs[0] * 0.3, signs[1] * 0.2])  # definite or not
    matrix = (factors * weights) @ factors.T
    omega = gaussian_rows(SEED, V, 30)
    basis, values = low_rank(matrix @ omega, omega, 10)
    np.testing.assert_allclose((basis * values) @ basis.T, matrix, atol=1e-9 * np.abs(matrix).max())
    view = LowRankView(matrix @ omega, omega, np.diag(matrix).copy(), matrix.sum(axis=1), None,
                       np.ones(V, np.int64), 1, 10)
    ids = np.array([3, 0, 299])
    np.testing.assert_allclose(view.rows(ids), matrix[ids], atol=1e-9 * np.abs(matrix).max())
    np.testing.assert_allclose(view.block(ids), matrix[np.ix_(ids, ids)], atol=1e-9 * np.abs(matrix).max())
    right = rng.random((V, 4))
    np.testing.assert_allclose(view.matmul(right), matrix @ right, rtol=1e-8)


@pytest.mark.parametrize("row_sums", [False, True])
def test_view_diagonal_is_exact_and_off_diagonal_close_on_a_topic_stream(row_sums, monkeypatch):
    monkeypatch.setattr(sketch_view, "ROW_SUMS", row_sums)
    truth = separable_topics(400, 8, anchor_mass=0.05, seed=11)
    docs, _ = semi_synthetic(truth.topic_word, 4000, alpha=0.1, doc_length=150, seed=1)
    stats = SketchedCooccurrence(400, 120, 30, seed=SEED)
    stats.update(DocumentBatch.from_csr(docs))
    exact = CooccurrenceStats(400)
    exact.update(DocumentBatch.from_csr(docs))
    q, approx = exact.to_dense(), stats.view().to_dense()
    np.testing.assert_allclose(np.diag(approx), np.diag(q), rtol=1e-9, atol=1e-15)
    # with the row-sum correction, rows sum to the exact word mass but for its own diagonal (small)
    np.testing.assert_allclose(approx.sum(axis=1), stats.word_mass, rtol=1e-3 if row_sums else 0.03)  # 6e-5, 0.013
    view = stats.view()
    ids = np.array([5, 0, 399, 17])
    np.testing.assert_allclose(view.rows(ids), approx[ids], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(view.block(ids), approx[np.ix_(ids, ids)], rtol=1e-10, atol=1e-15)
    right = np.random.default_rng(0).random((400, 3))
    np.testing.assert_allclose(view.matmul(right), approx @ right, rtol=1e-10)
    assert np.linalg.norm(approx - q) / np.linalg.norm(q) < 0.06  # measured 0.041: mostly the sampling noise
    # projected through the factors as the full rows projected, with a sparse projection and a dense one
    for projection in (random_projection(400, 50, seed=3), np.random.default_rng(1).standard_normal((400, 7))):
        expected = approx[ids] @ projection
        np.testing.assert_allclose(view.projected_rows(ids, projection), expected,
                                   rtol=1e-9, atol=1e-12 * np.abs(expected).max())


def _recovered_l1(kind, truth, docs, **options):
    words = [f"w{i}" for i in range(truth.topic_word.shape[0])]
    model = StreamingTopicModel(truth.topic_word.shape[1], vocabulary=words, cooccurrence=kind,
                                refine_iterations=0, **options)
    model.learn_many(docs)
    return matched_l1(truth.topic_word, model.refresh().topic_word), model


def test_sketch_mode_recovers_topics_near_the_exact_mode():
    truth = separable_topics(1000, 10, anchor_mass=0.05, seed=11)
    docs, _ = semi_synthetic(truth.topic_word, 10000, alpha=0.1, doc_length=150, seed=1)
    exact, _ = _recovered_l1("exact", truth, docs)
    sketched, model = _recovered_l1("sketch", truth, docs, sketch_size=200)
    assert isinstance(model.stats, SketchedCooccurrence)
    # measured: exact 0.091, sketch 0.099 (s = 200, r = 50); s = 100 gave 0.106, s = 40 0.160
    assert sketched <= 1.15 * exact + 0.01, (sketched, exact)


def test_model_save_load_resumes_exactly(tmp_path):
    truth = separable_topics(200, 5, anchor_mass=0.05, seed=3)
    docs, _ = semi_synthetic(truth.topic_word, 1200, alpha=0.1, doc_length=80, seed=2)
    words = [f"w{i}" for i in range(200)]
    options = dict(cooccurrence="sketch", sketch_size=40, refine_iterations=0, batch_size=128)
    whole = StreamingTopicModel(5, vocabulary=words, **options)
    whole.learn_many(docs)
    part = StreamingTopicModel(5, vocabulary=words, **options)
    part.learn_many(docs[:500])
    part.save(tmp_path / "m.state")
    resumed = StreamingTopicModel.load(tmp_path / "m.state")
    assert isinstance(resumed.stats, SketchedCooccurrence) and resumed.stats.sketch_size == 40
    resumed.learn_many(docs[500:])
    np.testing.assert_array_equal(resumed.statistics().sketch, whole.statistics().sketch)
    np.testing.assert_array_equal(resumed.refresh().topic_word, whole.refresh().topic_word)


def test_merged_sketch_models_give_the_topics_of_one():
    truth = separable_topics(200, 5, anchor_mass=0.05, seed=3)
    docs, _ = semi_synthetic(truth.topic_word, 1200, alpha=0.1, doc_length=80, seed=2)
    words = [f"w{i}" for i in range(200)]
    options = dict(cooccurrence="sketch", sketch_size=40, refine_iterations=0)
    one = StreamingTopicModel(5, vocabulary=words, **options)
    one.learn_many(docs)
    parts = [StreamingTopicModel(5, vocabulary=words, **options) for _ in range(2)]
    parts[0].learn_many(docs[:700])
    parts[1].learn_many(docs[700:])
    merged = parts[0].merge(parts[1])
    np.testing.assert_allclose(merged.statistics().sketch, one.statistics().sketch, atol=1e-12)
    np.testing.assert_allclose(merged.refresh().topic_word, one.refresh().topic_word, atol=1e-6)
    exact = StreamingTopicModel(5, vocabulary=words, cooccurrence="exact")
    with pytest.raises(ValueError, match="same kind of statistics"):
        exact.merge(StreamingTopicModel(5, vocabulary=words, **options))


def test_background_refresh_and_forgetting_run_in_sketch_mode():
    truth = separable_topics(300, 6, anchor_mass=0.05, seed=4)
    docs, _ = semi_synthetic(truth.topic_word, 3000, alpha=0.1, doc_length=100, seed=5)
    words = [f"w{i}" for i in range(300)]
    model = StreamingTopicModel(6, vocabulary=words, cooccurrence="sketch", sketch_size=100, half_life=2000,
                                refine_iterations=0)
    model.learn_many(docs)
    snapshot = model.refresh_async().result()
    assert matched_l1(truth.topic_word, snapshot.topic_word) < 0.15  # measured 0.085
    assert model.stats.forgetting


def test_auto_chooses_by_vocabulary_size():
    config = ModelConfig(n_topics=5)
    assert config.cooccurrence == "auto"
    assert config.cooccurrence_kind(SKETCH_ABOVE_WORDS) == "exact"
    assert config.cooccurrence_kind(SKETCH_ABOVE_WORDS + 1) == "sketch"
    assert ModelConfig(n_topics=5, max_vocabulary=SKETCH_ABOVE_WORDS + 1).cooccurrence_kind(100) == "sketch"
    assert ModelConfig(n_topics=5, cooccurrence="exact").cooccurrence_kind(10 ** 6) == "exact"
    small = StreamingTopicModel(3, vocabulary=[f"w{i}" for i in range(50)])
    assert type(small.stats) is CooccurrenceStats
    large = StreamingTopicModel(3, vocabulary=[f"w{i}" for i in range(SKETCH_ABOVE_WORDS + 1)])
    assert isinstance(large.stats, SketchedCooccurrence) and large.stats.sketch_size == 200
    with pytest.raises(ValueError, match="cooccurrence must be one of"):
        ModelConfig(n_topics=5, cooccurrence="dense")


def test_full_open_vocabulary_retires_faded_words_in_sketch_mode(tmp_path):
    """test_drift's retirement scenario with the sketch: the dying topic's words are retired, their
    slots go to the newborn topic's words, which become anchors as soon as with the exact sums
    (observed 5,000 documents, 5 half-lives after the switch, for both)."""
    from streamtopics.drifting import drifting_stream

    stream = drifting_stream(8000, 2500, seed=2)
    late = {stream.vocabulary[i] for i in stream.anchors[stream.newborn]}
    dying = {stream.vocabulary[i] for i in stream.anchors[stream.dying]}
    known = [w for w in stream.vocabulary if w not in late]
    model = StreamingTopicModel(5, known, anchor_min_df=20, half_life=500, min_prevalence=0.15, batch_size=100,
                                max_vocabulary=len(known), admit_df=20, vocabulary_sketch_size=50,
                                cooccurrence="sketch", sketch_size=60)
    rows = stream.documents
    anchored, live_anchors = None, set()
    for d in range(8000):
        a, b = rows.indptr[d], rows.indptr[d + 1]
        model.learn_one({stream.vocabulary[i]: float(c) for i, c in zip(rows.indices[a:b], rows.data[a:b])}, key=d)
        if d >= 999 and (d + 1) % 250 == 0:
            snapshot = model.refresh()
            live_anchors |= set(snapshot.anchors) - dying
            if anchored is None and late & set(snapshot.anchors):
                anchored = d + 1
    retired = dict(model.open_vocabulary.retired)
    assert isinstance(model.stats, SketchedCooccurrence) and model.stats.generations.sum() == len(retired)
    assert late <= set(model.vocabulary.words) and dying & set(retired)
    assert not set(retired) & live_anchors
    assert anchored is not None and anchored <= stream.switch + 6 * 500, anchored
    restored = StreamingTopicModel.load(model.save(tmp_path / "retire.state"))
    np.testing.assert_array_equal(restored.stats.generations, model.stats.generations)
    np.testing.assert_array_equal(restored.stats.omega, model.stats.omega)  # regenerated, slots' new rows too
