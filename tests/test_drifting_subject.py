"""A subject that drifts keeps its id: its words move, it is announced as changed, and no birth or
death stands for it (issue 46; docs/design.md, "Topic identity"; the benchmark's stream:
``python -m benchmarks.events --streams drifting-20newsgroups``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel
from streamtopics.refresh.alignment import l1_distances
from streamtopics.synthetic import sample_documents, separable_topics

N_DOCS, EVERY, START, END, STEPS = 6000, 500, 2000, 4000, 8


def _drifting_stream(seed: int):
    """Four separable topics over 300 words; from document START to END the last one's anchor
    mass moves, in STEPS steps, onto three words no topic used before, and its ten most probable
    other words trade probabilities with ten it rarely used. Returns the counts, the vocabulary
    and the drifting topic before and after."""
    rng = np.random.default_rng(seed)
    pool = separable_topics(300, 5, anchors_per_topic=3, anchor_mass=0.2, concentration=0.1, seed=rng)
    topics = pool.topic_word[:, :4].copy()
    fresh = pool.anchors[4]  # words of a fifth topic nobody draws from: new to the stream
    topics[fresh] = 0.0
    topics /= topics.sum(axis=0)
    before = topics[:, 3].copy()
    after = before.copy()
    after[fresh], after[pool.anchors[3]] = before[pool.anchors[3]], 0.0
    others = np.setdiff1d(np.flatnonzero(before > 0), np.concatenate([pool.anchors[3], fresh]))
    ranked = others[np.argsort(-before[others], kind="stable")]
    head, tail = ranked[:10], ranked[-10:]
    after[head], after[tail] = before[tail], before[head]
    mixtures = rng.dirichlet(np.full(4, 0.3), N_DOCS)
    edges = np.unique(np.concatenate([[0], np.linspace(START, END, STEPS + 1).astype(int), [N_DOCS]]))
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        weight = min(max(((lo + hi) / 2 - START) / (END - START), 0.0), 1.0)
        at = topics.copy()
        at[:, 3] = (1 - weight) * before + weight * after
        parts.append(sample_documents(at, mixtures[lo:hi], 40, seed=rng))
    vocabulary = [f"w{i}" for i in range(300)]
    return sp.vstack(parts).tocsr(), vocabulary, before, after


@pytest.mark.parametrize("half_life", [None, 1000])
@pytest.mark.parametrize("seed", [0, 1])  # and 2-9 measured: the same
def test_a_drifting_subject_keeps_its_id_and_is_announced_as_changed(seed, half_life):
    """With exact sums or forgetting alike. Forgetting also follows the subject to where it went,
    moving by changes; exact sums remember it as it was, and may move it less than a change a
    refresh."""
    counts, vocabulary, before, after = _drifting_stream(seed)
    assert np.abs(after - before).sum() > 0.5  # farther than change_threshold: a move no refresh may hide
    model = StreamingTopicModel(4, vocabulary, seed=0, half_life=half_life)
    followers, events, after_the_drift = [], [], []
    for start in range(0, N_DOCS, EVERY):
        model.learn_many(counts[start:start + EVERY])
        snapshot = model.refresh()
        if snapshot.forming:
            continue
        # reference: the topic nearest the drifting topic's truth at this point of the stream
        weight = min(max((start + EVERY - START) / (END - START), 0.0), 1.0)
        truth = (1 - weight) * before + weight * after
        column = int(np.argmin(l1_distances(truth[:, None], snapshot.topic_word)[0]))
        followers.append(snapshot.topic_ids[column])
        if start >= END:
            topic = snapshot.topic_word[:, column]
            after_the_drift.append((np.abs(topic - after).sum(), np.abs(topic - before).sum()))
        if len(followers) > 1:  # the refresh that ends the burn-in announces every topic as born
            events += snapshot.events
    assert len(followers) >= 6 and len(set(followers)) == 1, followers  # one id all along
    topic = followers[0]
    on_it = [e["type"] for e in events if e["topic"] == topic]
    assert not {"birth", "death", "found", "lost"} & set(on_it), on_it
    if half_life is not None:
        assert "change" in on_it, on_it
        to_after, to_before = np.mean(after_the_drift, axis=0)  # over the refreshes since it ended
        assert to_after < 0.5 * to_before  # it followed its subject
