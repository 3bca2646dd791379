"""The shortcuts that make seeded refinement fast: warm-started mixtures, partial E-steps that keep
KL-tEM monotone, stopping once the held-out score has peaked, and one mixture fit per alpha search."""

import numpy as np

from streamtopics.documents import DocumentBatch
from streamtopics.inference import infer_mixtures
from streamtopics.refinement import (_log_likelihood, choose_alpha_scale, completion_log_likelihood, kl_tem_step,
                                     refine_topics, split_for_completion)
from streamtopics.synthetic import sample_documents, separable_topics, topic_proportions


def _corpus(n_docs=600, seed=21):
    truth = separable_topics(120, 4, anchors_per_topic=2, anchor_mass=0.2, seed=seed)
    docs = DocumentBatch.from_csr(sample_documents(truth.topic_word, topic_proportions(n_docs, 4, alpha=0.2, seed=seed + 1),
                                                   50, seed=seed + 2))
    rough = 0.5 * truth.topic_word + 0.5 * np.random.default_rng(seed + 3).dirichlet(np.ones(120), 4).T
    return truth, docs, rough


def test_a_warm_start_resumes_the_updates_where_they_stopped():
    _, docs, topics = _corpus()
    cold = infer_mixtures(docs, topics, None, max_iter=50, tol=0.0)
    np.testing.assert_array_equal(infer_mixtures(docs, topics, None, max_iter=50, tol=0.0,
                                                 start=np.full((len(docs), 4), 0.25)), cold)
    halfway = infer_mixtures(docs, topics, None, max_iter=30, tol=0.0)
    np.testing.assert_array_equal(infer_mixtures(docs, topics, max_iter=20, tol=0.0, start=halfway), cold)


def test_partial_warm_started_e_steps_keep_kl_tem_monotone():
    # the reservoir's likelihood sum_d sum_j H_dj log (A gamma_d)_j never falls, E-step nor M-step
    _, docs, topics = _corpus()
    mixtures = np.full((len(docs), 4), 0.25)
    previous = _log_likelihood(docs.indptr, docs.indices, docs.counts, topics, mixtures)[0]
    for _ in range(6):
        new_topics, mixtures = kl_tem_step(docs, topics, mixtures, updates=2)
        after_e = _log_likelihood(docs.indptr, docs.indices, docs.counts, topics, mixtures)[0]
        after_m = _log_likelihood(docs.indptr, docs.indices, docs.counts, new_topics, mixtures)[0]
        assert previous - 1e-9 <= after_e <= after_m + 1e-9
        topics, previous = new_topics, after_m
    assert np.allclose(topics.sum(axis=0), 1.0)


def test_refinement_stops_once_the_heldout_score_has_peaked_and_keeps_the_best():
    _, docs, rough = _corpus()
    full = refine_topics(rough, docs, iterations=12, patience=12)
    assert len(full.heldout) == 13
    for patience in (1, 2):
        early = refine_topics(rough, docs, iterations=12, patience=patience)
        trace, best = early.heldout, early.best_iteration
        assert trace == full.heldout[:len(trace)]  # the same iterates, deterministically
        assert trace[best] == max(trace) > trace[0]
        assert len(trace) - 1 - best == patience and max(trace[best + 1:]) < trace[best]  # stopped early


def test_alpha_search_scores_each_scale_as_completion_does():
    truth, docs, _ = _corpus()
    shape = np.array([0.4, 0.3, 0.2, 0.1])
    scale, scores = choose_alpha_scale(truth.topic_word, shape, docs, scales=(0.1, 1.0, 10.0))
    observed, held = split_for_completion(docs)
    for c, score in scores.items():
        assert score == completion_log_likelihood(observed, held, truth.topic_word, c * shape)
    assert scores[scale] == max(scores.values())
