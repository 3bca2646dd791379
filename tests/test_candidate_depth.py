"""The anchor candidates' depth (streamtopics/refresh/candidate_depth.py): the residual it compares,
the choice it makes on separable data, its schedule, and its place in the checkpoint."""

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.refresh import anchors as anchors_module
from streamtopics.refresh.candidate_depth import REDECIDE_GROWTH, WIDER, CandidateDepth, recovery_residual
from streamtopics.refresh.separability import most_frequent_words
from streamtopics.statistics.cooccurrence import DenseCooccurrence
from streamtopics.synthetic import (dirichlet_topic_covariance, population_cooccurrence, semi_synthetic,
                                    separable_topics)


def population_view(n_words=60, n_topics=4, seed=0):
    truth = separable_topics(n_words, n_topics, anchors_per_topic=2, anchor_mass=0.1, seed=seed)
    q = population_cooccurrence(truth.topic_word, dirichlet_topic_covariance(np.full(n_topics, 0.3)))
    return truth, DenseCooccurrence(q * 1e6, n_docs=1000)


def reference_residual(view, anchors, words, weights):
    """sum_i p_i ||Qbar_i - C_i Qbar_S||^2 / sum_i p_i, written out row by row."""
    qbar = view.matrix / view.word_mass[:, None]
    total = 0.0
    for i, c in zip(words, weights):
        total += view.word_mass[i] * np.sum((qbar[i] - c @ qbar[anchors]) ** 2)
    return total / view.word_mass[words].sum()


def test_the_true_anchors_leave_no_residual_and_others_do():
    truth, view = population_view()
    words = np.arange(view.n_words)
    true_anchors = truth.anchors[:, 0]
    assert recovery_residual(view, true_anchors, words) < 1e-12 * np.mean(view.word_mass)
    others = np.setdiff1d(words, truth.anchors.ravel())[:4]
    assert recovery_residual(view, others, words) > 1e3 * recovery_residual(view, true_anchors, words)


def test_the_residual_is_the_mass_weighted_squared_distance_to_the_anchors_hull():
    truth, view = population_view(seed=1)
    rng = np.random.default_rng(1)
    view = DenseCooccurrence(view.matrix + rng.uniform(0, 2.0, view.matrix.shape), n_docs=1000)  # off the hull
    anchors = truth.anchors[:, 0]
    words = np.arange(0, view.n_words, 3)
    # the simplex weights minimising each word's distance: found here by a fine projected-gradient solve
    qbar = view.matrix / view.word_mass[:, None]
    s = qbar[anchors]
    weights = np.full((words.size, anchors.size), 1.0 / anchors.size)
    step = 1.0 / np.linalg.eigvalsh(s @ s.T).max()
    for _ in range(20000):
        weights = weights - step * (weights @ s - qbar[words]) @ s.T
        weights = np.array([_simplex_projection(w) for w in weights])
    expected = reference_residual(view, anchors, words, weights)
    assert np.isclose(recovery_residual(view, anchors, words, tol=1e-12, max_iter=5000), expected, rtol=1e-6)


def _simplex_projection(v):
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    rho = np.nonzero(u * np.arange(1, v.size + 1) > css - 1)[0][-1]
    return np.maximum(v - (css[rho] - 1) / (rho + 1), 0)


def test_most_frequent_words_breaks_ties_by_id_and_skips_words_without_mass():
    view = DenseCooccurrence(np.diag([1.0, 0.0, 1.0, 1.0, 1.0]), n_docs=10, document_frequency=[3, 9, 5, 5, 1])
    assert most_frequent_words(view, 3).tolist() == [0, 2, 3]


class CountingSearch:
    """A stand-in for the anchor search: the anchors given for each cap, and the caps asked for."""

    def __init__(self, by_cap):
        self.by_cap, self.caps = by_cap, []

    def __call__(self, cap):
        self.caps.append(cap)
        return self.by_cap.get(cap, self.by_cap[min(self.by_cap)])


def test_the_choice_keeps_the_set_with_the_lower_residual_and_is_made_again_on_doubling():
    truth, view = population_view(seed=2)
    good, bad = truth.anchors[:, 0], np.setdiff1d(np.arange(view.n_words), truth.anchors.ravel())[:4]
    depth = CandidateDepth()
    cap = 10  # under the 60 eligible words: a choice is made
    search = CountingSearch({cap: bad, WIDER * cap: good})
    assert np.array_equal(depth.anchors(view, search, cap, True, 1000, min_df=1), good)
    assert depth.widened and depth.decided_at == 1000 and search.caps == [cap, WIDER * cap]
    search.caps.clear()
    depth.anchors(view, search, cap, True, int(REDECIDE_GROWTH * 1000) - 1, min_df=1)
    assert search.caps == [WIDER * cap]  # not due yet: the deeper set, searched once
    search.caps.clear()
    search.by_cap = {cap: good, WIDER * cap: bad}
    assert np.array_equal(depth.anchors(view, search, cap, True, int(REDECIDE_GROWTH * 1000), min_df=1), good)
    assert not depth.widened and search.caps == [cap, WIDER * cap]
    search.caps.clear()
    depth.anchors(view, search, None, True, 10**6, min_df=1)
    depth.anchors(view, search, cap, False, 10**6, min_df=1)
    depth.anchors(view, search, 100, True, 10**6, min_df=1)  # the cap holds every eligible word
    assert search.caps == [None, cap, 100]
    restored = CandidateDepth()
    restored.load_state(depth.state())
    assert (restored.widened, restored.decided_at) == (depth.widened, depth.decided_at)


def separable_stream(n_words=400, n_topics=5, n_docs=20000, seed=0):
    """Separable topics whose anchor words are rarer than the shared words (the paper's recipe)."""
    truth = separable_topics(n_words, n_topics, anchors_per_topic=5, seed=seed)
    documents, _ = semi_synthetic(truth.topic_word, n_docs, alpha=0.1, doc_length=100, seed=seed + 1)
    return truth, documents, [f"w{i}" for i in range(n_words)]


def test_on_separable_data_the_default_cap_reaches_the_rare_anchors(monkeypatch, tmp_path):
    """The default cap, here 200 of 400 words, hides the anchors; the choice finds the deeper set
    better and the topics come out as without a cap, through a checkpoint too."""
    monkeypatch.setattr(anchors_module, "default_max_candidates", lambda n_topics: 200)
    truth, documents, words = separable_stream()
    settings = dict(refine_iterations=0, refine_sweeps=0)
    models = {cap: StreamingTopicModel(5, words, max_anchor_candidates=cap, **settings) for cap in ("auto", 200, None)}
    for model in models.values():
        model.learn_many(documents[:10000])
        model.refresh()
    l1 = {cap: matched_l1(truth.topic_word, m.snapshot.topic_word) for cap, m in models.items()}
    assert models["auto"].lineage.candidate_depth.widened
    assert l1["auto"] == l1[None] and l1[200] > 2 * l1[None], l1
    assert models["auto"].lineage.candidate_depth.decided_at == 10000
    models["auto"].save(tmp_path / "model.state")
    resumed = StreamingTopicModel.load(tmp_path / "model.state")
    assert resumed.lineage.candidate_depth.state() == models["auto"].lineage.candidate_depth.state()
    for model in (models["auto"], resumed):  # 15,000 documents: not yet twice 10,000, the deeper set searched
        model.learn_many(documents[10000:15000])
        model.refresh()
    assert resumed.snapshot.to_json() == models["auto"].snapshot.to_json()


def test_the_deeper_set_must_leave_clearly_less_residual(monkeypatch):
    """A deeper set a few words larger leaves a residual lower by noise: the cap is kept then."""
    from streamtopics.refresh import candidate_depth

    truth, view = population_view(seed=3)
    capped, deeper = truth.anchors[:, 0], truth.anchors[:, 1]
    margin = candidate_depth.DEEPER_MARGIN
    for ratio, widened in ((1.0 - margin / 2, False), (1.0 - 2 * margin, True)):
        monkeypatch.setattr(candidate_depth, "recovery_residual",
                            lambda view, anchors, words, r=ratio: r if np.array_equal(anchors, deeper) else 1.0)
        depth = CandidateDepth()
        chosen = depth.anchors(view, CountingSearch({10: capped, WIDER * 10: deeper}), 10, True, 1000, min_df=1)
        assert depth.widened == widened and np.array_equal(chosen, deeper if widened else capped)
