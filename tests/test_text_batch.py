"""learn_many on raw text encodes ASCII texts in one compiled pass (streamtopics.text_batch); the
model must end exactly where learn_one, one document at a time, takes it."""

import gzip
import json

import numpy as np
import pytest
from suite_helpers import DATA  # beside this file (conftest.py)

from streamtopics import StreamingTopicModel
from streamtopics.text import Tokenizer
from streamtopics.text_batch import TextBatchEncoder
from streamtopics.vocabulary import Vocabulary

EDGE_CASES = ["", "the and of", "123 456 __ --", "naïve café résumé words", "Apple APPLE apple, apples!",
              b"bytes are decoded per document", ["token", "list"], {"counted": 2.0}, "x" * 40, "ab cd ef",
              "The\\nlast\\tline\\r\\nends"]


@pytest.fixture(scope="module")
def posts():
    corpus = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
    if not corpus.is_file():
        pytest.fail(f"corpus file {corpus} not found", pytrace=False)
    with gzip.open(corpus, "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for _, line in zip(range(3000), lines)]
    texts = [r["text"] for r in records] + EDGE_CASES
    return texts, [r["id"] for r in records] + [f"edge-{i}" for i in range(len(EDGE_CASES))]


def _state(model):
    ingest = model.ingest
    return (model.statistics().packed, dict(ingest.rejections), ingest.oov_tokens, ingest.documents_truncated,
            [(ids.tolist(), counts.tolist(), h) for ids, counts, h in ingest.reservoir.items()],
            ingest.excerpts.items())


@pytest.mark.parametrize("settings", [{"vocabulary_size": 3000, "warmup_documents": 500},  # warm-up inside
                                      {"vocabulary_size": 3000, "warmup_documents": 500, "max_text_chars": 300},
                                      {"max_vocabulary": 2000, "admit_df": 3, "warmup_documents": 300}])
def test_learn_many_ends_where_learn_one_one_at_a_time_does(posts, settings):
    texts, keys = posts
    batched, one_by_one = StreamingTopicModel(10, **settings), StreamingTopicModel(10, **settings)
    batched.learn_many(texts, keys)
    for text, key in zip(texts, keys):
        one_by_one.learn_one(text, key)
    got, expected = _state(batched), _state(one_by_one)
    np.testing.assert_array_equal(got[0], expected[0])  # bit-identical sums
    assert got[1:] == expected[1:] and got[1]["empty"] >= 3


def test_the_encoder_finds_what_the_tokenizer_and_the_vocabulary_find():
    tokenizer = Tokenizer()
    vocabulary = Vocabulary(["apple", "pear", "the", "naïve", "x1", "ab", "zebra"])  # a stop word, non-letters, short
    texts = ["The apple; the PEAR, pear-apple and zebras.", "naïve", "ab ab AB zebra", ""]
    texts = [t for t in texts if TextBatchEncoder.handles(t, 10_000)]
    out = TextBatchEncoder(tokenizer, vocabulary).encode(texts)
    for n, text in enumerate(texts):
        counts = tokenizer.count(text)
        known = sorted((vocabulary.index[w], float(c)) for w, c in counts.items() if w in vocabulary.index)
        ids, values = out.indices[out.indptr[n]:out.indptr[n + 1]], out.counts[out.indptr[n]:out.indptr[n + 1]]
        assert list(zip(ids.tolist(), values.tolist())) == known
        assert out.oov[n] == sum(c for w, c in counts.items() if w not in vocabulary.index)
        assert out.tokens[n] == sum(counts.values())
    assert not TextBatchEncoder.handles("naïve", 10_000) and not TextBatchEncoder.handles(b"x", 10_000)
