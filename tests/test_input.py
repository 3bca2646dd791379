"""Text to counts and bad input: every malformed document is counted with a reason, never
raised out of the stream, and never touches the statistics."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel, Tokenizer, Vocabulary, ingest
from streamtopics.text.documents import DocumentBatch, key_hash

WORDS = ["apple", "pear", "plum", "goal", "match", "team"]


def fresh_model(**options):
    rejected = []
    model = StreamingTopicModel(2, vocabulary=WORDS, anchor_min_df=1,
                                on_reject=lambda r, doc, key: rejected.append((r.reason, key)), **options)
    return model, rejected


def test_tokenizer_lowercases_drops_stop_words_and_short_tokens():
    tokens = Tokenizer().tokenize("The CAT sat on a mat; the cat's café 42 times.")
    assert tokens == ["cat", "sat", "mat", "cat", "café", "times"]
    assert Tokenizer(stop_words=None, min_length=1).tokenize("a b") == ["a", "b"]


def test_vocabulary_from_warmup_is_top_words_by_document_frequency():
    vocab = Vocabulary.from_document_counts([{"b": 1, "a": 5}, {"a": 1, "c": 1}, {"b": 2, "c": 3}], size=2, min_df=2)
    assert vocab.words == ["a", "b"]  # all three have df 2: alphabetical
    with pytest.raises(ValueError):
        Vocabulary(["x", "x"])


def test_vocabulary_file(tmp_path):
    (tmp_path / "v.txt").write_text("apple\n\npear\n", encoding="utf-8")
    model = StreamingTopicModel(2, vocabulary=tmp_path / "v.txt")
    assert model.vocabulary.words == ["apple", "pear"]


def test_all_input_forms_give_the_same_statistics():
    forms = [
        "apple pear apple plum",
        b"apple pear apple plum",
        ["apple", "pear", "apple", "plum"],
        {"apple": 2, "pear": 1, "plum": 1},
    ]
    packed = []
    for form in forms:
        model, _ = fresh_model()
        model.learn_one(form, key="same")
        packed.append(model.statistics().packed.copy())
    indexed, _ = fresh_model()
    indexed.learn_many(sp.csr_matrix(np.array([[2.0, 1, 1, 0, 0, 0]])), keys=["same"])
    packed.append(indexed.statistics().packed)
    for other in packed[1:]:
        np.testing.assert_array_equal(other, packed[0])


def test_out_of_vocabulary_tokens_are_counted():
    model, _ = fresh_model()
    model.learn_one("apple pear banana banana kiwi")
    assert model.oov_tokens == 3
    assert model.documents_absorbed == 1


@pytest.mark.parametrize("document, reason", [
    ("", "empty"),
    ("the of and", "empty"),  # only stop words
    ("apple", "too_short"),
    ({"apple": 1}, "too_short"),
    ("banana kiwi mango", "no_known_words"),
    (b"\xff\xfe apple pear", "undecodable"),
    (["apple", 3, "pear"], "non_string_token"),
    (["apple", None], "non_string_token"),
    ({"apple": float("nan"), "pear": 2}, "invalid_count"),
    ({"apple": -1, "pear": 2}, "invalid_count"),
    ({"apple": math.inf, "pear": 2}, "invalid_count"),
    ({"apple": "two"}, "invalid_count"),
    ({3: 2}, "non_string_token"),
    (12345, "unsupported_type"),
    (None, "unsupported_type"),
])
def test_bad_documents_are_rejected_with_a_reason(document, reason):
    model, rejected = fresh_model()
    model.learn_one("apple pear plum")
    before = model.statistics().packed.copy()
    model.learn_one(document, key="bad")
    model.learn_one("goal match team")
    assert model.rejections == {reason: 1}
    assert rejected == [(reason, "bad")]
    assert model.documents_absorbed == 2
    stats = model.statistics()
    assert np.isfinite(stats.packed).all()
    reference, _ = fresh_model()
    reference.learn_many(["apple pear plum", "goal match team"])
    np.testing.assert_array_equal(stats.packed, reference.statistics().packed)
    assert not np.array_equal(before, stats.packed)


def test_bad_pre_indexed_rows_are_rejected():
    model, rejected = fresh_model()
    rows = sp.csr_matrix(np.array([[1.0, 1, 0, 0, 0, 0], [np.nan, 2, 0, 0, 0, 0], [-1.0, 3, 0, 0, 0, 0]]))
    model.learn_many(rows)
    assert model.rejections == {"invalid_count": 2}
    assert model.documents_absorbed == 1


def test_oversized_text_is_truncated_and_counted():
    model, _ = fresh_model(max_text_chars=20)
    model.learn_one("apple pear plum " * 1000)
    assert model.documents_truncated == 1
    assert model.statistics().word_counts.sum() == 3  # "apple pear plum " is 16 chars; "appl" is dropped


def test_refresh_before_enough_data_raises_a_clear_error():
    model = StreamingTopicModel(3, vocabulary=WORDS)
    with pytest.raises(RuntimeError, match="no documents"):
        model.refresh()
    model.learn_one("apple pear")
    with pytest.raises(ValueError, match="candidate anchors"):
        model.refresh()


def test_key_hash_is_stable_across_types():
    assert key_hash("doc-1") == key_hash(b"doc-1")
    assert key_hash(17) == key_hash("17")
    assert key_hash("doc-1") != key_hash("doc-2")
    with pytest.raises(TypeError):
        key_hash(1.5)


def test_automatic_refresh_of_a_young_stream_does_not_stop_it():
    model = StreamingTopicModel(3, vocabulary=WORDS, refresh_every=2)
    model.learn_many(["apple pear", "apple pear", "goal match"])  # too few candidate anchors for 3 topics
    assert "skipped" in model.last_refresh and model.snapshot is None
    assert model.documents_absorbed == 3


def test_model_pickles_and_keeps_learning_identically():
    import pickle

    model = StreamingTopicModel(2, vocabulary=WORDS, anchor_min_df=1)
    model.learn_many(["apple pear plum", "goal match team"] * 5)
    model.refresh()
    clone = pickle.loads(pickle.dumps(model))
    for m in (model, clone):
        m.learn_many(["apple plum", "team goal"])
    np.testing.assert_array_equal(clone.statistics().packed, model.statistics().packed)
    assert clone.refresh().to_json() == model.refresh().to_json()


def test_words_admitted_after_the_snapshot_are_ignored_by_inference():
    model = StreamingTopicModel(2, warmup_documents=20, anchor_min_df=2, max_vocabulary=20, admit_df=3)
    model.learn_many(["apple pear plum", "goal match team"] * 10)
    model.refresh()
    for _ in range(10):
        model.learn_one({"zebra": 2, "apple": 1, "giraffe": 1})
    assert "zebra" in model.vocabulary and "zebra" not in model.snapshot.vocabulary
    mixture = model.infer([{"zebra": 3, "giraffe": 2}, {"apple": 2, "zebra": 5}])
    np.testing.assert_allclose(mixture[0], model.snapshot.prevalence / model.snapshot.prevalence.sum())
    assert abs(mixture[1].sum() - 1) < 1e-9


def hostile_pre_indexed_rows(n, seed=0):
    """``n`` rows over 6 words, about a third of them bad: an id out of range, unsorted or repeated
    ids, a NaN, negative or huge count, a single token; zero counts inside good rows."""
    rng = np.random.default_rng(seed)
    rows, reasons = [], []
    for _ in range(n):
        ids = np.sort(rng.choice(6, size=rng.integers(2, 6), replace=False)).astype(np.int32)
        counts = rng.integers(0, 4, size=ids.size).astype(float)
        counts[0] = 2.0
        reason = None
        kind = rng.integers(0, 10)
        if kind == 0:
            ids[-1], reason = 6, "invalid_word_id"
        elif kind == 1:
            ids[[0, -1]], reason = ids[[-1, 0]], "invalid_word_id"
        elif kind == 2:
            counts[-1], reason = rng.choice([np.nan, -1.0, np.inf, 2e9]), "invalid_count"
        elif kind == 3:
            ids, counts, reason = ids[:1], np.array([1.0]), "too_short"
        rows.append((ids, counts))
        reasons.append(reason)
    return rows, reasons


@pytest.mark.parametrize("scan", [3, 256])
def test_pre_indexed_rows_are_absorbed_as_the_good_ones_alone(scan, monkeypatch):
    monkeypatch.setattr(ingest, "INDEXED_SCAN", scan)  # 3: a step checks too few rows and looks further
    rows, reasons = hostile_pre_indexed_rows(120)
    indptr = np.concatenate(([0], np.cumsum([ids.size for ids, _ in rows])))
    batch = DocumentBatch(indptr, np.concatenate([i for i, _ in rows]), np.concatenate([c for _, c in rows]),
                          np.array([key_hash(d) for d in range(len(rows))], np.uint64))
    times = [1000.0 + d for d in range(len(rows))]
    # small buffers and a refresh due every 7 accepted documents: segments and limits cut the batch
    model, rejected = fresh_model(batch_size=5, refresh_every=7, reservoir_size=40)
    model.learn_many(batch, stream_times=times)
    good = [d for d, reason in enumerate(reasons) if reason is None]
    assert rejected == [(reason, key_hash(d)) for d, reason in enumerate(reasons) if reason is not None]
    assert model.documents_absorbed == len(good)
    reference, _ = fresh_model(reservoir_size=40)  # the good rows, zero counts dropped, one at a time
    for d in good:
        ids, counts = rows[d]
        keep = counts > 0
        single = DocumentBatch(np.array([0, keep.sum()]), ids[keep], counts[keep], np.array([key_hash(d)], np.uint64))
        reference.learn_many(single, stream_times=[times[d]])
    np.testing.assert_array_equal(model.statistics().packed, reference.statistics().packed)
    assert model.ingest.stream_time == times[-1]
    kept, expected = model.ingest.reservoir.items(), reference.ingest.reservoir.items()
    assert [k for _, _, k in kept] == [k for _, _, k in expected]
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(kept, expected))
