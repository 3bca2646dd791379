"""Whether the anchors explain the sums (streamtopics/refresh/separability.py): the ratio against a
plain computation, and the refinement skipped on separable streams only."""

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.refresh import steps
from streamtopics.refresh.recovery import recover_topics
from streamtopics.refresh.separability import SEPARABLE_FIT, fit_to_noise, most_frequent_words
from streamtopics.statistics.cooccurrence import CooccurrenceStats
from streamtopics.synthetic import semi_synthetic, separable_topics, zipf_topics
from streamtopics.text.documents import DocumentBatch


def stream_model(topic_word, n_docs=20000, **settings):
    documents, _ = semi_synthetic(topic_word, n_docs, alpha=0.1, doc_length=100, seed=1)
    model = StreamingTopicModel(topic_word.shape[1], [f"w{i}" for i in range(topic_word.shape[0])], **settings)
    model.learn_many(documents)
    return model, documents


def recorded_fits(monkeypatch):
    fits = []
    recover = steps.recover

    def spy(*args, **kwargs):
        result, warm = recover(*args, **kwargs)
        fits.append(result.fit_to_noise)
        return result, warm

    monkeypatch.setattr(steps, "recover", spy)
    return fits


def test_the_ratio_is_each_words_residual_over_its_noise_weighted_by_mass():
    rng = np.random.default_rng(3)  # documents of uneven lengths: the harmonic mean length matters
    topic_word = zipf_topics(60, 3, seed=3)
    documents, _ = semi_synthetic(topic_word, 400, alpha=0.3, doc_length=rng.integers(5, 40, 400), seed=3)
    stats = CooccurrenceStats(60)
    stats.update(DocumentBatch.from_csr(documents))
    anchors = np.array([0, 7, 20])
    words = most_frequent_words(stats, 25)
    recovery = recover_topics(stats, anchors, background=True, fit_words=words)
    # the same, written out: Qbar rows from a dense Q, the noise from the documents themselves
    dense = documents.toarray()
    lengths = dense.sum(axis=1)
    q = np.zeros((60, 60))
    for h, n in zip(dense, lengths):
        if n >= 2:
            q += (np.outer(h, h) - np.diag(h)) / (n * (n - 1))
    mass = q.sum(axis=1)
    qbar = q / np.where(mass > 0, mass, 1)[:, None]
    rows = np.vstack([qbar[anchors], mass / mass.sum()])
    c = recovery.coefficients[words]
    residual = ((qbar[words] - c @ rows) ** 2).sum(axis=1)
    tokens = dense.sum(axis=0)[words]
    noise = (1 - (qbar[words] ** 2).sum(axis=1)) / (tokens * (tokens / mass[words] - 1))
    expected = np.average(residual / noise, weights=mass[words])
    # residuals are small differences of rounded sums: 2e-6 apart on an AMD EPYC VM's BLAS
    assert np.isclose(recovery.fit_to_noise, expected, rtol=1e-4)
    assert np.isclose(fit_to_noise(stats, words, c, qbar[words] @ rows.T, rows), expected, rtol=1e-4)


def test_a_separable_stream_is_published_as_recovered(monkeypatch):
    fits = recorded_fits(monkeypatch)
    truth = separable_topics(400, 5, anchors_per_topic=5, seed=0)
    model, _ = stream_model(truth.topic_word)
    snapshot = model.refresh()
    assert fits[-1] < SEPARABLE_FIT and model.last_refresh["refinement_source"].startswith("none")
    anchors_only, _ = stream_model(truth.topic_word, refine_iterations=0, refine_sweeps=0)
    assert np.array_equal(anchors_only.refresh().topic_word, snapshot.topic_word)
    refined, _ = stream_model(truth.topic_word, n_docs=20000)
    monkeypatch.setattr(steps, "SEPARABLE_FIT", 0.0)  # the refinement forced: farther from the truth here
    forced = refined.refresh().topic_word
    assert matched_l1(truth.topic_word, forced) > matched_l1(truth.topic_word, snapshot.topic_word)


def test_a_stream_of_text_shaped_topics_is_refined(monkeypatch):
    fits = recorded_fits(monkeypatch)
    model, _ = stream_model(zipf_topics(400, 5, seed=0))
    model.refresh()
    assert fits[-1] >= SEPARABLE_FIT and model.last_refresh["refinement_source"] == "restart"
