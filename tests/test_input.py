"""Text to counts and bad input: every malformed document is counted with a reason, never
raised out of the stream, and never touches the statistics."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from streamtopics import StreamingTopicModel, Tokenizer, Vocabulary
from streamtopics.text.documents import key_hash

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
