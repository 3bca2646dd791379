"""Issue 14's engine features: the background topic, the document-frequency ceiling, relevance
ranking of displayed words, and topic identities that hold (shared anchor, top words, grace)."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel, Tokenizer, TopicSnapshot
from streamtopics.refresh.alignment import align_topics, top_word_overlap
from streamtopics.evaluation import matched_l1, relevance, top_word_ids
from streamtopics.inference import infer_mixtures
from streamtopics.refresh.anchor_selection import select_anchors
from streamtopics.synthetic import semi_synthetic, separable_topics

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
V, K, BOILERPLATE = 400, 8, 5
WORDS = [f"w{i}" for i in range(V)] + [f"bp{i}" for i in range(BOILERPLATE)]


@pytest.fixture(scope="module")
def truth():
    return separable_topics(V, K, anchor_mass=0.05, seed=11)


def with_boilerplate(truth, n_docs, seed, share=0.3, length=150):
    """Documents from the topics plus words common to all of them: ``share`` of every document's
    tokens drawn from one fixed distribution over BOILERPLATE extra words (think "writes", "said")."""
    topical, _ = semi_synthetic(truth.topic_word, n_docs, alpha=0.1, doc_length=int(length * (1 - share)), seed=seed)
    rng = np.random.default_rng(seed + 1)
    common = rng.multinomial(int(length * share), np.linspace(2, 1, BOILERPLATE) / np.linspace(2, 1, BOILERPLATE).sum(),
                             size=n_docs).astype(float)
    return sp.hstack([topical, sp.csr_matrix(common)]).tocsr()


def fitted(truth, **settings):
    model = StreamingTopicModel(K, vocabulary=WORDS, seed=0, **settings)
    model.learn_many(with_boilerplate(truth, 20000, seed=4))
    return model, model.refresh()


@pytest.fixture(scope="module")
def newsgroups():
    """4,000 posts of the 20 Newsgroups training split (bodies, as the quality benchmark reads them)."""
    path = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
    if not path.exists():
        pytest.fail(f"corpus not found: {path}", pytrace=False)
    texts = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["split"] == "train":
                texts.append(row["text"].partition("\n\n")[2])
            if len(texts) == 4000:
                break
    return texts


def newsgroup_model(texts, **settings):
    """Attributions and addresses kept (``strip_mail=False``), as the quality benchmark reads the
    bodies: their "writes", "article", "edu" are the common words the background is for."""
    model = StreamingTopicModel(10, vocabulary_size=3000, warmup_documents=len(texts), seed=0,
                                tokenizer=Tokenizer(strip_mail=False), **settings)
    model.learn_many(texts)
    return model, model.refresh()


def test_background_takes_the_words_common_to_all_topics_on_real_text(newsgroups):
    _, plain = newsgroup_model(newsgroups, background_topic=False, refine_iterations=0)
    model, snapshot = newsgroup_model(newsgroups, refine_iterations=0)

    def most_shared(s):
        top = [w for words in s.top_words(8).values() for w, _ in words]
        return max(top.count(w) for w in set(top))

    assert most_shared(plain) >= 8  # the failure the background is for: "writes" in every topic
    assert most_shared(snapshot) <= 4
    assert snapshot.background_share > 0.3
    common = [snapshot.vocabulary[i] for i in np.argsort(-snapshot.background)[:10]]
    assert {"writes", "article"} <= set(common)


def test_background_on_a_separable_stream_takes_nothing(truth):
    docs, _ = semi_synthetic(truth.topic_word, 20000, alpha=0.1, doc_length=150, seed=2)
    results = {}
    for background in (True, False):
        model = StreamingTopicModel(K, vocabulary=WORDS[:V], background_topic=background, refine_iterations=0)
        model.learn_many(docs)
        results[background] = model.refresh()
    assert results[True].background_share < 0.01
    assert matched_l1(truth.topic_word, results[True].topic_word) < matched_l1(
        truth.topic_word, results[False].topic_word) + 0.01


def test_inference_explains_documents_by_topics_and_background(newsgroups):
    model, snapshot = newsgroup_model(newsgroups)
    document = newsgroups[7]
    mixture = model.transform_one(document)
    assert sum(mixture.values()) == pytest.approx(1.0)
    columns, prior = snapshot.mixture_components()
    assert columns.shape == (len(snapshot.vocabulary), 11) and prior.sum() == pytest.approx(1.0)
    # reference: multiplicative KL updates by hand over topics + background from the prior
    batch, _ = model.encode_many([document])
    counts = np.zeros(columns.shape[0])
    np.add.at(counts, batch.indices, batch.counts)
    theta = prior.copy()
    for _ in range(3000):
        p = columns @ theta
        theta = theta * (columns.T @ np.divide(counts, p, out=np.zeros_like(p), where=p > 0)) / counts.sum()
    got = np.array([mixture[t] for t in snapshot.topic_ids])
    full = infer_mixtures(batch, columns, prior)[0]
    np.testing.assert_allclose(got, full[:10] / full[:10].sum(), rtol=1e-12)  # the background's weight dropped
    # as good a fit as the converged reference (two near-equal topics can share a document
    # either way along a flat ridge, so the likelihood is compared, not the mixture)
    assert counts @ np.log(columns @ full) >= counts @ np.log(columns @ theta) - 1e-3 * counts.sum()
    # the background changes the answer: without it, the mixtures of some of the first posts move
    # by more than 0.05 in L1 (up to 0.33 among the first 60; 0.05 among the first 20)
    changes = []
    for text in newsgroups[:60]:
        batch, _ = model.encode_many([text])
        with_background = infer_mixtures(batch, columns, prior)[0][:10]
        topics_only = infer_mixtures(batch, snapshot.topic_word, snapshot.prevalence)[0]
        changes.append(np.abs(topics_only - with_background / with_background.sum()).sum())
    assert max(changes) > 0.05


def test_background_survives_save_load_and_json(newsgroups, tmp_path):
    model, snapshot = newsgroup_model(newsgroups[:1500])
    restored = StreamingTopicModel.load(model.save(tmp_path / "m.state"))
    np.testing.assert_array_equal(restored.snapshot.background, snapshot.background)
    assert restored.snapshot.background_share == snapshot.background_share
    again = TopicSnapshot.from_json(snapshot.to_json())
    np.testing.assert_array_equal(again.background, snapshot.background)
    assert again.background_share == snapshot.background_share
    assert restored.transform_one(newsgroups[3]) == model.transform_one(newsgroups[3])


def test_max_df_gives_the_most_frequent_words_to_the_background(truth):
    model, snapshot = fitted(truth, max_df=0.5)
    df = np.asarray(model.statistics().view().document_frequency)
    above = np.flatnonzero(df > 0.5 * model.statistics().view().n_docs)
    assert above.size and set(above) >= set(range(V, V + 2))  # the two most common boilerplate words
    assert np.all(snapshot.topic_word[above] == 0)
    assert not set(snapshot.anchors) & {WORDS[i] for i in above}
    with pytest.raises(ValueError):
        StreamingTopicModel(K, vocabulary=WORDS, max_df=0.5, background_topic=False)


def test_the_candidate_cap_counts_only_words_under_the_ceiling(truth):
    """max_df applies before the cap: with a cap no larger than the number of words above the
    ceiling, the cap used to be filled by them alone and then emptied by the ceiling ("0 words
    occur in at least N documents", found on NIPS with max_df=0.1)."""
    model, _ = fitted(truth, max_df=0.5)
    view = model.statistics().view()
    df = np.asarray(view.document_frequency)
    order = np.argsort(-df, kind="stable")
    ceiling = float(df[order[2 * K]])  # the 2 K most frequent words lie above it
    above = np.flatnonzero(df > ceiling)
    assert above.size >= 2 * K
    anchors = select_anchors(view, K, 5, above.size, max_df=ceiling)
    assert len(anchors) == K and not set(anchors) & set(above)
    under = np.argsort(-np.where(df <= ceiling, df, -1), kind="stable")[:above.size]
    assert set(anchors) <= set(under)  # the cap's words are the most frequent under the ceiling


def test_relevance_ranking_against_the_formula():
    topic_word = np.array([[0.5, 0.5], [0.3, 0.1], [0.2, 0.0], [0.0, 0.4]])
    snapshot = TopicSnapshot(1, 10, ["common", "a", "b", "c"], topic_word, ["a", "c"], [0, 1],
                             np.array([0.5, 0.5]), np.array([0.1, 0.1]))
    assert [w for w, _ in snapshot.top_words(3)[0]] == ["common", "a", "b"]
    marginal = topic_word @ np.array([0.5, 0.5])
    with np.errstate(divide="ignore"):
        score = 0.2 * np.log(topic_word[:, 0]) + 0.8 * np.log(topic_word[:, 0] / marginal)
    expected = [snapshot.vocabulary[i] for i in np.argsort(-score, kind="stable")[:3]]
    ranked = snapshot.top_words(3, relevance=0.2)[0]
    assert [w for w, _ in ranked] == expected == ["b", "a", "common"]
    assert dict(ranked)["b"] == 0.2  # values stay p(w|z)


def test_a_snapshot_ranks_its_words_once_per_weight(monkeypatch):
    """Labels, events and history ask a snapshot for the same ranking: it is computed once per
    relevance weight (again only for a longer list), and every list is the plain stable sort's."""
    rng = np.random.default_rng(4)
    topic_word = np.round(rng.dirichlet(np.full(60, 0.2), 5).T, 3)  # rounded: ties, and zeros
    topic_word /= topic_word.sum(axis=0)
    snapshot = TopicSnapshot(1, 10, [f"w{i}" for i in range(60)], topic_word, ["w0"] * 5, [3, 1, 4, 0, 2],
                             np.full(5, 0.2), np.full(5, 0.1), labels=list("abcde"))  # labels given: no ranking yet
    calls = []

    def counted_relevance(topic_word, word_distribution, weight):
        calls.append(weight)
        return relevance(topic_word, word_distribution, weight)

    monkeypatch.setattr("streamtopics.evaluation.relevance", counted_relevance)  # top_words imports it when called
    marginal = topic_word @ np.full(5, 0.2)
    for weight in (None, 0.6, 0.3):
        with np.errstate(divide="ignore"):
            score = topic_word if weight is None else np.where(
                topic_word > 0, weight * np.log(topic_word) + (1 - weight) * np.log(topic_word / marginal[:, None]), -np.inf)
        for n in (3, 10, 5, 20, 2, 80):
            words = snapshot.top_words(n, weight)
            for k, topic in enumerate(snapshot.topic_ids):
                expected = [f"w{i}" for i in np.argsort(-score[:, k], kind="stable")[:n]]
                assert [w for w, _ in words[topic]] == expected, (weight, n, topic)
    assert calls == [0.6] * 2 + [0.3] * 2  # 3 (ranks RANKED_WORDS = 20), then 80 (all 60) words


# ------------------------------------------------------------------------------- identities
def columns(*tops, n_words=30):
    """Topics as columns: each puts most of its mass on its listed words."""
    out = np.full((n_words, len(tops)), 0.1 / n_words)
    for k, words in enumerate(tops):
        out[list(words), k] += 0.9 / len(words)
    return out / out.sum(axis=0)


def test_a_topic_keeps_its_id_on_the_same_anchor_however_far_it_moved():
    old = columns(range(0, 10), range(10, 20), range(20, 30), n_words=40)
    new = columns(range(30, 40), range(10, 20), range(20, 30), n_words=40)  # topic 7's words all changed
    plain = align_topics(old, [7, 8, 9], new, next_id=10)
    assert plain.topic_ids == [10, 8, 9] and plain.births == [10] and plain.deaths == [7]
    anchored = align_topics(old, [7, 8, 9], new, 10, previous_anchors=["a", "b", "c"], current_anchors=["a", "b", "c"])
    assert anchored.topic_ids == [7, 8, 9] and not anchored.births and not anchored.deaths


def test_the_words_overrule_an_anchor_whose_topic_moved_away():
    old = columns(range(0, 10), range(10, 20), range(20, 30), n_words=40)
    # topic 7's words now stand on the anchor "d"; its old anchor "a" holds words no topic had
    new = columns(range(30, 40), range(0, 10), range(10, 20), n_words=40)
    aligned = align_topics(old, [7, 8, 9], new, 10, previous_anchors=["a", "b", "c"], current_anchors=["a", "d", "b"])
    assert aligned.topic_ids == [10, 7, 8] and aligned.births == [10] and aligned.deaths == [9]
    # and from the other side: the anchor "a" now holds the words of topic 6, which lost its anchor
    old = columns(range(30, 40), range(0, 10), n_words=40)
    new = columns(range(0, 10), range(30, 40), n_words=40)
    aligned = align_topics(old, [5, 6], new, 10, previous_anchors=["a", "x"], current_anchors=["a", "y"])
    assert aligned.topic_ids == [6, 5] and not aligned.births and not aligned.deaths


def test_a_topic_keeps_its_id_on_most_of_its_top_words():
    old = columns(range(0, 10), range(10, 20), range(20, 30))
    new = columns(list(range(0, 6)) + [10, 20, 21, 22], range(10, 20), range(20, 30))
    overlap = top_word_overlap(old, new, 10)
    assert overlap[0, 0] >= 0.5 and overlap.shape == (3, 3)
    assert align_topics(old, [1, 2, 3], new, 4, match_threshold=0.01, min_overlap=1.01).topic_ids == [4, 2, 3]
    kept = align_topics(old, [1, 2, 3], new, 4, match_threshold=0.01, min_overlap=0.5)
    assert kept.topic_ids[0] == 1  # mutual nearest and 6 of 10 top words shared


def test_a_topic_that_returns_within_the_grace_keeps_its_id_without_events(truth):
    docs = with_boilerplate(truth, 6000, seed=9)
    model = StreamingTopicModel(K, vocabulary=WORDS, refine_iterations=0, death_grace=1, burn_in=0)
    model.learn_many(docs)
    first = model.refresh()
    lost = first.topic_ids[0]
    # hide topic `lost` from one snapshot by publishing a recovery without its column
    from streamtopics.refresh.recovery import recover_topics

    view = model.statistics().view()
    anchors = np.array([model.vocabulary[w] for w in first.anchors])
    keep = np.arange(1, K)
    partial = recover_topics(view, anchors[keep], background=True)
    gone = model.lineage.publish(partial, model.vocabulary, view.n_docs)
    assert lost not in gone.topic_ids and not [e for e in gone.events if e["type"] in ("birth", "death")]
    back = model.refresh()
    assert lost in back.topic_ids and not [e for e in back.events if e["type"] in ("birth", "death")]
    model.lineage.publish(partial, model.vocabulary, view.n_docs)
    model.lineage.publish(partial, model.vocabulary, view.n_docs)
    death = [e for e in model.snapshot.events if e["type"] == "death"]
    assert death == [{"type": "death", "topic": lost, "label": back.label(lost), "anchor": first.anchors[0],
                      "words": [w for w, _ in back.top_words(8, relevance=0.6)[lost]]}]


def _grace_model(truth, **settings):
    """A model refreshed once; events from its first snapshot unless the test sets a burn-in."""
    model = StreamingTopicModel(K, vocabulary=WORDS, refine_iterations=0, **{"burn_in": 0, **settings})
    model.learn_many(with_boilerplate(truth, 6000, seed=9))
    first = model.refresh()
    view = model.statistics().view()
    anchors = np.array([model.vocabulary[w] for w in first.anchors])
    return model, first, view, anchors


def _publish_with_anchors(model, view, anchors):
    from streamtopics.refresh.recovery import recover_topics

    return model.lineage.publish(recover_topics(view, anchors, background=True), model.vocabulary, view.n_docs)


def birth_and_death_events(snapshot):
    return [e for e in snapshot.events if e["type"] in ("birth", "death")]


def test_a_topic_that_flickers_for_one_refresh_makes_no_event(truth):
    model, first, view, anchors = _grace_model(truth, birth_grace=1, death_grace=0)
    # one refresh whose topic 0 is anchored elsewhere: a new topic in place of an old one (the
    # most frequent other word whose topic the alignment does not take for an old one: replacing
    # an anchor can hand the old topic's mass to the newcomer, which then is the old topic)
    from streamtopics.refresh.recovery import recover_topics

    other = next(i for i in np.argsort(-np.asarray(view.document_frequency))
                 if i not in anchors and WORDS[i].startswith("w")
                 and align_topics(first.topic_word, first.topic_ids,
                                  recover_topics(view, np.concatenate([[i], anchors[1:]]), background=True).topic_word,
                                  100, previous_anchors=first.anchors,
                                  current_anchors=[WORDS[i]] + first.anchors[1:]).births)
    flicker = _publish_with_anchors(model, view, np.concatenate([[other], anchors[1:]]))
    newcomer = next(t for t in flicker.topic_ids if t not in first.topic_ids)
    assert not [e for e in flicker.events if e["type"] == "birth"]  # not yet announced
    again = model.refresh()  # the old topics again: the newcomer vanished within its grace
    assert newcomer not in again.topic_ids
    assert all(e["topic"] != newcomer for e in birth_and_death_events(again))
    # the same newcomer lasting a second refresh is announced then, with its words
    model, first, view, anchors = _grace_model(truth, birth_grace=1, death_grace=0)
    changed = np.concatenate([[other], anchors[1:]])
    one = _publish_with_anchors(model, view, changed)
    two = _publish_with_anchors(model, view, changed)
    newcomer = next(t for t in one.topic_ids if t not in first.topic_ids)
    births = [e for e in two.events if e["type"] == "birth"]
    assert [e["topic"] for e in births] == [newcomer]
    assert births[0]["words"] == [w for w, _ in two.top_words(8, relevance=0.6)[newcomer]]


def test_a_new_topic_is_born_only_once_it_holds_still():
    from types import SimpleNamespace

    from streamtopics.config import ModelConfig
    from streamtopics.refresh.lineage import RefreshState
    from streamtopics.text.vocabulary import Vocabulary

    vocabulary = Vocabulary([f"w{i}" for i in range(40)])
    state = RefreshState(ModelConfig(n_topics=4, burn_in=0, birth_grace=1, death_grace=0))

    def publish(topic_word, anchors):
        k = topic_word.shape[1]
        result = SimpleNamespace(anchors=np.array(anchors), topic_word=topic_word, coefficients=np.ones((40, k)) / k,
                                 prevalence=np.ones(k) / k, alpha=np.ones(k), background=None, background_share=0.0)
        snapshot = state.publish(result, vocabulary, 100)
        return snapshot, [e["topic"] for e in snapshot.events if e["type"] == "birth"]

    old = [range(0, 10), range(10, 20), range(20, 25)]
    first, _ = publish(columns(*old, range(25, 30), n_words=40), [0, 10, 20, 25])
    # topic 3 gives way to a newcomer on words 30-39, which then moves by L1 0.58 (a change event's
    # size) on the same anchor: it keeps its id but stays tentative, and is announced once it holds still
    appeared, _ = publish(columns(*old, range(30, 40), n_words=40), [0, 10, 20, 30])
    newcomer = appeared.topic_ids[3]
    assert newcomer not in first.topic_ids
    moving = columns(*old, range(30, 35), n_words=40)
    moved, births = publish(moving, [0, 10, 20, 30])
    assert moved.topic_ids[3] == newcomer and births == [] and moved.tentative == [newcomer]
    held, births = publish(moving, [0, 10, 20, 30])
    assert births == [newcomer] and held.tentative == []


def test_grace_state_survives_save_and_load(truth, tmp_path):
    model, first, view, anchors = _grace_model(truth, death_grace=2)
    _publish_with_anchors(model, view, anchors[1:])  # topic 0 missing, within its grace
    restored = StreamingTopicModel.load(model.save(tmp_path / "grace.state"))
    assert restored.lineage.missing.keys() == model.lineage.missing.keys() == {first.topic_ids[0]}
    for m in (model, restored):
        _publish_with_anchors(m, view, anchors[1:])
    expected, got = (_publish_with_anchors(m, view, anchors[1:]) for m in (model, restored))
    assert birth_and_death_events(got) == birth_and_death_events(expected)
    assert [e["topic"] for e in birth_and_death_events(got) if e["type"] == "death"] == [first.topic_ids[0]]


def test_a_topic_that_returns_after_its_death_takes_its_id_back(truth, tmp_path):
    model, first, view, anchors = _grace_model(truth, death_grace=1, birth_grace=0)
    lost = first.topic_ids[0]
    for _ in range(2):  # missing for longer than its grace: dead
        gone = _publish_with_anchors(model, view, anchors[1:])
    assert [(e["type"], e["topic"]) for e in birth_and_death_events(gone)] == [("death", lost)]
    assert set(model.lineage.departed) == {lost} and not model.lineage.missing
    restored = StreamingTopicModel.load(model.save(tmp_path / "departed.state"))
    for m in (model, restored):  # anchored on its old word again: its id, a return, no birth
        back = _publish_with_anchors(m, view, anchors)
        assert back.topic_ids == first.topic_ids and not birth_and_death_events(back)
        assert [(e["type"], e["topic"], e["anchor"]) for e in back.events if e["type"] != "change"] == [
            ("return", lost, first.anchors[0])]
        assert not m.lineage.departed


def test_departed_topics_are_remembered_one_per_topic_slot_the_most_recent(truth):
    model, first, view, anchors = _grace_model(truth, death_grace=0, birth_grace=0)
    frequent = [i for i in np.argsort(-np.asarray(view.document_frequency)) if i not in anchors]
    dead = []  # reference: every announced death, minus the topics that came back since
    for chosen in (anchors[7:], frequent[:K], frequent[K:2 * K], frequent[2 * K:3 * K]):
        snapshot = _publish_with_anchors(model, view, np.asarray(chosen))
        for event in snapshot.events:
            if event["type"] == "return":
                dead.remove(event["topic"])
            elif event["type"] == "death":
                dead.append(event["topic"])
    assert len(dead) > K and list(model.lineage.departed) == dead[-K:]


def _two_replaced(view, anchors, skip=0):
    """The anchors with the first two replaced by frequent other words (25% of K = 8 moved)."""
    others = [i for i in np.argsort(-np.asarray(view.document_frequency))
              if i not in anchors and WORDS[i].startswith("w")][skip:skip + 2]
    return np.concatenate([others, anchors[2:]])


def test_events_wait_for_the_burn_in_then_the_topics_present_are_announced(truth, tmp_path):
    model, first, view, anchors = _grace_model(truth, burn_in=3, death_grace=0)
    assert first.events == [] and first.forming  # the first topics still form
    moved = _publish_with_anchors(model, view, _two_replaced(view, anchors))  # 6 of 8 anchors held: forming
    assert moved.events == [] and moved.forming
    assert len([t for t in moved.topic_ids if t not in first.topic_ids]) == 2
    restored = StreamingTopicModel.load(model.save(tmp_path / "burn-in.state"))
    for m in (model, restored):  # every anchor held: the burn-in ends, the topics present are born
        settled = _publish_with_anchors(m, view, _two_replaced(view, anchors))
        assert not settled.forming
        assert [e["type"] for e in settled.events] == ["birth"] * K  # the two replaced ones never announced
        assert [e["topic"] for e in settled.events] == settled.topic_ids
        assert [e["anchor"] for e in settled.events] == settled.anchors
    after = _publish_with_anchors(model, view, anchors)  # after the burn-in, events as usual
    assert birth_and_death_events(after)


def test_without_a_burn_in_the_first_snapshot_announces_its_topics(truth):
    model, first, _, _ = _grace_model(truth, burn_in=0)
    assert [e["type"] for e in first.events] == ["birth"] * K and not first.forming


def test_the_burn_in_ends_after_its_refreshes_even_if_topics_keep_moving(truth):
    model, first, view, anchors = _grace_model(truth, burn_in=2, birth_grace=0, death_grace=0)
    assert first.forming and _publish_with_anchors(model, view, _two_replaced(view, anchors)).events == []
    last = _publish_with_anchors(model, view, _two_replaced(view, anchors, skip=2))  # still moving: over anyway
    assert [e["topic"] for e in birth_and_death_events(last)] == last.topic_ids
    assert model.lineage.burn_in_left is None and not last.forming
    again = _publish_with_anchors(model, view, anchors)  # past it: events at once
    events = birth_and_death_events(again)
    born, died = set(again.topic_ids) - set(last.topic_ids), set(last.topic_ids) - set(again.topic_ids)
    assert born and sorted(e["topic"] for e in events if e["type"] == "birth") == sorted(born)
    assert sorted(e["topic"] for e in events if e["type"] == "death") == sorted(died)

def test_top_word_overlap_equals_a_plain_stable_sort_reference_ties_included():
    def reference(previous, current, n):
        top_previous = np.argsort(-previous, axis=0, kind="stable")[:n].T
        top_current = np.argsort(-current, axis=0, kind="stable")[:n].T
        return np.array([[len(set(a) & set(b)) for b in top_current] for a in top_previous]) / n

    rng = np.random.default_rng(3)
    previous, current = rng.dirichlet(np.full(500, 0.05), 12).T, rng.dirichlet(np.full(500, 0.05), 9).T
    current[:, :4] = previous[:, :4]
    tied = np.zeros((30, 4))
    tied[:3, 0], tied[5:8, 1], tied[:, 2], tied[::2, 3] = 1, 0.5, 1, 1  # ties at and across the n-th place
    for a, b, n in ((previous, current, 10), (tied, tied[:, ::-1], 10), (tied, tied, 30), (previous, current, 1)):
        np.testing.assert_array_equal(top_word_overlap(a, b, n), reference(a, b, n))


def test_top_word_ids_are_a_stable_sorts_top_n():
    rng = np.random.default_rng(4)
    with np.errstate(divide="ignore"):
        scores = np.log(rng.dirichlet(np.full(300, 0.05), 7).T)  # many -inf: words a topic lacks
    tied = np.zeros((30, 3))
    tied[::2, 0], tied[:, 1], tied[5:8, 2] = 1, 1, 0.5
    for matrix in (scores, tied, -tied):
        for n in (0, 1, 10, matrix.shape[0]):
            np.testing.assert_array_equal(top_word_ids(matrix, n), np.argsort(-matrix, axis=0, kind="stable")[:n].T)
