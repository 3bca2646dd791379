"""Raw ASCII text to word ids for many documents in one compiled pass.

The per-document path (:meth:`~streamtopics.text.documents.DocumentEncoder.encode`: tokenize, count,
look every word up in a dict) spends most of a raw-text stream's time in Python, one token at a
time. For the default tokenizer on ASCII text the tokens are exactly the runs of letters of the
lowercased text (with ``strip_mail``, once :func:`~streamtopics.text.mail.blank_mail_transport` has
overwritten with spaces what :func:`~streamtopics.text.mail.strip_mail` drops), so a numba kernel can
scan the bytes of a whole batch, hash each run and find it in an open-addressing table of the
vocabulary (and of the stop words, which are dropped but must
not count as out-of-vocabulary). It yields what the per-document path yields for every document:
its sorted word ids and counts, its out-of-vocabulary tokens and whether any token survived the
stop list and the minimum length; the caller keeps the per-document steps (rejections, keys,
sampling) in order, so the statistics are the same to the bit.

Documents it cannot take (not ``str``, non-ASCII, longer than the truncation limit) are left to
the per-document path by the caller (:meth:`TextBatchEncoder.handles`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .mail import blank_mail_transport
from .tokenizer import DEFAULT_PATTERN, Tokenizer
from .vocabulary import Vocabulary

STOP = -2  # table id of a stop word: dropped, not out of vocabulary
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)


def _ascii_word(word: str) -> bool:
    return word.isascii() and word.isalpha() and word.islower()


class TextBatchEncoder:
    """Encode a batch of ASCII texts against ``vocabulary`` as ``tokenizer`` (the default
    pattern) and :meth:`~streamtopics.text.vocabulary.Vocabulary` lookups would, in one kernel call.

    >>> encoder = TextBatchEncoder(Tokenizer(), Vocabulary(["apple", "pear"]))
    >>> out = encoder.encode(["The apple, the PEAR and an apple!", "nothing known here", "the an"])
    >>> [(ids.tolist(), counts.tolist()) for ids, counts in out.documents()]
    [([0, 1], [2.0, 1.0]), ([], []), ([], [])]
    >>> out.oov.tolist(), out.tokens.tolist()  # "nothing", "known"; the stop words are not counted
    ([0.0, 2.0, 0.0], [3, 2, 0])
    """

    def __init__(self, tokenizer: Tokenizer, vocabulary: Vocabulary):
        if tokenizer.pattern != DEFAULT_PATTERN:
            raise ValueError("the batch encoder reproduces the default token pattern only")
        self.vocabulary = vocabulary
        self.strip_mail = tokenizer.strip_mail
        self.min_length = tokenizer.min_length
        stop = tokenizer.stop_words  # dropped before any lookup, even a word of the vocabulary
        entries = [(w, i) for i, w in enumerate(vocabulary.words) if _ascii_word(w) and w not in stop]
        entries += [(w, STOP) for w in sorted(stop) if _ascii_word(w)]
        size = 1 << max(4, (2 * len(entries)).bit_length())
        words = [w.encode("ascii") for w, _ in entries]
        self.offsets = np.zeros(len(words) + 1, np.int64)
        np.cumsum([len(w) for w in words], out=self.offsets[1:])
        self.letters = np.frombuffer(b"".join(words), np.uint8).copy() if words else np.zeros(0, np.uint8)
        self.ids = np.array([i for _, i in entries], np.int64)
        self.slots = np.full(size, -1, np.int64)
        _fill_table(self.slots, self.letters, self.offsets)

    @staticmethod
    def handles(document, max_chars: int) -> bool:
        """Whether :meth:`encode` takes ``document`` (else the per-document path does)."""
        return type(document) is str and document.isascii() and len(document) <= max_chars

    def encode(self, texts: list[str]) -> "EncodedTexts":
        """Every text's word ids and counts, out-of-vocabulary tokens and surviving tokens."""
        data = np.frombuffer("\n".join(texts).encode("ascii"), np.uint8)
        starts = np.zeros(len(texts) + 1, np.int64)
        np.cumsum([len(t) + 1 for t in texts], out=starts[1:])
        if self.strip_mail:
            data = data.copy()
            blank_mail_transport(data, starts)
        indptr, indices, counts, oov, tokens = _encode(data, starts, self.slots, self.letters, self.offsets,
                                                       self.ids, self.min_length)
        return EncodedTexts(indptr, indices, counts, oov, tokens)


class EncodedTexts:
    """The output of :meth:`TextBatchEncoder.encode`: CSR ids and counts, per-document
    out-of-vocabulary tokens (``oov``) and tokens kept by the stop list and length (``tokens``)."""

    def __init__(self, indptr, indices, counts, oov, tokens):
        self.indptr, self.indices, self.counts, self.oov, self.tokens = indptr, indices, counts, oov, tokens

    def documents(self):
        for a, b in zip(self.indptr[:-1], self.indptr[1:]):
            yield self.indices[a:b], self.counts[a:b]


@njit(cache=True, nogil=True)
def _hash(data, start, end):
    """FNV-1a of the lowercased bytes ``data[start:end]``."""
    h = FNV_OFFSET
    for p in range(start, end):
        h = (h ^ np.uint64(data[p] | 32)) * FNV_PRIME
    return h


@njit(cache=True, nogil=True)
def _fill_table(slots, letters, offsets):
    mask = slots.size - 1
    for e in range(offsets.size - 1):
        s = np.int64(_hash(letters, offsets[e], offsets[e + 1]) & np.uint64(mask))
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = e


@njit(cache=True, nogil=True)
def _lookup(h, data, start, end, slots, letters, offsets):
    """Entry of the lowercased word ``data[start:end]``, whose :func:`_hash` is ``h``, in the
    table, or -1."""
    mask = slots.size - 1
    s = np.int64(h & np.uint64(mask))
    while slots[s] >= 0:
        e = slots[s]
        a, b = offsets[e], offsets[e + 1]
        if b - a == end - start:
            same = True
            for p in range(end - start):
                if letters[a + p] != (data[start + p] | 32):
                    same = False
                    break
            if same:
                return e
        s = (s + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def _encode(data, starts, slots, letters, offsets, ids, min_length):
    n_docs = starts.size - 1
    indptr = np.zeros(n_docs + 1, np.int64)
    found = np.empty(data.size // 2 + 1, np.int64)  # known-word ids of all documents, in order
    oov = np.zeros(n_docs)
    tokens = np.zeros(n_docs, np.int64)
    n_found = 0
    for d in range(n_docs):
        p, end = starts[d], min(starts[d + 1], data.size)  # the last text has no separator after it
        while p < end:
            c = data[p] | 32
            if c < 97 or c > 122:  # a-z after lowering A-Z; everything else splits
                p += 1
                continue
            q = p
            h = FNV_OFFSET  # _hash(data, p, q), computed while the word is scanned
            while q < end and 97 <= (data[q] | 32) <= 122:
                h = (h ^ np.uint64(data[q] | 32)) * FNV_PRIME
                q += 1
            if q - p >= min_length:
                e = _lookup(h, data, p, q, slots, letters, offsets)
                if e < 0:
                    oov[d] += 1.0
                    tokens[d] += 1
                elif ids[e] != STOP:
                    found[n_found] = ids[e]
                    n_found += 1
                    tokens[d] += 1
            p = q
        indptr[d + 1] = n_found
    # each document's ids sorted, equal ones counted
    out_ptr = np.zeros(n_docs + 1, np.int64)
    out_ids = np.empty(n_found, np.int32)
    out_counts = np.empty(n_found)
    n_out = 0
    for d in range(n_docs):
        run = np.sort(found[indptr[d]:indptr[d + 1]])
        for i in range(run.size):
            if i > 0 and run[i] == run[i - 1]:
                out_counts[n_out - 1] += 1.0
            else:
                out_ids[n_out] = run[i]
                out_counts[n_out] = 1.0
                n_out += 1
        out_ptr[d + 1] = n_out
    return out_ptr, out_ids[:n_out], out_counts[:n_out], oov, tokens
