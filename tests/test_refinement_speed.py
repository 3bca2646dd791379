"""The shortcuts that make seeded refinement fast: warm-started mixtures, partial E-steps that keep
KL-tEM monotone, stopping once the held-out score has peaked, and one mixture fit per alpha search."""

import numpy as np
import pytest

from streamtopics.text.documents import DocumentBatch
from streamtopics.inference import infer_mixtures
from streamtopics.refresh.kl_tem import SINGLE, kl_tem_step
from streamtopics.refresh.collapsed import _log_likelihood
from streamtopics.refresh.refinement import ALPHA_UPDATES, choose_alpha_scale, refine_topics
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
    kept = halfway.copy()
    np.testing.assert_array_equal(infer_mixtures(docs, topics, max_iter=20, tol=0.0, start=halfway), cold)
    np.testing.assert_array_equal(halfway, kept)  # the caller's start is not fitted in place
    # the serial kernel (one document at a time, no threads) is the same kernel, prior or starts
    np.testing.assert_array_equal(infer_mixtures(docs, topics, None, max_iter=50, tol=0.0, serial=True), cold)
    np.testing.assert_array_equal(infer_mixtures(docs, topics, max_iter=20, tol=0.0, start=halfway, serial=True), cold)


def test_single_precision_mixtures_are_the_double_precision_ones_to_float32_rounding():
    # the refinement's E-step runs the updates in float32 (refinement.SINGLE)
    _, docs, topics = _corpus()
    double = infer_mixtures(docs, topics, None, max_iter=20, tol=0.0)
    single = infer_mixtures(docs, topics, None, max_iter=20, tol=0.0, single=True)
    assert single.dtype == np.float64
    np.testing.assert_allclose(single, double, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(single.sum(axis=1), 1.0, rtol=1e-6)


def test_a_single_precision_warm_start_keeps_no_weight_at_zero():
    # KL-tEM's float32 E-steps chain warm starts, and a chain takes weights to 0 (or to float32's slow subnormal
    # range, inference.SINGLE_FLOOR): a start weight of 0 is raised, so the topic a document's words ask for comes
    # back, as it does from float64's tiny weights
    _, docs, topics = _corpus()
    double = infer_mixtures(docs, topics, None, max_iter=300, tol=0.0)
    start = np.zeros((len(docs), 4))
    start[:, 0] = 1.0  # every document on topic 0 alone
    single = infer_mixtures(docs, topics, None, max_iter=200, tol=0.0, start=start, single=True)
    ranked = np.sort(double, axis=1)
    clear = ranked[:, -1] - ranked[:, -2] > 0.1  # documents with one clearly leading topic
    assert np.mean(double[clear].argmax(axis=1) != 0) > 0.5  # most of them about another topic
    np.testing.assert_array_equal(single[clear].argmax(axis=1), double[clear].argmax(axis=1))
    assert np.abs(single - double).mean() < 0.01


def test_the_compiled_split_is_the_documented_one():
    from streamtopics.refresh.kl_tem import WordMajor
    from streamtopics.refresh.refinement import _split_reservoir, split_for_completion
    rng = np.random.default_rng(3)
    pairs = []
    for n in [0, 1, 2, 3, 1, 7, 4, 0, 5, 2, 6]:  # documents of 0 and 1 entries too
        ids = np.sort(rng.choice(30, n, replace=False)).astype(np.int32)
        pairs.append((ids, rng.integers(1, 4, n).astype(np.float64)))
    batch = DocumentBatch.from_pairs(pairs, keys=np.arange(len(pairs)) + 100)
    fit, held_documents = _split_reservoir(batch, 3)
    for part, rows in ((fit, [r for r in range(len(pairs)) if r % 3]), (held_documents, list(range(0, len(pairs), 3)))):
        reference = batch.select(np.array(rows))
        for name in ("indptr", "indices", "counts", "keys"):
            np.testing.assert_array_equal(getattr(part, name), getattr(reference, name))
    observed, held = split_for_completion(batch)
    kept = [(ids, counts) for ids, counts in pairs if ids.size >= 2]
    for part, start in ((observed, 0), (held, 1)):
        reference = DocumentBatch.from_pairs([(ids[start::2], counts[start::2]) for ids, counts in kept])
        for name in ("indptr", "indices", "counts"):
            np.testing.assert_array_equal(getattr(part, name), getattr(reference, name))
    by_word = WordMajor.of(fit, 30)
    for word in range(30):  # each word's documents in order, with their counts
        docs = [d for d in range(len(fit)) if word in fit.indices[fit.indptr[d]:fit.indptr[d + 1]]]
        np.testing.assert_array_equal(by_word.docs[by_word.ptr[word]:by_word.ptr[word + 1]], docs)
        counts = [fit.counts[fit.indptr[d] + np.flatnonzero(fit.indices[fit.indptr[d]:fit.indptr[d + 1]] == word)[0]]
                  for d in docs]
        np.testing.assert_array_equal(by_word.counts[by_word.ptr[word]:by_word.ptr[word + 1]], counts)


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


def test_refinement_stops_once_the_heldout_score_has_peaked_and_notes_the_best():
    _, docs, rough = _corpus()
    full = refine_topics(rough, docs, iterations=12, patience=12, tolerance=np.inf)
    assert len(full.heldout) == 13
    for patience in (1, 2):
        early = refine_topics(rough, docs, iterations=12, patience=patience, tolerance=np.inf)
        trace, best = early.heldout, early.best_iteration
        assert trace == full.heldout[:len(trace)]  # the same iterates, deterministically
        assert trace[best] == max(trace) > trace[0]
        assert len(trace) - 1 - best == patience and max(trace[best + 1:]) < trace[best]  # stopped early
        assert early.kept_iteration == len(trace) - 1  # an unbounded tolerance: every iterate is good enough


def test_a_dip_within_the_tolerance_does_not_stop_the_refinement_and_a_drop_beyond_it_does():
    _, docs, rough = _corpus()
    full = refine_topics(rough, docs, iterations=12, patience=12, tolerance=np.inf)
    trace = full.heldout
    peak = int(np.argmax(trace[:4]))  # the first peak, then iterates below it
    below = [trace[peak] - s for s in trace[peak + 1:]]
    assert below and min(below) > 0, "the fixture's score must fall after its first peak"
    drop = max(below[:3])
    # a tolerance above the drop: EM goes on past the dip as with an unbounded tolerance
    patient = refine_topics(rough, docs, iterations=12, patience=3, tolerance=drop * 2)
    assert patient.heldout == trace[:len(patient.heldout)] and len(patient.heldout) - 1 == peak + 3
    # a tolerance below the first iterate's drop: EM stops right there and keeps the peak
    strict = refine_topics(rough, docs, iterations=12, patience=3, tolerance=below[0] / 2)
    assert len(strict.heldout) - 1 == peak + 1 and strict.best_iteration == strict.kept_iteration == peak


def _kept_by_rule(trace, tolerance, patience):
    """The iterate the refinement keeps, walked through the full trace: stop at the first score more
    than ``tolerance`` below the best so far (it is not kept) or ``patience`` iterates after the
    best; keep the last iterate run before that."""
    best = kept = 0
    for it in range(1, len(trace)):
        if trace[it] < trace[best] - tolerance:
            break
        kept = it
        if trace[it] > trace[best]:
            best = it
        elif it - best >= patience:
            break
    return kept


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9])
def test_the_latest_iterate_within_the_tolerance_of_the_best_is_kept(fraction):
    _, docs, rough = _corpus()
    full = refine_topics(rough, docs, iterations=12, patience=12, tolerance=np.inf)
    trace = full.heldout
    peak = int(np.argmax(trace[:4]))
    tolerance = fraction * (trace[peak] - min(trace[peak + 1:]))  # some later iterates within, some beyond
    result = refine_topics(rough, docs, iterations=12, patience=12, tolerance=tolerance)
    kept = _kept_by_rule(trace, tolerance, 12)
    assert result.kept_iteration == kept and result.best_iteration == int(np.argmax(trace[:kept + 1]))
    assert trace[kept] >= max(trace) - tolerance or kept == len(result.heldout) - 1
    # the topics are that iterate's: the same refinement run for exactly that many iterations
    same = refine_topics(rough, docs, iterations=kept, patience=12, tolerance=np.inf)
    np.testing.assert_array_equal(result.topic_word, same.topic_word)
    assert kept > peak or tolerance < trace[peak] - trace[peak + 1]


def _reference_completion(observed, held, topics, gamma, alpha):
    """Held-out log-likelihood per token, one document at a time in plain numpy."""
    total = tokens = 0.0
    for d in range(len(observed)):
        n_obs = observed.counts[observed.indptr[d]:observed.indptr[d + 1]].sum()
        mixture = (n_obs * gamma[d] + alpha) / (n_obs + alpha.sum())
        ids, counts = held.indices[held.indptr[d]:held.indptr[d + 1]], held.counts[held.indptr[d]:held.indptr[d + 1]]
        total += float(counts @ np.log(np.maximum(topics[ids] @ mixture, 1e-9)))
        tokens += counts.sum()
    return total / tokens


def test_alpha_search_scores_each_scale_on_the_refinements_held_out_documents():
    _, docs, rough = _corpus()
    refined = refine_topics(rough, docs, iterations=4)
    held_out = refined.held_out
    for topics in (refined.topic_word, refined.topic_word[:, :3] / refined.topic_word[:, :3].sum(axis=0)):
        k = topics.shape[1]  # 3: a (background) column dropped after refinement
        shape = np.arange(k, 0, -1) / np.arange(k, 0, -1).sum()
        scale, scores = choose_alpha_scale(topics, shape, held_out, scales=(0.1, 1.0, 10.0))
        start = held_out.mixtures[:, :k] / held_out.mixtures[:, :k].sum(axis=1, keepdims=True)
        gamma = infer_mixtures(held_out.observed, topics, max_iter=ALPHA_UPDATES, tol=1e-5, start=start)
        for c, score in scores.items():
            assert score == pytest.approx(_reference_completion(held_out.observed, held_out.held, topics, gamma,
                                                                c * shape), rel=1e-12)
        assert scores[scale] == max(scores.values())


def test_the_m_step_is_the_em_update_of_the_multinomial_mixture():
    _, docs, topics = _corpus()
    start = infer_mixtures(docs, topics, None, max_iter=3, tol=0.0)
    new_topics, mixtures = kl_tem_step(docs, topics, start, updates=2)
    np.testing.assert_array_equal(mixtures, infer_mixtures(docs, topics, max_iter=2, tol=1e-5, start=start,
                                                           single=SINGLE))
    counts = np.zeros((len(docs), topics.shape[0]))  # dense reference: A_jk sum_d H_dj gamma_dk / (A gamma_d)_j
    for d in range(len(docs)):
        counts[d, docs.indices[docs.indptr[d]:docs.indptr[d + 1]]] = docs.counts[docs.indptr[d]:docs.indptr[d + 1]]
    ratio = np.divide(counts, mixtures @ topics.T, out=np.zeros_like(counts), where=counts > 0)
    expected = topics * (ratio.T @ mixtures)
    np.testing.assert_allclose(new_topics, expected / expected.sum(axis=0), rtol=1e-10, atol=1e-15)


def test_kl_tem_runs_over_evenly_spaced_fitted_documents_and_the_sweeps_over_all():
    _, docs, rough = _corpus(n_docs=600)
    held = np.zeros(len(docs), bool)
    held[::10] = True
    fitted = np.flatnonzero(~held)  # 540 documents, KL-tEM limited to 200 of them
    refined = refine_topics(rough, docs, iterations=6, smoothing=0.01, sweeps=2, held_out=held, em_documents=200)
    # the same KL-tEM over a reservoir of those documents and the same held-out ones
    subset = np.sort(np.concatenate([fitted[np.arange(200) * fitted.size // 200], np.flatnonzero(held)]))
    alone = refine_topics(rough, docs.select(subset), iterations=6, smoothing=0.01, held_out=held[subset],
                          em_documents=None)
    assert refined.heldout == alone.heldout and refined.kept_iteration == alone.kept_iteration
    assert len(refined.shares.batch) == fitted.size  # the sweeps ran over every fitted document
    np.testing.assert_array_equal(refined.shares.batch.keys, docs.keys[fitted])
    unlimited = refine_topics(rough, docs, iterations=6, smoothing=0.01, sweeps=2, held_out=held, em_documents=None)
    assert unlimited.heldout != refined.heldout
