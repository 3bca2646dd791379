"""learn_many on raw text encodes ASCII texts in one compiled pass (streamtopics.text.batch_encoder); the
model must end exactly where learn_one, one document at a time, takes it."""

import gzip
import json

import numpy as np
import pytest
from suite_helpers import DATA  # beside this file (conftest.py)

from streamtopics import StreamingTopicModel
from streamtopics.text.documents import key_hash
from streamtopics.text.tokenizer import Tokenizer
from streamtopics.text.batch_encoder import TextBatchEncoder
from streamtopics.text.vocabulary import Vocabulary

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


def test_the_last_text_ends_at_the_end_of_the_buffer():
    """The kernel must not read the byte after the buffer: here a letter that would make the
    last word "apples"."""
    from streamtopics.text.batch_encoder import _encode
    encoder = TextBatchEncoder(Tokenizer(), Vocabulary(["apple"]))
    data = np.frombuffer(b"apple\napple" + b"s", np.uint8)[:11]
    out = _encode(data, np.array([0, 6, 12]), encoder.slots, encoder.letters, encoder.offsets, encoder.ids, 3)
    assert out[2].tolist() == [1.0, 1.0] and out[3].tolist() == [0.0, 0.0]


def _interleaved(posts, repeat_keys: int | None = None):
    """The posts with the edge cases spread among them (rejections mid-chunk, texts the encoder
    leaves to the per-document path) and, with ``repeat_keys``, only that many distinct keys."""
    texts, keys = posts
    n = len(texts) - len(EDGE_CASES)
    order = list(range(n))
    for j, edge in enumerate(range(n, len(texts))):
        order.insert(137 * (j + 1) + j, edge)
    keys = [keys[d] if repeat_keys is None or d >= n else keys[d % repeat_keys] for d in order]
    return [texts[d] for d in order], keys


def test_a_full_reservoir_keeps_the_smallest_key_hashes_of_the_accepted_documents(posts):
    """Once full, a segment offers the reservoir and the excerpts only the hashes below the
    excerpts' bound: with repeated keys (equal hashes) and rejections among the documents, both
    still hold what one at a time gives, the bottom-k of the accepted documents' key hashes."""
    texts, keys = zip(*[(t, k) for t, k in zip(*_interleaved(posts, repeat_keys=1200)) if isinstance(t, str)])
    texts, keys = list(texts), list(keys)  # text only (non-ASCII among it): the reference below tokenizes it
    tokenizer = Tokenizer()
    vocabulary = Vocabulary.from_document_counts((tokenizer.count(t) for t in posts[0][:1000]), 2000)
    settings = {"reservoir_size": 150, "batch_size": 700}
    batched, one_by_one = (StreamingTopicModel(10, vocabulary, **settings) for _ in range(2))
    batched.learn_many(texts, keys)
    for text, key in zip(texts, keys):
        one_by_one.learn_one(text, key)
    buffered = [(m.ingest.stats.n_docs, len(m.ingest.pending)) for m in (batched, one_by_one)]
    assert buffered[0] == buffered[1] and buffered[0][1] < 700  # the kernel ran at the same documents
    got, expected = _state(batched), _state(one_by_one)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1:] == expected[1:]

    def known_tokens(text):
        return sum(c for w, c in tokenizer.count(text).items() if w in vocabulary.index)

    accepted = [key_hash(k) for t, k in zip(texts, keys) if known_tokens(t) >= 2]
    assert len(accepted) > 10 * 150 and len(set(accepted)) < len(accepted)  # the test has repeats to keep
    assert [h for _, _, h in batched.ingest.reservoir.items()] == sorted(accepted)[:150]
    assert sorted(h for h, _, _ in batched.ingest.excerpts.items()) == sorted(set(accepted))[:150]


@pytest.mark.parametrize("settings", [{"refresh_every": 700, "batch_size": 300},  # segments end at refreshes
                                      {"refresh_every_stream_seconds": 900.0, "half_life": 20_000.0,
                                       "half_life_unit": "stream"}])  # every document checked, dated
def test_learn_many_refreshes_at_the_documents_learn_one_does(posts, settings):
    texts, keys = _interleaved(posts)
    texts, keys = texts[:2200], keys[:2200]
    times = [1000.0 + 3 * d - 500 * (d % 97 == 0) for d in range(len(texts))]  # some go back in time
    vocabulary = Vocabulary.from_document_counts((Tokenizer().count(t) for t in posts[0][:1000]), 1500)
    common = {"refine_iterations": 2, "reservoir_size": 400, **settings}
    batched, one_by_one = (StreamingTopicModel(8, vocabulary, **common) for _ in range(2))
    batched.learn_many(texts, keys, times)
    for text, key, t in zip(texts, keys, times):
        one_by_one.learn_one(text, key, stream_time=t)
    records = [(r["version"], r["documents_seen"], r["stream_time"]) for r in batched.history.records]
    assert records == [(r["version"], r["documents_seen"], r["stream_time"]) for r in one_by_one.history.records]
    assert len(records) >= 2
    if "refresh_every" in settings:  # plain reference: every 700 accepted documents
        assert [seen for _, seen, _ in records] == [700 * (v + 1) for v in range(len(records))]
    np.testing.assert_array_equal(batched.snapshot.topic_word, one_by_one.snapshot.topic_word)
    np.testing.assert_array_equal(batched.statistics().packed, one_by_one.statistics().packed)
    assert batched.ingest.stream_time == one_by_one.ingest.stream_time == max(times)


def test_learn_many_reports_the_rejections_of_one_at_a_time_in_order(posts):
    texts, keys = _interleaved(posts)
    vocabulary = Vocabulary.from_document_counts((Tokenizer().count(t) for t in posts[0][:1000]), 1500)
    seen = {"batched": [], "one_by_one": []}

    def recorder(name):
        return lambda rejection, document, key: seen[name].append((rejection, id(document), key))

    batched = StreamingTopicModel(8, vocabulary, on_reject=recorder("batched"))
    one_by_one = StreamingTopicModel(8, vocabulary, on_reject=recorder("one_by_one"))
    batched.learn_many(texts, keys)
    for text, key in zip(texts, keys):
        one_by_one.learn_one(text, key)
    assert seen["batched"] == seen["one_by_one"]
    assert {r.reason for r, _, _ in seen["batched"]} >= {"empty", "no_known_words", "too_short"}
