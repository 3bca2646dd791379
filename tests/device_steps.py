"""The refinement's device steps against the CPU's (run by tests/test_gpu.py: on a CUDA device
where there is one, else through numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1, which runs the
same kernels one thread at a time in Python, with the warp shuffles it lacks from
tests/simulated_warps.py; keep the batches small)."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    sys.path.insert(0, str(Path(__file__).parent))
    import simulated_warps  # noqa: F401  (the simulator's missing shuffles)

from streamtopics.refresh import gpu
from streamtopics.refresh.collapsed import CollapsedShares
from streamtopics.text.documents import DocumentBatch
from streamtopics.inference import infer_mixtures
from streamtopics.model import StreamingTopicModel
from streamtopics.refresh.kl_tem import WordMajor, _m_step
from streamtopics.refresh.refinement import HostRefinementSteps, refine_topics
from streamtopics.synthetic import semi_synthetic, separable_topics

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
# 40 topics: lanes 0-7 of a warp hold two topics each, the rest one. The simulator's warps are
# Python threads meeting at barriers (seconds per hundred shuffles): there, a few short documents.
N_TOPICS = 40
N_WORDS, N_DOCS, DOC_LENGTH = (24, 4, 8) if SIMULATED else (60, 300, 40)


@pytest.fixture(scope="module")
def stream():
    rng = np.random.default_rng(5)
    topics = rng.dirichlet(np.full(N_WORDS, 0.3), N_TOPICS).T
    docs, _ = semi_synthetic(topics, N_DOCS, alpha=0.2, doc_length=DOC_LENGTH, seed=4)
    mixtures = rng.dirichlet(np.ones(N_TOPICS), N_DOCS)
    return DocumentBatch.from_csr(docs), topics, mixtures


def test_mixtures_match_the_cpu(stream):
    batch, topics, mixtures = stream
    updates = 3 if SIMULATED else 7
    expected = infer_mixtures(batch, topics, max_iter=updates, tol=1e-12, start=mixtures)
    got = gpu.infer_mixtures(gpu.DeviceBatch(batch, N_WORDS), topics, mixtures, updates, 1e-12)
    assert np.abs(expected - mixtures).max() > 1e-3  # the updates moved them
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_m_step_matches_the_cpu(stream):
    batch, topics, mixtures = stream
    by_word = WordMajor.of(batch, N_WORDS)
    expected = np.zeros_like(topics)
    _m_step(by_word.ptr, by_word.docs, by_word.counts, topics, mixtures, expected)
    got = gpu.m_step(gpu.DeviceBatch(batch, N_WORDS), topics, mixtures)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)


def test_cvb0_sweeps_match_the_cpu(stream):
    batch, topics, mixtures = stream
    cpu = CollapsedShares.seeded(batch, topics, mixtures)
    device = gpu.CollapsedShares(gpu.DeviceBatch(batch, N_WORDS), topics, mixtures)
    np.testing.assert_array_equal(device.topic_ids.copy_to_host(), cpu.topic_ids)  # the same first shares
    for _ in range(1 if SIMULATED else 3):
        cpu.sweep(0.01, 0.01, blocks=2)
        device.sweep(0.01, 0.01, blocks=2)
    np.testing.assert_array_equal(device.topic_ids.copy_to_host(), cpu.topic_ids)
    np.testing.assert_allclose(device.weights.copy_to_host(), cpu.weights, rtol=0, atol=1e-5)
    expected = cpu.topic_word(0.01)
    assert np.abs(expected - topics).sum(axis=0).max() > 0.1  # the sweeps moved the topics
    np.testing.assert_allclose(device.topic_word(0.01), expected, rtol=0, atol=1e-9)


def test_refinement_steps_match_the_cpu(stream):
    """The steps refine_topics takes, each from the same inputs (the wiring the simulator can afford)."""
    batch, topics, mixtures = stream
    fit, observed = batch.select(np.arange(N_DOCS - 1)), batch.select(np.array([N_DOCS - 1]))
    cpu, device = HostRefinementSteps(fit, observed, N_WORDS), gpu.DeviceRefinementSteps(fit, observed, N_WORDS)
    np.testing.assert_allclose(device.held_mixtures(topics, None, 3), cpu.held_mixtures(topics, None, 3), atol=1e-12)
    (cpu_topics, cpu_mixtures), (device_topics, device_mixtures) = (
        steps.kl_tem_step(topics, mixtures[: N_DOCS - 1], None, 0.01) for steps in (cpu, device))
    np.testing.assert_allclose(device_mixtures, cpu_mixtures, atol=1e-6)  # the CPU's E-step is float32
    np.testing.assert_allclose(device_topics, cpu_topics, atol=1e-6)
    (device_topics, device_shares), (cpu_topics, cpu_shares) = (
        steps.cvb0_sweeps(topics, mixtures[: N_DOCS - 1], 1, 0.003, 0.01) for steps in (device, cpu))
    np.testing.assert_allclose(device_topics, cpu_topics, atol=1e-9)
    assert device_shares is None and np.array_equal(cpu_shares.topic_word(0.01), cpu_topics)  # only the CPU's carry


@pytest.fixture(scope="module")
def separable():
    """A stream the model can find topics in: 3 separable topics."""
    truth = separable_topics(N_WORDS, 3, anchor_mass=0.05, seed=3)
    docs, _ = semi_synthetic(truth.topic_word, 400, alpha=0.2, doc_length=20, seed=4)
    rough = truth.topic_word + 0.5 / N_WORDS  # a seed the refinement improves on
    return DocumentBatch.from_csr(docs), rough / rough.sum(axis=0)


@pytest.mark.skipif(SIMULATED, reason="thousands of simulated shuffles: on a device only")
def test_refinement_matches_the_cpu(separable):
    batch, topics = separable
    settings = dict(smoothing=0.01, sweeps=2, holdout_every=4, tolerance=1.0)
    cpu = refine_topics(topics, batch, 3, **settings)
    device = refine_topics(topics, batch, 3, **settings, device="cuda")
    assert (device.kept_iteration, device.sweeps) == (cpu.kept_iteration, cpu.sweeps) == (3, 2)
    np.testing.assert_allclose(device.heldout, cpu.heldout, rtol=0, atol=1e-6)  # the CPU's E-step is float32
    np.testing.assert_allclose(device.topic_word, cpu.topic_word, rtol=0, atol=1e-6)


@pytest.mark.skipif(SIMULATED, reason="thousands of simulated shuffles: on a device only")
def test_a_model_refreshes_on_the_device(separable):
    batch, _ = separable
    snapshots = []
    for device in ("cpu", "cuda"):
        model = StreamingTopicModel(3, vocabulary=[f"w{i}" for i in range(N_WORDS)], refine_device=device,
                                    anchor_min_df=2)
        model.learn_many(batch)
        snapshots.append(model.refresh())
    assert model.last_refresh["refinement_sweeps"] == 5
    np.testing.assert_allclose(snapshots[1].topic_word, snapshots[0].topic_word, rtol=0, atol=1e-5)
