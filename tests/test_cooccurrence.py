"""Co-occurrence sums against a plain numpy reference: exactness, order and batch independence,
merge, and bit-exact save/load."""

import numpy as np
import pytest

from streamtopics.statistics.cooccurrence import CooccurrenceStats
from streamtopics.text.documents import DocumentBatch, EncodedDocument


def random_documents(n_docs, n_words, seed):
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(n_docs):
        ids = np.unique(rng.integers(0, n_words, rng.integers(2, 30))).astype(np.int32)
        counts = rng.integers(1, 5, ids.size).astype(np.float64)
        if counts.sum() < 2:
            counts[0] = 2.0
        documents.append(EncodedDocument(ids, counts))
    return documents


def reference_sums(documents, n_words):
    """Q_sum = sum_d (H H^T - diag(H)) / (n (n - 1)), written the obvious way."""
    q = np.zeros((n_words, n_words))
    for doc in documents:
        h = np.zeros(n_words)
        h[doc.ids] = doc.counts
        n = h.sum()
        q += (np.outer(h, h) - np.diag(h)) / (n * (n - 1))
    return q


def absorb(documents, n_words, batch_size):
    stats = CooccurrenceStats(n_words)
    for start in range(0, len(documents), batch_size):
        chunk = documents[start : start + batch_size]
        stats.update(DocumentBatch.from_documents(chunk, list(range(len(chunk)))))
    return stats


def test_sums_equal_reference():
    docs = random_documents(300, 80, seed=1)
    stats = absorb(docs, 80, batch_size=64)
    q = reference_sums(docs, 80)
    np.testing.assert_allclose(stats.to_dense(), q, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stats.word_mass, q.sum(axis=1), rtol=1e-12)
    assert stats.n_docs == 300
    assert stats.to_dense().sum() == pytest.approx(300.0, rel=1e-12)  # each Q_d sums to 1
    h = np.zeros((300, 80))
    for d, doc in enumerate(docs):
        h[d, doc.ids] = doc.counts
    np.testing.assert_array_equal(stats.word_counts, h.sum(axis=0))
    np.testing.assert_array_equal(stats.document_frequency, (h > 0).sum(axis=0))


def test_batch_size_does_not_change_a_bit():
    docs = random_documents(200, 60, seed=2)
    one_by_one = absorb(docs, 60, batch_size=1)
    for batch_size in (7, 50, 200):
        np.testing.assert_array_equal(absorb(docs, 60, batch_size).packed, one_by_one.packed)


def test_sums_are_the_document_order_additions_to_the_bit():
    """Every cell is the float64 sum of its documents' terms added one by one in document order
    (the definition the kernel's batching, prefetching and register sums must keep), also with
    forgetting's per-document weights. Documents are long (more entries than the kernel's
    prefetch distance) and words repeat across documents so rows see many documents."""
    rng = np.random.default_rng(7)
    docs = []
    for _ in range(60):
        ids = np.unique(rng.zipf(1.3, 80) % 40).astype(np.int32)
        docs.append(EncodedDocument(ids, rng.integers(1, 4, ids.size).astype(np.float64)))
    weights = rng.uniform(0.5, 2.0, len(docs))
    for weighted in (False, True):
        q, mass = np.zeros((40, 40)), np.zeros(40)
        for doc, weight in zip(docs, weights if weighted else np.ones(len(docs))):
            n = doc.counts.sum()
            for a, (w, c) in enumerate(zip(doc.ids, doc.counts)):
                f = weight * c / (n * (n - 1.0))
                mass[w] += weight * c / n
                q[w, w] += f * (c - 1.0)
                for v, cv in zip(doc.ids[a + 1:], doc.counts[a + 1:]):
                    q[w, v] += f * cv
        for batch_size in (1, 13, 60):
            stats = CooccurrenceStats(40)
            for start in range(0, len(docs), batch_size):
                part = docs[start:start + batch_size]
                chunk = DocumentBatch.from_documents(part, [0] * len(part))
                stats._accumulate(chunk, weights[start:start + len(part)] if weighted else np.ones(len(part)))
            np.testing.assert_array_equal(np.triu(stats.to_dense()), np.triu(q))
            np.testing.assert_array_equal(stats.word_mass, mass)


def test_order_independent_to_rounding():
    docs = random_documents(200, 60, seed=3)
    shuffled = [docs[i] for i in np.random.default_rng(0).permutation(len(docs))]
    a, b = absorb(docs, 60, 32), absorb(shuffled, 60, 17)
    np.testing.assert_allclose(a.packed, b.packed, rtol=1e-12, atol=1e-16)
    np.testing.assert_array_equal(a.document_frequency, b.document_frequency)


def test_merge_of_disjoint_streams_equals_union():
    docs = random_documents(150, 50, seed=4)
    whole = absorb(docs, 50, 40)
    merged = absorb(docs[:70], 50, 40).merge(absorb(docs[70:], 50, 40))
    np.testing.assert_allclose(merged.packed, whole.packed, rtol=1e-12, atol=1e-16)
    assert merged.n_docs == whole.n_docs
    with pytest.raises(ValueError):
        merged.merge(CooccurrenceStats(51))


def test_state_round_trip_is_bit_exact():
    docs = random_documents(100, 40, seed=5)
    stats = absorb(docs, 40, 30)
    restored = CooccurrenceStats.from_state_dict({k: np.copy(v) for k, v in stats.state_dict().items()})
    for key, value in stats.state_dict().items():
        np.testing.assert_array_equal(restored.state_dict()[key], value)


def test_readers_see_the_full_symmetric_matrix():
    docs = random_documents(150, 1300, seed=6)  # three 512-row blocks in matmul, the last partial
    stats = absorb(docs, 1300, 64)
    q = reference_sums(docs, 1300)
    right = np.random.default_rng(1).random((1300, 5))
    np.testing.assert_allclose(stats.matmul(right), q @ right, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(stats.rows([0, 1299, 650]), q[[0, 1299, 650]], atol=1e-15)
    # float32 products (recover_topics' default): float32 rounding of the sums and of the right side
    single = stats.matmul(right, single=True)
    assert single.dtype == np.float64
    np.testing.assert_allclose(single, q @ right, rtol=0, atol=2e-6 * np.abs(q @ right).max())


def test_projected_normalised_rows_are_the_rows_divided_and_projected():
    """The anchor search's projected Qbar rows, read straight from the packing a tile of rows at a
    time (more than one tile, in any order of ids, a word of no mass among them): the gathered
    rows divided by their masses times the sparse projection, to the bit."""
    from streamtopics.refresh.anchors import random_projection

    docs = random_documents(200, 700, seed=7)
    stats = absorb(docs, 700, 64)
    q = reference_sums(docs, 700)
    projection = random_projection(700, 40, seed=3)
    unseen = np.flatnonzero(stats.word_mass == 0)
    ids = np.concatenate([np.random.default_rng(2).permutation(700)[:150], unseen[:1]]).astype(np.int64)
    mass = stats.word_mass[ids]
    gathered = stats.rows(ids) / np.where(mass > 0, mass, 1.0)[:, None]
    assert np.array_equal(stats.normalised_projected_rows(ids, projection), gathered @ projection)
    np.testing.assert_allclose(gathered, q[ids] / np.where(mass > 0, mass, 1.0)[:, None], atol=1e-15)


def test_short_documents_carry_no_pairs():
    stats = CooccurrenceStats(5)
    one_token = EncodedDocument(np.array([2], np.int32), np.array([1.0]))
    stats.update(DocumentBatch.from_documents([one_token], [0]))
    assert stats.n_docs == 0 and not stats.packed.any()


def test_select_and_concatenate_give_the_documents_asked_for():
    """DocumentBatch.select (rows in any order, repeated, empty documents) and concatenate
    against the documents picked one by one."""
    documents = random_documents(40, 50, seed=3)
    documents[7] = EncodedDocument(np.zeros(0, np.int32), np.zeros(0))
    batch = DocumentBatch.from_documents(documents, list(range(100, 140)))
    rows = np.array([5, 7, 0, 39, 5, 12])

    def pairs(b):
        return [(b.indices[b.indptr[d]:b.indptr[d + 1]].tolist(), b.counts[b.indptr[d]:b.indptr[d + 1]].tolist(),
                 int(b.keys[d])) for d in range(len(b))]

    picked = batch.select(rows)
    assert pairs(picked) == [(documents[r].ids.tolist(), documents[r].counts.tolist(), 100 + r) for r in rows]
    assert len(batch.select(np.zeros(0, np.int64))) == 0
    joined = DocumentBatch.concatenate([picked, batch.select(np.arange(3)), batch.select(np.zeros(0, np.int64))])
    assert pairs(joined) == pairs(picked) + pairs(batch)[:3]
    assert (joined.indptr.dtype, joined.indices.dtype, joined.counts.dtype, joined.keys.dtype) == (
        np.int64, np.int32, np.float64, np.uint64)
