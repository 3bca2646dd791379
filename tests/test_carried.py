"""The carried refinement (streamtopics/refresh/carried.py): its bookkeeping against plain
references, the refreshes it runs, and a resumed run equal to the uninterrupted one."""

import numpy as np
import pytest

from streamtopics import StreamingTopicModel
from streamtopics.evaluation import matched_l1
from streamtopics.refresh import steps
from streamtopics.refresh.carried import (CarriedRefinement, _carried_entries, _match, document_fingerprints,
                                          held_out_mask)
from streamtopics.refresh.collapsed import CollapsedShares
from streamtopics.synthetic import sample_documents, topic_proportions
from streamtopics.text.documents import DocumentBatch


def random_batch(rng, n_docs=40, n_words=30):
    pairs = []
    for _ in range(n_docs):
        ids = np.sort(rng.choice(n_words, size=rng.integers(1, 8), replace=False))
        pairs.append((ids, rng.integers(1, 4, size=ids.size).astype(float)))
    return DocumentBatch.from_pairs(pairs, rng.integers(0, 2**63, size=n_docs, dtype=np.uint64))


def matched_in_order(previous_keys, previous_prints, keys, prints):
    """Reference: each document takes the first unused previous one with its key and print."""
    used, pairs = set(), []
    for d, identity in enumerate(zip(keys, prints)):
        for i, other in enumerate(zip(previous_keys, previous_prints)):
            if i not in used and other == identity:
                used.add(i)
                pairs.append((d, i))
                break
    return pairs


def test_match_pairs_equal_documents_in_order_duplicates_too():
    previous_keys = np.array([5, 7, 5, 9, 5], np.uint64)
    previous_prints = np.array([1, 2, 1, 3, 4], np.uint64)
    keys = np.array([9, 5, 5, 5, 8, 7], np.uint64)
    prints = np.array([3, 1, 1, 1, 0, 2], np.uint64)
    found, previous = _match(previous_keys, previous_prints, keys, prints)
    expected = matched_in_order(previous_keys, previous_prints, keys, prints)
    assert list(zip(found.tolist(), previous.tolist())) == expected == [(0, 3), (1, 0), (2, 2), (5, 1)]
    rng = np.random.default_rng(0)
    for _ in range(200):  # few distinct values: many duplicates, empty sides too
        previous_size, size = rng.integers(0, 30, size=2)
        sides = [rng.integers(0, 4, size=n).astype(np.uint64) for n in (previous_size, previous_size, size, size)]
        found, previous = _match(*sides)
        assert list(zip(found.tolist(), previous.tolist())) == matched_in_order(*sides)


def test_carried_entries_and_fingerprints():
    rng = np.random.default_rng(0)
    batch = random_batch(rng)
    ids = rng.integers(0, 9, size=(batch.indices.size, 4)).astype(np.int16)
    weights = rng.random((batch.indices.size, 4)).astype(np.float32)
    documents = np.array([3, 0, 17, 3])
    expected = [e for d in documents for e in range(batch.indptr[d], batch.indptr[d + 1])]
    got_ids, got_weights = _carried_entries(batch.indptr, documents, ids, weights, len(expected) + 5)
    assert got_ids.shape == (len(expected) + 5, 4) and got_ids.dtype == ids.dtype
    assert np.array_equal(got_ids[:len(expected)], ids[expected])
    assert np.array_equal(got_weights[:len(expected)], weights[expected])
    prints = document_fingerprints(batch)
    assert np.array_equal(prints, document_fingerprints(batch.select(np.arange(len(batch)))))
    same = [(batch.indices[a:b].tobytes(), batch.counts[a:b].tobytes()) for a, b in zip(batch.indptr, batch.indptr[1:])]
    for i in range(len(batch)):
        for j in range(len(batch)):
            assert (prints[i] == prints[j]) == (same[i] == same[j])
    changed = DocumentBatch(batch.indptr, batch.indices, batch.counts.copy(), batch.keys)
    changed.counts[batch.indptr[2]] += 1  # one count of document 2
    assert np.flatnonzero(document_fingerprints(changed) != prints).tolist() == [2]


def test_held_out_by_key_hash_or_by_position_without_keys():
    keys = np.arange(100, dtype=np.uint64) * np.uint64(7)
    assert np.array_equal(held_out_mask(keys), keys % np.uint64(10) == 0)
    assert held_out_mask(np.zeros(25, np.uint64)).tolist() == [i % 10 == 0 for i in range(25)]


def test_a_tenth_of_a_repeated_documents_copies_is_held_out_not_all_of_them():
    rng = np.random.default_rng(0)
    sentences = np.array([10, 23, 35, 47, 52, 68, 71, 89], np.uint64)  # 10 is a multiple of 10
    keys = sentences[rng.integers(0, sentences.size, 600)]
    held = held_out_mask(keys)
    for key in sentences:
        copies = np.flatnonzero(keys == key)
        # the reference: the copies in order, the j-th held where key + j is a multiple of 10
        expected = [(int(key) + j) % 10 == 0 for j in range(copies.size)]
        assert held[copies].tolist() == expected
        assert 0 < held[copies].sum() <= copies.size // 10 + 1


def test_a_sweep_from_a_document_leaves_the_ones_before_and_keeps_the_counts_summed():
    rng = np.random.default_rng(1)
    batch = random_batch(rng, n_docs=60)
    topics = rng.dirichlet(np.ones(30), size=4).T
    shares = CollapsedShares.seeded(batch, topics)
    first = 25
    before_ids, before_weights = shares.topic_ids.copy(), shares.weights.copy()
    shares.sweep(0.01, 0.01, first=first)
    head = slice(0, batch.indptr[first])
    assert np.array_equal(shares.topic_ids[head], before_ids[head])
    assert np.array_equal(shares.weights[head], before_weights[head])
    assert not np.array_equal(shares.weights[batch.indptr[first]:], before_weights[batch.indptr[first]:])
    # reference sums over every entry's shares
    word_topic, doc_topic = np.zeros((30, 4)), np.zeros((60, 4))
    for d in range(60):
        for e in range(batch.indptr[d], batch.indptr[d + 1]):
            for k, weight in zip(shares.topic_ids[e], shares.weights[e]):
                word_topic[batch.indices[e], k] += batch.counts[e] * weight
                doc_topic[d, k] += batch.counts[e] * weight
    np.testing.assert_allclose(shares.word_topic, word_topic, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(shares.doc_topic, doc_topic, rtol=1e-9, atol=1e-9)
    again = CollapsedShares.carried(batch, shares.topic_ids, shares.weights, 4, topics)
    np.testing.assert_allclose(again.doc_topic, doc_topic, rtol=1e-12, atol=1e-12)
    # the training log-likelihood per token, computed plainly
    phi = shares.topic_word(0.01)
    theta = (shares.doc_topic + 0.003) / (shares.doc_topic + 0.003).sum(axis=1, keepdims=True)
    total = sum(batch.counts[e] * np.log(phi[batch.indices[e]] @ theta[d])
                for d in range(60) for e in range(batch.indptr[d], batch.indptr[d + 1]))
    assert shares.log_likelihood(0.003, 0.01) == pytest.approx(total / batch.counts.sum(), rel=1e-12)


def test_relabelled_kept_shares_and_placed_new_ones_hold_the_counts_summed_afresh():
    rng = np.random.default_rng(2)
    batch, more = random_batch(rng, n_docs=50), random_batch(rng, n_docs=20)
    topics = rng.dirichlet(np.ones(30), size=5).T
    kept = CollapsedShares.seeded(batch, topics)
    kept.sweep(0.01, 0.01)
    column_of = np.array([3, 0, 4, 1, 2])
    both = DocumentBatch.concatenate([batch, more])
    ids = np.full((both.indices.size, kept.topic_ids.shape[1]), -1, kept.topic_ids.dtype)
    weights = np.zeros((both.indices.size, kept.topic_ids.shape[1]), np.float32)
    ids[:batch.indices.size], weights[:batch.indices.size] = kept.topic_ids, kept.weights
    shares = CollapsedShares.carried(both, ids, weights, 5, topics, placed=50)
    shares.relabel(column_of)
    assert np.array_equal(shares.topic_ids[:batch.indices.size], column_of[kept.topic_ids])
    assert (shares.topic_ids[batch.indices.size:] == -1).all()  # not placed yet: not relabelled
    shares.place_rest(topics)
    alone = CollapsedShares.seeded(more, topics)
    assert np.array_equal(shares.topic_ids[batch.indices.size:], alone.topic_ids)
    assert np.array_equal(shares.weights[batch.indices.size:], alone.weights)
    afresh = CollapsedShares.carried(both, shares.topic_ids, shares.weights, 5, topics)
    assert np.array_equal(shares.word_topic, afresh.word_topic)  # each cell's terms in the same order
    assert np.array_equal(shares.doc_topic, afresh.doc_topic)


def sparse_topic_stream(n, seed=0):
    """Documents of 6 topics over 120 words, each topic drawn from Dirichlet(0.1) (sparse, as in text,
    but without anchor words, so the anchors do not explain the sums and the refinement runs:
    streamtopics/refresh/separability.py), as texts."""
    truth = np.random.default_rng(seed).dirichlet(np.full(120, 0.1), 6).T
    counts = sample_documents(truth, topic_proportions(n, 6, alpha=0.2, seed=seed), 40, seed=seed)
    words = ["word" + chr(97 + j // 26) + chr(97 + j % 26) for j in range(120)]
    texts = [" ".join(w for j, c in zip(row.indices, row.data) for w in [words[j]] * int(c)) for row in counts]
    return truth, words, texts


SETTINGS = dict(reservoir_size=800, anchor_min_df=5, refresh_every=None, refine_carry=True)


def stream_refreshes(model, texts, every=400):
    sources = []
    for start in range(0, len(texts), every):
        model.learn_many(texts[start:start + every])
        model.refresh()
        sources.append(model.last_refresh["refinement_source"])
    return sources


def test_refreshes_carry_the_shares_and_restarts_challenge_them_on_schedule():
    truth, words, texts = sparse_topic_stream(4000)
    model = StreamingTopicModel(6, words, **SETTINGS)
    sources = stream_refreshes(model, texts)  # at 400, 800, ..., 4,000 documents
    assert sources[0] == "restart"
    # the refresh at 800 restarts (too few of its documents were carried); challenges at 1.25x the
    # documents of the last restart: 1,200 -> 1,600 -> 2,000 -> 2,800 -> 3,600; carried between
    challenged = ["challenge" in s or "over a restart" in s for s in sources]
    assert sources[1] == "restart" and [i for i, c in enumerate(challenged) if c] == [2, 3, 4, 6, 8]
    assert all(sources[i] == "carried" for i in (5, 7, 9)), sources
    fitted = model.lineage.carried
    assert fitted.keys.size == fitted.indptr.size - 1 and fitted.topic_ids.shape == fitted.weights.shape
    np.testing.assert_allclose(fitted.weights.sum(axis=1), 1.0, rtol=1e-6)
    reference = StreamingTopicModel(6, words, **{**SETTINGS, "refine_carry": False})
    assert set(stream_refreshes(reference, texts)) == {"restart"}
    # as close to the truth as the restarts (0.108 against 0.119 when written; on a separable stream,
    # 0.30 against 0.19 when the background column was not held at the recovery's)
    assert matched_l1(truth, model.snapshot.topic_word) < matched_l1(truth, reference.snapshot.topic_word) + 0.03


def test_carried_from_the_end_of_the_burn_in_and_restarted_once_the_reservoir_is_full():
    _, words, texts = sparse_topic_stream(3600, seed=3)
    model = StreamingTopicModel(6, words, **{**SETTINGS, "reservoir_size": 2800})
    reference = StreamingTopicModel(6, words, **{**SETTINGS, "reservoir_size": 2800, "refine_carry": False})
    sources, same, holding, forming = [], [], [], []
    for start in range(0, len(texts), 400):  # refreshes at 400, 800, ..., 3,600 documents
        for m in (model, reference):
            m.learn_many(texts[start:start + 400])
            m.refresh()
        sources.append(model.last_refresh["refinement_source"])
        same.append(model.snapshot.to_json() == reference.snapshot.to_json())
        holding.append(model.lineage.carried.keys is not None)
        forming.append(model.snapshot.forming)
    settled = forming.index(False)  # the refresh that ends the burn-in
    assert 0 < settled <= 3, forming
    # until then every refresh is the restart without carrying; the next one restarts and keeps its shares
    assert all(same[:settled + 1]) and not any(holding[:settled + 1]), (sources, same, holding)
    assert all(holding[settled + 1:]) and sources[settled + 1] == "restart"
    challenged = ["challenge" in s or "over a restart" in s for s in sources]
    # carried while the reservoir fills (with challenges at 1.25x the documents of the last restart)
    assert sources[5] in ("carried", "carried (kept over a restart)") or challenged[5], sources
    assert "carried" in sources[settled + 2:6], sources
    # full at 2,800: a restart whatever the carried state, carried on at 3,200
    assert sources[6] == "restart" and sources[7] == "carried", sources
    assert not model.lineage.carried.filling


def test_ids_first_carries_the_burn_ins_refinement_through_the_fill_unchallenged():
    _, words, texts = sparse_topic_stream(3600, seed=3)
    model = StreamingTopicModel(6, words, **{**SETTINGS, "reservoir_size": 2800, "refine_fill_restarts": False})
    sources, holding, forming = [], [], []
    for start in range(0, len(texts), 400):  # refreshes at 400, 800, ..., 3,600 documents
        model.learn_many(texts[start:start + 400])
        model.refresh()
        sources.append(model.last_refresh["refinement_source"])
        holding.append(model.lineage.carried.keys is not None)
        forming.append(model.snapshot.forming)
    settled = forming.index(False)  # the refresh that ends the burn-in
    assert 0 < settled <= 3, forming
    # every burn-in refresh restarts from the seed and keeps its shares; the next one carries them on
    assert sources[:settled + 1] == ["restart"] * (settled + 1) and all(holding), (sources, holding)
    # carried through the fill without challenges (the defaults challenge at 1.25x the last restart's
    # documents); full at 2,800: a restart, carried on at 3,200 and challenged at 3,600 (1.25 x 2,800)
    assert sources[settled + 1:6] == ["carried"] * (5 - settled), sources
    assert sources[6:8] == ["restart", "carried"] and ("challenge" in sources[8] or "over a restart" in sources[8])


def test_the_background_keeps_the_recoverys_distribution(monkeypatch):
    _, words, texts = sparse_topic_stream(2000, seed=4)
    model = StreamingTopicModel(6, words, **SETTINGS)
    captured = {}
    recover = steps.recover

    def spy(*args, **kwargs):
        captured["recovery"], warm = recover(*args, **kwargs)
        return captured["recovery"], warm

    monkeypatch.setattr(steps, "recover", spy)
    stream_refreshes(model, texts)
    assert model.snapshot.background is not None
    np.testing.assert_array_equal(model.snapshot.background, captured["recovery"].background)


def test_a_resumed_run_refines_as_the_uninterrupted_one(tmp_path):
    _, words, texts = sparse_topic_stream(3600, seed=1)
    uninterrupted = StreamingTopicModel(6, words, **SETTINGS)
    stream_refreshes(uninterrupted, texts[:2400])
    uninterrupted.save(tmp_path / "model.state")
    resumed = StreamingTopicModel.load(tmp_path / "model.state")
    for model in (uninterrupted, resumed):
        sources = stream_refreshes(model, texts[2400:])
    assert "carried" in sources
    assert resumed.snapshot.to_json() == uninterrupted.snapshot.to_json()
    for name in ("keys", "fingerprints", "indptr", "topic_ids", "weights"):
        assert np.array_equal(getattr(resumed.lineage.carried, name), getattr(uninterrupted.lineage.carried, name))


def test_the_lineage_hands_the_carried_refinement_on():
    _, words, texts = sparse_topic_stream(1200, seed=2)
    model = StreamingTopicModel(6, words, **SETTINGS)
    stream_refreshes(model, texts)
    other = StreamingTopicModel(6, words, **SETTINGS)
    other.adopt_lineage(model.lineage.export())
    assert other.lineage.carried is model.lineage.carried
    other.adopt_lineage(type(model.lineage.export())(None, None, 0))
    assert other.lineage.carried.keys is None


def test_an_empty_state_stays_empty_through_a_checkpoint():
    state = CarriedRefinement()
    assert state.state_dict() == ({}, None)
    state.load_state_dict({}, None)
    assert state.keys is None and not state.holds(3)


def test_a_state_kept_while_the_reservoir_filled_says_so_through_a_checkpoint():
    _, words, texts = sparse_topic_stream(2400, seed=3)
    model = StreamingTopicModel(6, words, **{**SETTINGS, "reservoir_size": 4000})
    stream_refreshes(model, texts)
    arrays, meta = model.lineage.carried.state_dict()
    assert meta["filling"] is True
    again = CarriedRefinement()
    again.load_state_dict(arrays, meta)
    assert again.filling
    again.load_state_dict(arrays, {k: v for k, v in meta.items() if k != "filling"})  # a file from before
    assert not again.filling
