"""Documents in, count vectors out: the one place where user input is checked.

Every input form (raw text, bytes, a token list, a ``{word: count}`` mapping, or a pre-indexed
sparse row) becomes a sorted array of word ids and float64 counts, or a :class:`Rejection` that
says why not. Bad input never raises out of the stream; it is counted by reason.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from .rejection import Rejection
from .tokenizer import Tokenizer
from .vocabulary import Vocabulary

#: Known tokens a document needs to make a word pair: shorter ones add nothing to any sum and are
#: rejected as ``too_short`` (:func:`too_short`); every sum skips them (:meth:`DocumentBatch.forming_pairs`).
MIN_TOKENS = 2

#: The largest count one word may have in one document. A document's pairs are weighed by
#: 1 / (n_d (n_d - 1)): with counts near 1e200 that overflows to 0 and the document would be
#: counted in n_docs while adding nothing; 1e9 per word keeps n_d^2 far inside float64.
MAX_COUNT = 1e9


def too_short() -> Rejection:
    """The rejection of a document with fewer than :data:`MIN_TOKENS` known tokens."""
    return Rejection("too_short", f"fewer than {MIN_TOKENS} known tokens")


@dataclass
class EncodedDocument:
    """One document as sorted unique word ids and their counts."""

    ids: np.ndarray  # int32, sorted, unique
    counts: np.ndarray  # float64, > 0
    oov_tokens: float = 0.0
    truncated: bool = False


@dataclass
class DocumentBatch:
    """Documents in compressed sparse row form, the unit every kernel consumes.

    ``indices[indptr[d]:indptr[d+1]]`` are the sorted word ids of document ``d`` and ``counts``
    the matching counts; ``keys`` are 64-bit hashes of the documents' keys (see
    :func:`key_hash`), which seed anything that must be a deterministic function of the document.
    """

    indptr: np.ndarray  # int64 (B + 1)
    indices: np.ndarray  # int32 (nnz)
    counts: np.ndarray  # float64 (nnz)
    keys: np.ndarray  # uint64 (B)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per document (n_d)."""
        return np.add.reduceat(self.counts, self.indptr[:-1]) if len(self) and self.counts.size else np.zeros(len(self))

    def forming_pairs(self) -> np.ndarray:
        """Which documents have the :data:`MIN_TOKENS` tokens a word pair needs (the ones the sums count)."""
        return self.lengths >= MIN_TOKENS

    @classmethod
    def from_documents(cls, documents: list[EncodedDocument], keys: list[int]) -> "DocumentBatch":
        return cls.from_pairs([(d.ids, d.counts) for d in documents], keys)

    @classmethod
    def from_pairs(cls, pairs, keys=None) -> "DocumentBatch":
        """A batch from ``(ids, counts)`` pairs (sorted ids); keys default to zeros."""
        return cls.from_lists([ids for ids, _ in pairs], [counts for _, counts in pairs], keys)

    @classmethod
    def from_lists(cls, ids: list, counts: list, keys=None) -> "DocumentBatch":
        """A batch from each document's word ids (sorted) and counts, two lists of arrays; keys
        default to zeros."""
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), out=indptr[1:])
        if ids:
            indices = np.concatenate(ids).astype(np.int32, copy=False)
            counts = np.concatenate(counts).astype(np.float64, copy=False)
        else:
            indices, counts = np.zeros(0, np.int32), np.zeros(0, np.float64)
        keys = np.zeros(len(ids), np.uint64) if keys is None else np.asarray(keys, dtype=np.uint64)
        return cls(indptr, indices, counts, keys)

    @classmethod
    def from_csr(cls, matrix, keys=None) -> "DocumentBatch":
        """A batch from a scipy CSR matrix (documents x vocabulary). Keys default to hashes of
        each row's content."""
        matrix = matrix.tocsr(copy=True)
        matrix.sum_duplicates()
        matrix.eliminate_zeros()
        matrix.sort_indices()
        indptr = matrix.indptr.astype(np.int64)
        indices = matrix.indices.astype(np.int32)
        counts = matrix.data.astype(np.float64)
        if keys is None:
            keys = [content_hash(indices[a:b], counts[a:b]) for a, b in zip(indptr[:-1], indptr[1:])]
        else:
            keys = [key_hash(k) for k in keys]
        return cls(indptr, indices, counts, np.asarray(keys, dtype=np.uint64))

    def select(self, rows: np.ndarray) -> "DocumentBatch":
        """The sub-batch of the given document positions, in that order."""
        rows = np.asarray(rows, np.int64)
        indptr, indices, counts = _select_rows(self.indptr, self.indices, self.counts, rows)
        return DocumentBatch(indptr, indices, counts, self.keys[rows])

    @classmethod
    def concatenate(cls, batches: list["DocumentBatch"]) -> "DocumentBatch":
        """The documents of ``batches``, in order, as one batch."""
        if not batches:
            return cls.from_pairs([])
        sizes = np.concatenate([np.diff(b.indptr) for b in batches])
        indptr = np.zeros(sizes.size + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        return cls(indptr, np.concatenate([b.indices for b in batches]).astype(np.int32, copy=False),
                   np.concatenate([b.counts for b in batches]).astype(np.float64, copy=False),
                   np.concatenate([b.keys for b in batches]).astype(np.uint64, copy=False))

    def keep_entries(self, keep: np.ndarray) -> "DocumentBatch":
        """The same documents with only the entries (word, count) where ``keep`` is True; a
        document may become empty."""
        document_of_entry = np.repeat(np.arange(len(self)), np.diff(self.indptr))
        indptr = np.zeros(len(self) + 1, np.int64)
        np.cumsum(np.bincount(document_of_entry[keep], minlength=len(self)), out=indptr[1:])
        return DocumentBatch(indptr, self.indices[keep], self.counts[keep], self.keys)

    def token_counts(self) -> np.ndarray:
        """Tokens per document, 0 for an empty one (:attr:`lengths` assumes none is empty)."""
        document_of_entry = np.repeat(np.arange(len(self)), np.diff(self.indptr))
        return np.bincount(document_of_entry, weights=self.counts, minlength=len(self))


def key_hash(key) -> int:
    """A stable 64-bit hash of a document key (bytes, str or int)."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
    elif isinstance(key, str):
        data = key.encode("utf-8", "surrogatepass")  # any str, even one with a lone surrogate
    elif isinstance(key, (int, np.integer)):
        data = str(int(key)).encode()
    else:
        raise TypeError(f"document keys must be bytes, str or int, got {type(key).__name__}")
    return int.from_bytes(hashlib.blake2b(b"k" + data, digest_size=8).digest(), "little")


def jsonable_key(key):
    """A document key as JSON holds it (bytes as ``{"bytes": hex}``); :func:`restore_key` inverts it."""
    if isinstance(key, (bytes, bytearray)):
        return {"bytes": bytes(key).hex()}
    return key


def restore_key(key):
    if isinstance(key, dict):
        return bytes.fromhex(key["bytes"])
    return key


def content_hash(ids: np.ndarray, counts: np.ndarray) -> int:
    """A stable 64-bit hash of a document's content, the key of documents that have none."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(b"c")
    digest.update(np.ascontiguousarray(ids, dtype="<i4").tobytes())
    digest.update(np.ascontiguousarray(counts, dtype="<f8").tobytes())
    return int.from_bytes(digest.digest(), "little")


class DocumentEncoder:
    """Turn one input document into an :class:`EncodedDocument` or a :class:`Rejection`.

    Raw text longer than ``max_text_chars`` is truncated (and flagged) rather than rejected, so a
    huge message still contributes its beginning.
    """

    def __init__(self, tokenizer: Tokenizer, max_text_chars: int = 1_000_000):
        self.tokenizer = tokenizer
        self.max_text_chars = int(max_text_chars)

    def word_counts(self, document: Any) -> tuple[dict[str, float] | None, Rejection | None, bool]:
        """Step one: any input form -> ``{word: count}`` (no vocabulary needed)."""
        truncated = False
        if isinstance(document, (bytes, bytearray, memoryview)):
            try:
                document = bytes(document).decode("utf-8")
            except UnicodeDecodeError as error:
                return None, Rejection("undecodable", f"not UTF-8 at byte {error.start}"), False
        if isinstance(document, str):
            if len(document) > self.max_text_chars:
                document, truncated = document[: self.max_text_chars], True
            counts = self.tokenizer.count(document)
        elif isinstance(document, (list, tuple)):
            bad = next((t for t in document if not isinstance(t, str)), None)
            if bad is not None or any(t is None for t in document):
                return None, Rejection("non_string_token", f"token {bad!r} is {type(bad).__name__}"), False
            counts = dict(Counter(document))
        elif isinstance(document, dict):
            counts = {}
            for word, value in document.items():
                if not isinstance(word, str):
                    return None, Rejection("non_string_token", f"key {word!r} is {type(word).__name__}"), False
                if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                    return None, Rejection("invalid_count", f"count of {word!r} is {value!r}"), False
                try:
                    value = float(value)
                except OverflowError:  # an int of 310 digits or more (JSON allows it)
                    value = math.inf
                if not math.isfinite(value) or not 0 <= value <= MAX_COUNT:
                    return None, Rejection("invalid_count", f"count of {word!r} is {value!r}"), False
                if value > 0:
                    counts[word] = value
        else:
            return None, Rejection("unsupported_type", type(document).__name__), False
        if not counts:
            return None, Rejection("empty", "no tokens"), truncated
        return counts, None, truncated

    def encode_counts(self, counts: dict[str, float], vocabulary: Vocabulary) -> EncodedDocument | Rejection:
        """Step two: ``{word: count}`` -> sorted ids and counts; unknown words are tallied."""
        index = vocabulary.index
        ids, values, oov = [], [], 0.0
        for word, value in counts.items():
            i = index.get(word)
            if i is None:
                oov += value
            else:
                ids.append(i)
                values.append(value)
        if not ids:
            return Rejection("no_known_words", f"{oov:g} tokens, none in the vocabulary")
        ids_array = np.asarray(ids, dtype=np.int32)
        order = np.argsort(ids_array, kind="stable")
        return EncodedDocument(ids_array[order], np.asarray(values, dtype=np.float64)[order], oov)

    def encode(self, document: Any, vocabulary: Vocabulary) -> EncodedDocument | Rejection:
        """Both steps at once."""
        counts, rejection, truncated = self.word_counts(document)
        if rejection is not None:
            return rejection
        encoded = self.encode_counts(counts, vocabulary)
        if isinstance(encoded, EncodedDocument):
            encoded.truncated = truncated
        return encoded

    def encode_many(self, documents, vocabulary: Vocabulary) -> tuple[DocumentBatch, list[Rejection | None]]:
        """Every document encoded (a rejected one as an empty row) and its rejection or None."""
        encoded, outcome = [], []
        for document in documents:
            result = self.encode(document, vocabulary)
            outcome.append(result if isinstance(result, Rejection) else None)
            encoded.append(EncodedDocument(np.zeros(0, np.int32), np.zeros(0)) if isinstance(result, Rejection)
                           else result)
        return DocumentBatch.from_documents(encoded, [0] * len(encoded)), outcome


INDEXED_ACCEPTED, INDEXED_WORD_RANGE, INDEXED_COUNT, INDEXED_UNSORTED, INDEXED_TOO_SHORT = range(5)


def indexed_rejection(outcome: int, n_words: int) -> Rejection:
    """The rejection an :func:`indexed_outcomes` code other than ``INDEXED_ACCEPTED`` stands for."""
    if outcome == INDEXED_WORD_RANGE:
        return Rejection("invalid_word_id", f"ids must lie in [0, {n_words})")
    if outcome == INDEXED_COUNT:
        return Rejection("invalid_count", f"counts must be finite, non-negative and at most {MAX_COUNT:g}")
    if outcome == INDEXED_UNSORTED:
        return Rejection("invalid_word_id", "ids must be sorted and unique")
    return too_short()


@njit(cache=True, nogil=True)
def indexed_outcomes(indptr, indices, counts, n_words):
    """What becomes of each document of a pre-indexed batch (they bypass the encoder), in one
    pass: ids out of ``[0, n_words)``, then counts not finite, negative or over ``MAX_COUNT``,
    then ids not sorted and unique reject it; otherwise its positive counts must make
    ``MIN_TOKENS`` tokens. Per-document numpy checks took about half of ingest's time."""
    out = np.empty(indptr.size - 1, np.int8)
    for d in range(indptr.size - 1):
        word_range, count, unsorted, tokens = False, False, False, 0.0
        for p in range(indptr[d], indptr[d + 1]):
            w, c = indices[p], counts[p]
            word_range |= w < 0 or w >= n_words
            unsorted |= p > indptr[d] and w <= indices[p - 1]
            if not np.isfinite(c) or c < 0 or c > MAX_COUNT:
                count = True
            elif c > 0:
                tokens += c
        if word_range:
            out[d] = INDEXED_WORD_RANGE
        elif count:
            out[d] = INDEXED_COUNT
        elif unsorted:
            out[d] = INDEXED_UNSORTED
        else:
            out[d] = INDEXED_TOO_SHORT if tokens < MIN_TOKENS else INDEXED_ACCEPTED
    return out


@njit(cache=True, nogil=True)
def _select_rows(indptr, indices, counts, rows):
    """:meth:`DocumentBatch.select`'s arrays: the entries of documents ``rows``, in that order, one
    copy per document (gathering through an array of entry positions took 2-5 times as long)."""
    out_ptr = np.zeros(rows.size + 1, np.int64)
    for i in range(rows.size):
        out_ptr[i + 1] = out_ptr[i] + indptr[rows[i] + 1] - indptr[rows[i]]
    out_indices = np.empty(out_ptr[-1], indices.dtype)
    out_counts = np.empty(out_ptr[-1], counts.dtype)
    for i in range(rows.size):
        start, at, end = indptr[rows[i]], out_ptr[i], out_ptr[i + 1]
        out_indices[at:end] = indices[start:start + end - at]
        out_counts[at:end] = counts[start:start + end - at]
    return out_ptr, out_indices, out_counts
