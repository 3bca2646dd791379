"""What a snapshot says about its topics beyond the matrix (issue 16): labels, coherence and
representative documents, in events, JSON, state files and the console."""

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest

from consumers.cli.console import event_lines, topic_table
from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.refresh.describe import (EXCERPT_CHARS, DocumentExcerpts, document_pool, excerpt_of, pool_mixtures,
                                          representative_documents)
from streamtopics.text.documents import key_hash
from streamtopics.refresh.labels import topic_labels
from streamtopics.state import read_state, write_state

THEMES = [["apple", "pear", "plum", "cherry", "fruit", "juice", "orchard", "peel"],
          ["rocket", "comet", "orbit", "planet", "space", "star", "launch", "moon"],
          ["goal", "match", "team", "score", "player", "coach", "league", "referee"]]
COMMON = ["the", "and", "with", "about"]
WORDS = sorted(set(itertools.chain(*THEMES, COMMON)))


def texts(n, seed=0):
    """``(key, text)`` pairs: each text mostly from one theme, with common words."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        theme = THEMES[i % len(THEMES)]
        words = list(rng.choice(theme, size=int(rng.integers(6, 14)))) + list(rng.choice(COMMON, size=3))
        rng.shuffle(words)
        out.append((f"doc-{i}", "  ".join(words).capitalize() + "."))
    return out


def fitted(n=600, **settings):
    options = dict(vocabulary=WORDS, anchor_min_df=5, reservoir_size=120, refine_iterations=5)
    model = StreamingTopicModel(3, **{**options, **settings})
    documents = texts(n)
    for key, text in documents:
        model.learn_one(text, key=key)
    return model, dict(documents)


@pytest.fixture(scope="module")
def model_and_texts():
    model, documents = fitted(burn_in=0)  # the first snapshot announces its topics
    model.refresh()
    return model, documents


def test_labels_are_each_topics_first_words_by_relevance_and_distinct(model_and_texts):
    model, _ = model_and_texts
    snapshot = model.snapshot
    top = snapshot.top_words(2, relevance=0.6)
    assert snapshot.labels == ["_".join(w for w, _ in top[t]) for t in snapshot.topic_ids]
    assert len(set(snapshot.labels)) == snapshot.n_topics
    for topic, theme in zip(snapshot.topic_ids, snapshot.labels):
        assert snapshot.label(topic) == theme
    # each label names one theme: its words come from the same theme
    assert sorted(next(i for i, t in enumerate(THEMES) if set(label.split("_")) <= set(t))
                  for label in snapshot.labels) == [0, 1, 2]


def test_topics_sharing_their_first_words_get_a_third_and_then_their_id():
    assert topic_labels([["a", "b", "c"], ["a", "b", "d"], ["e", "f", "g"]], [0, 1, 2]) == ["a_b_c", "a_b_d", "e_f"]
    assert topic_labels([["a", "b", "c"], ["a", "b", "c"], ["b", "a"]], [5, 9, 2]) == ["a_b_c_5", "a_b_c_9", "b_a"]
    assert topic_labels([[]], [3]) == ["topic_3"]


def test_events_carry_the_label(model_and_texts):
    model, _ = model_and_texts
    snapshot = model.snapshot
    births = [e for e in snapshot.events if e["type"] == "birth"]
    assert len(births) == 3 and all(e["label"] == snapshot.label(e["topic"]) for e in births)
    assert all(list(e)[:3] == ["type", "topic", "label"] for e in births)


def test_a_dead_topic_keeps_the_label_it_had_when_last_seen():
    model, _ = fitted(death_grace=0, burn_in=0, birth_grace=0)
    first = model.refresh()
    lost = first.topic_ids[0]
    words = [w for w, _ in first.top_words(8, relevance=0.6)[lost]]
    label = first.label(lost)
    # the next refresh sees a snapshot where topic `lost` is gone
    from streamtopics.refresh.recovery import recover_topics

    view = model.statistics().view()
    anchors = np.array([model.vocabulary[w] for w in first.anchors[1:]])
    gone = model.lineage.publish(recover_topics(view, anchors), model.vocabulary, view.n_docs)
    deaths = [e for e in gone.events if e["type"] == "death"]
    assert deaths == [{"type": "death", "topic": lost, "label": label, "anchor": first.anchors[0], "words": words}]
    assert lost not in model.lineage.labels  # dead for good: not remembered any more


def test_snapshot_json_carries_label_coherence_and_representatives(model_and_texts):
    model, _ = model_and_texts
    snapshot = model.snapshot
    for full in (True, False):
        data = json.loads(snapshot.to_json(None if full else 5))
        for k, entry in enumerate(data["topics"]):
            assert entry["label"] == snapshot.labels[k]
            assert entry["coherence"] == pytest.approx(snapshot.coherence[k])
            assert entry["representatives"] == snapshot.representatives[entry["id"]]
    again = TopicSnapshot.from_json(snapshot.to_json())
    assert again.labels == snapshot.labels and again.representatives == snapshot.representatives
    np.testing.assert_array_equal(again.coherence, snapshot.coherence)


def test_a_snapshot_file_written_before_labels_loads_with_labels(model_and_texts, tmp_path):
    model, _ = model_and_texts
    data = model.snapshot.to_dict()
    for entry in data["topics"]:
        for name in ("label", "coherence", "representatives"):
            del entry[name]
    old = TopicSnapshot.from_dict(data)
    assert old.labels == model.snapshot.labels  # computed on load
    assert old.coherence is None and old.representatives is None
    assert all(entry["coherence"] is None and entry["representatives"] is None for entry in old.to_dict()["topics"])


def _reference_npmi(documents: list[set], words: list[str]) -> float:
    """Mean NPMI over the pairs of ``words``, P the fraction of ``documents`` holding them."""
    n = len(documents)
    values = []
    for a, b in itertools.combinations(words, 2):
        p_a = sum(a in d for d in documents) / n
        p_b = sum(b in d for d in documents) / n
        p_ab = sum(a in d and b in d for d in documents) / n
        if p_ab == 0:
            values.append(-1.0)
        elif p_ab == 1:
            values.append(1.0)
        else:
            values.append(math.log(p_ab / (p_a * p_b)) / -math.log(p_ab))
    return sum(values) / len(values)


def test_coherence_is_the_npmi_of_the_top_ten_words_over_the_kept_documents(model_and_texts):
    model, _ = model_and_texts
    snapshot = model.snapshot
    vocabulary = model.vocabulary.words
    kept = [{vocabulary[i] for i in ids} for ids, _, _ in model.reservoir.items()]
    assert len(kept) == 120  # the bounded sample, not the 600 documents seen
    for k in range(snapshot.n_topics):
        top = [vocabulary[i] for i in np.argsort(-snapshot.topic_word[:, k], kind="stable")[:10]]
        assert snapshot.coherence[k] == pytest.approx(_reference_npmi(kept, top), abs=1e-12)


def test_representatives_are_the_kept_documents_that_match_the_topic_best(model_and_texts):
    model, documents = model_and_texts
    snapshot = model.snapshot
    items = model.reservoir.items()
    vocabulary = model.vocabulary.words
    kept = [{vocabulary[i]: c for i, c in zip(ids, counts)} for ids, counts, _ in items]
    weights = model.infer(kept)  # the reference: every kept document's mixture
    texts_by_hash = {key_hash(key): (key, text) for key, text in documents.items()}
    for k, topic in enumerate(snapshot.topic_ids):
        shown = snapshot.representatives[topic]
        assert len(shown) == 3
        best = np.sort(weights[:, k])[::-1]
        np.testing.assert_allclose([d["weight"] for d in shown], best[:3], atol=2e-3)
        for document in shown:
            key, text = document["key"], documents[document["key"]]
            assert document["text"] == excerpt_of(text) == " ".join(text.split())[:EXCERPT_CHARS]
            assert texts_by_hash[key_hash(key)][0] == key
            counts = model.tokenizer.count(text)
            top = sorted((w for w in counts if w in WORDS), key=lambda w: (-counts[w], WORDS.index(w)))
            assert document["words"] == top[:10]


def test_representatives_are_ranked_among_a_pool_evenly_spaced_over_the_kept_documents(model_and_texts):
    model, _ = model_and_texts
    batch = model.ingest.reservoir_batch()
    pool, _ = document_pool(batch, model.snapshot.topic_word.shape[0], pool=40)
    shown = representative_documents(model.snapshot, pool, pool_mixtures(model.snapshot, pool), per_topic=120)
    pool_keys = {int(h) for h in batch.keys[::3]}  # 120 kept documents, every third
    vocabulary = model.vocabulary.words
    words_of = {key_hash: [vocabulary[i] for i in ids[np.lexsort((ids, -counts))][:10]]
                for ids, counts, key_hash in model.reservoir.items()}
    for documents in shown.values():
        assert len(documents) == 40
        assert sorted(map(tuple, (d["words"] for d in documents))) == sorted(tuple(words_of[h]) for h in pool_keys)


def test_documents_without_text_are_shown_by_their_words():
    model = StreamingTopicModel(3, vocabulary=WORDS, anchor_min_df=5, reservoir_size=60, refine_iterations=3)
    for key, text in texts(300):
        model.learn_one(text.lower().replace(".", "").split(), key=key)  # tokens: no text to keep
    snapshot = model.refresh()
    assert len(model.ingest.excerpts) == 0
    for shown in snapshot.representatives.values():
        assert all(d["key"] is None and "text" not in d and d["words"] for d in shown)


@pytest.mark.parametrize("settings", [{}, {"half_life": 100.0}], ids=["uniform", "recent"])
def test_excerpts_are_kept_for_exactly_the_reservoirs_documents(settings):
    model, documents = fitted(n=900, **settings)
    model.refresh()
    reservoir = {h for _, _, h in model.reservoir.items()}
    excerpts = model.ingest.excerpts
    assert len(excerpts) == len(reservoir) == 120
    assert {h for h, _, _ in excerpts.items()} == reservoir
    assert all(text == excerpt_of(documents[key]) for _, key, text in excerpts.items())


def test_excerpt_store_is_bounded_and_keeps_the_smallest_hashes():
    rng = np.random.default_rng(3)
    hashes = rng.integers(0, 2**63, size=500).tolist()
    uniform, recent = DocumentExcerpts(50, "uniform"), DocumentExcerpts(50, "recent")
    for h in hashes:
        for store in (uniform, recent):
            store.add(h, f"k{h}", f"text {h} " + "x" * 400)
    assert sorted(h for h, _, _ in uniform.items()) == sorted(hashes)[:50]
    assert [h for h, _, _ in recent.items()] == hashes[-50:]
    assert all(len(text) == EXCERPT_CHARS for _, _, text in uniform.items())
    assert excerpt_of(b"caf\xc3\xa9  au\n lait") == "café au lait" and excerpt_of({"a": 1}) is None
    spaced = "w" * (EXCERPT_CHARS - 1) + " tail"  # the cut falls on a space: not kept, so a reload keeps it as is
    assert excerpt_of(spaced) == "w" * (EXCERPT_CHARS - 1) == excerpt_of(excerpt_of(spaced))
    merged = DocumentExcerpts(50, "uniform").merge(DocumentExcerpts.from_items(50, "uniform", uniform.items()[:25]))
    assert merged.merge(DocumentExcerpts.from_items(50, "uniform", uniform.items()[25:])).items() == uniform.items()


def test_an_excerpt_made_once_is_not_served_for_a_document_offered_again():
    """An excerpt is made when first read and kept; a recent store offered the same key hash again
    keeps the new text, and documents added after a read get theirs."""
    store = DocumentExcerpts(3, "recent")
    store.add(1, "a", "first   text")
    store.add(2, "b", "second")
    assert store.items() == [(1, "a", "first text"), (2, "b", "second")]
    store.add(1, "a", "first\n again")
    store.add(3, "c", "third")
    assert store.items() == [(2, "b", "second"), (1, "a", "first again"), (3, "c", "third")] == store.items()
    assert store.get(1) == ("a", "first again") and store.get(4) is None


@pytest.mark.parametrize("kind", ["uniform", "recent"])
def test_excerpts_saved_in_the_reservoirs_order_or_with_their_hashes(kind):
    """Excerpts of exactly the reservoir's documents are saved in its order without their hashes;
    any other excerpts (another set, or recent ones in another order) with them. Both come back."""
    rng = np.random.default_rng(4)
    hashes = rng.integers(0, 2**63, size=30).tolist()
    excerpts = DocumentExcerpts(50, kind)
    for h in hashes:
        excerpts.add(h, f"k{h}", f"text {h}")
    reservoir_order = sorted(hashes) if kind == "uniform" else hashes
    cases = [(reservoir_order, dict), (reservoir_order[:-1], list), (reservoir_order + [7], list)]
    if kind == "recent":
        cases.append((hashes[::-1], list))
    for keys, form in cases:
        state = json.loads(json.dumps(excerpts.to_state(np.array(keys, np.uint64))))
        assert isinstance(state, form)
        back = DocumentExcerpts.from_state(50, kind, state, np.array(keys, np.uint64))
        assert sorted(back.items()) == sorted(excerpts.items())
        if kind == "recent":
            assert back.items() == excerpts.items()


def test_warm_up_documents_keep_their_text_through_a_save(tmp_path):
    model = StreamingTopicModel(3, warmup_documents=200, vocabulary_size=40, anchor_min_df=5,
                                reservoir_size=500, refine_iterations=3)
    documents = texts(300)
    for key, text in documents[:150]:
        model.learn_one(text, key=key)
    model.save(tmp_path / "warm.state")
    model = StreamingTopicModel.load(tmp_path / "warm.state")  # still warming up
    for key, text in documents[150:]:
        model.learn_one(text, key=key)
    model.refresh()
    assert {key for _, key, _ in model.ingest.excerpts.items()} == {key for key, _ in documents}


def test_text_excerpts_change_no_statistic_and_no_topic(model_and_texts):
    model, documents = model_and_texts
    indexed = StreamingTopicModel(3, vocabulary=WORDS, anchor_min_df=5, reservoir_size=120, refine_iterations=5)
    batch, _ = model.encode_many(list(documents.values()))
    indexed.learn_many(batch, keys=list(documents))
    ours, theirs = model.statistics().state_dict(), indexed.statistics().state_dict()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name])
    snapshot = indexed.refresh()
    np.testing.assert_array_equal(snapshot.topic_word, model.snapshot.topic_word)
    assert snapshot.labels == model.snapshot.labels
    np.testing.assert_array_equal(snapshot.coherence, model.snapshot.coherence)
    assert all(d["key"] is None and "text" not in d for shown in snapshot.representatives.values() for d in shown)


def test_save_and_load_keep_labels_coherence_representatives_and_excerpts(model_and_texts, tmp_path):
    model, _ = model_and_texts
    model.save(tmp_path / "m.state")
    loaded = StreamingTopicModel.load(tmp_path / "m.state")
    assert loaded.snapshot.labels == model.snapshot.labels
    np.testing.assert_array_equal(loaded.snapshot.coherence, model.snapshot.coherence)
    assert loaded.snapshot.representatives == model.snapshot.representatives
    assert sorted(loaded.ingest.excerpts.items()) == sorted(model.ingest.excerpts.items())
    assert "in_reservoir_order" in read_state(tmp_path / "m.state")[1]["excerpts"]  # no hashes twice
    assert loaded.lineage.labels == model.lineage.labels
    assert loaded.history.records == model.history.records


def test_a_state_saved_before_labels_and_excerpts_loads(model_and_texts, tmp_path):
    model, _ = model_and_texts
    model.save(tmp_path / "m.state")
    arrays, meta = read_state(tmp_path / "m.state")
    for name in ("labels", "coherence", "representatives"):
        del meta["snapshot"][name]
    for name in ("labels", "excerpts"):
        del meta[name]
    for record in meta["history"]["records"]:
        del record["labels"], record["words"]
    write_state(tmp_path / "old.state", arrays, meta)
    old = StreamingTopicModel.load(tmp_path / "old.state")
    assert old.snapshot.labels == model.snapshot.labels
    assert old.snapshot.coherence is None and old.snapshot.representatives is None
    assert len(old.ingest.excerpts) == 0 and old.lineage.labels == {}
    assert old.topics_over_time()["label"].isna().all()
    again = old.refresh()  # and it goes on: the next snapshot has everything
    assert again.coherence is not None and again.representatives is not None


def test_an_anchor_is_shown_only_among_its_topics_words():
    words = [f"w{i}" for i in range(60)]
    topic_word = np.full((60, 2), 1e-4)
    topic_word[:30, 0] = np.linspace(2, 1, 30)  # topic 0: words 0-29, its anchor w0 the most probable
    topic_word[30:, 1] = np.linspace(2, 1, 30)  # topic 1: words 30-59; its anchor w5 is not one of them
    topic_word /= topic_word.sum(axis=0)
    snapshot = TopicSnapshot(1, 100, words, topic_word, ["w0", "w5"], [3, 8], np.array([0.5, 0.5]), np.ones(2))
    assert snapshot.shown_anchors() == {3: "w0", 8: None}
    rows = {int(row.split()[0]): row.split() for row in topic_table(snapshot, 4)[1:]}
    assert rows[3][3] == "w0" and rows[8][3] == "-"


def test_console_table_and_event_lines_show_labels(model_and_texts):
    model, _ = model_and_texts
    snapshot = model.snapshot
    rows = topic_table(snapshot, 4)
    assert rows[0].split() == ["id", "share", "label", "anchor", "top", "words"]
    for row in rows[1:]:
        topic, share, label = row.split()[:3]
        assert label == snapshot.label(int(topic)) and share.endswith("%")
    lines = event_lines(snapshot)
    assert all(f"topic {t:<4} {snapshot.label(t)}  anchor" in line for t, line in zip(snapshot.topic_ids, lines))
    dead = dataclasses.replace(snapshot, labels=None,
                               events=[{"type": "death", "topic": 7, "label": "old_words"}, {"type": "death", "topic": 8}])
    assert event_lines(dead) == ["  - death   topics 7 (old_words), 8"]
    change = {"type": "change", "topic": 7, "distance": 0.6, "words_in": ["b"], "words_out": ["a"]}
    changed = dataclasses.replace(snapshot, labels=None, events=[
        {**change, "anchor_before": "x", "anchor_after": "y"}, {**change, "anchor_before": "x", "anchor_after": "x"}])
    moved, kept = event_lines(changed)
    assert "anchor 'x' -> 'y', moved 0.60" in moved and "anchor 'x', moved 0.60" in kept and moved.endswith("(+b -a)")
