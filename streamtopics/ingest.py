"""Ingest: documents in, statistics up to date (the learning half of a StreamingTopicModel).

Encodes documents against the vocabulary (learning it from the warm-up documents first),
counts and reports rejections, admits and retires words of an open vocabulary, buffers accepted
documents and runs the ingest kernel over each full buffer: the co-occurrence sums, the sliding
window, the random-projection tracker, the activity counter and the refinement reservoir are
all updated here and nowhere else. It decides nothing about refreshes: ``learn_many`` takes a
limit of accepted documents and returns once it is reached, so the model can check its schedule
(:class:`~streamtopics.schedule.RefreshSchedule`) at the very document a refresh falls due.

Raw text in ``learn_many`` is accepted a segment at a time (:meth:`Ingest._accept_encoded`): the
rejections, the buffered block and the reservoir's candidates of a whole segment come from array
operations; per document remain its key hash and, for the documents the reservoir may keep, the
reservoir's and the excerpts' ``add``. A segment ends at the document that fills the buffer, so
the kernel runs on the same documents as one at a time; texts are encoded no further ahead than
the limit allows, so nothing encoded is thrown away when it is reached.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np

from .config import ModelConfig
from .statistics.cooccurrence import CooccurrenceStats
from .refresh.describe import DocumentExcerpts, excerpt_of
from .text.documents import (
    MIN_TOKENS, DocumentBatch, DocumentEncoder, EncodedDocument, Rejection, content_hash, jsonable_key, key_hash,
    INDEXED_ACCEPTED, indexed_outcomes, indexed_rejection, restore_key, too_short,
)
from .text.open_vocabulary import OpenVocabulary
from .pending import PendingDocuments
from .refresh.anchor_selection import NotEnoughCandidatesError
from .refresh.reservoir import Reservoir
from .statistics.sketch import SketchedCooccurrence
from .statistics.combined import Statistics
from .stream_clock import StreamClock
from .text.tokenizer import DEFAULT_PATTERN, Tokenizer
from .text.batch_encoder import TextBatchEncoder
from .text.vocabulary import Vocabulary

TEXT_BATCH = 512  # raw texts encoded per compiled pass (learn_many)
INDEXED_SCAN = 8  # pre-indexed rows checked at least per step that stops at an accepted one, twice as many
# again while too few are (learn_indexed: with a clock or drift trigger every step is one row; checking 256
# rows made such a stream 1.7 times as slow as checking each row alone)
EMPTY, NO_KNOWN_WORDS, TOO_SHORT, ACCEPTED = range(4)  # outcomes of a batch-encoded text, rejections first

RejectHandler = Callable[[Rejection, Any, Any], None]


class Ingest:
    """The statistics a model learns and everything that feeds them.

    ``lineage`` (a :class:`~streamtopics.refresh.lineage.RefreshState`) is read when a word is retired (an
    anchor of the current snapshot never is; its warm-start row is reset); ``refreshing`` says
    whether a background refresh runs (no word is retired meanwhile). :attr:`last_accepted` is
    the latest accepted document (the model's drift monitor scores it as held out)."""

    def __init__(self, config: ModelConfig, tokenizer: Tokenizer | None, on_reject: RejectHandler | None,
                 lineage, refreshing: Callable[[], bool]):
        self.config = config
        self.tokenizer = tokenizer or Tokenizer()
        self.encoder = DocumentEncoder(self.tokenizer, config.max_text_chars)
        self.on_reject = on_reject
        self.lineage = lineage
        self.refreshing = refreshing
        self.last_accepted: EncodedDocument | None = None
        self.vocabulary: Vocabulary | None = None
        self.statistics: Statistics | None = None  # once the vocabulary is known
        self.open_vocabulary = (None if config.max_vocabulary is None else OpenVocabulary(
            config.max_vocabulary, config.admit_df, config.vocabulary_sketch_size, config.retire_df))
        self.replaced_slots: set[int] = set()  # vocabulary slots given to another word since the snapshot
        self.admitted_at: dict[int, float] = {}  # slot -> decay clock when its word was admitted (grace)
        self.text_encoder: TextBatchEncoder | None = None  # built for the vocabulary in force
        self.reservoir = self.excerpts = None
        if config.refine_iterations > 0:
            # the most recent documents where the sums forget (a window holds only those), else a uniform sample
            kind = "uniform" if config.half_life is None and config.window is None else "recent"
            capacity = config.resolved_reservoir_size()
            self.reservoir = Reservoir(capacity, kind)
            self.excerpts = DocumentExcerpts(capacity, kind)  # the text of the reservoir's documents
        self.warmup: list[tuple[dict, Any, float | None, str | None]] = []  # (counts, key, stream time, excerpt)
        self.pending = PendingDocuments(dated=config.half_life_unit == "stream" and config.half_life is not None)
        self.rejections: Counter = Counter()
        self.oov_tokens = 0.0
        self.documents_truncated = 0
        self.clock = StreamClock(config.max_time_skew)

    @property
    def stream_time(self) -> float | None:
        """The stream clock: the latest document time, bounded (:mod:`streamtopics.stream_clock`)."""
        return self.clock.time

    @stream_time.setter
    def stream_time(self, value: float | None) -> None:
        self.clock.time = value

    @property
    def times_clamped(self) -> int:
        """Documents dated more than ``max_time_skew`` after the clock, counted as dated that far."""
        return self.clock.clamped

    # ------------------------------------------------------------------ documents in
    def advance_clock(self, stream_time) -> None:
        """Date the next document: the clock never goes back, and moves at most
        ``max_time_skew`` ahead (:meth:`StreamClock.advance`)."""
        self.clock.advance(stream_time)

    def learn_one(self, document, key=None) -> None:
        """Absorb one document (see :meth:`StreamingTopicModel.learn_one`)."""
        if self.vocabulary is None:
            counts, rejection, truncated = self.encoder.word_counts(document)
            if rejection is not None:
                self.reject(rejection, document, key)
                return
            self.documents_truncated += truncated
            self.warmup.append((counts, key, self.stream_time, excerpt_of(document)))
            if len(self.warmup) >= self.config.warmup_documents:
                self.freeze_vocabulary()
            return
        if self.open_vocabulary is not None:
            counts, rejection, truncated = self.encoder.word_counts(document)
            if rejection is not None:
                self.reject(rejection, document, key)
                return
            unknown = [w for w in counts if w not in self.vocabulary.index]
            if unknown:
                ready = self.open_vocabulary.observe(unknown)
                if ready:
                    self._admit(ready)
            encoded = self.encoder.encode_counts(counts, self.vocabulary)
            if not isinstance(encoded, Rejection):
                encoded.truncated = truncated
            self._accept(encoded, document, key)
            return
        self._accept(self.encoder.encode(document, self.vocabulary), document, key)

    def learn_many(self, documents: list, keys: list, stream_times: list, limit: int | None = None) -> tuple[int, int]:
        """:meth:`learn_one` for the documents in order (each dated by its stream time), stopping
        once ``limit`` of them were accepted (None: no limit); returns how many documents were
        consumed and how many accepted. Raw ASCII text is tokenized and looked up up to
        ``TEXT_BATCH`` documents at a time in one compiled pass
        (:class:`~streamtopics.text.batch_encoder.TextBatchEncoder`) and accepted a segment at a time
        (:meth:`_accept_encoded`): the same encoded documents and rejections as one at a time,
        accepted in the same order, so the same statistics."""
        i, accepted = 0, 0
        while i < len(documents) and (limit is None or accepted < limit):
            left = None if limit is None else limit - accepted
            if not self._batch_encodable():  # warm-up, open vocabulary or a custom token pattern
                consumed, took = self._learn_one_at_a_time(documents, keys, stream_times, i, i + 1, left)
                i, accepted = i + consumed, accepted + took
                continue
            # no further ahead than the limit: each text encoded here is consumed in this pass
            stop = min(len(documents), i + (TEXT_BATCH if left is None else min(TEXT_BATCH, left)))
            batched = [d for d in range(i, stop) if TextBatchEncoder.handles(documents[d], self.config.max_text_chars)]
            encoded = self._text_encoder().encode([documents[d] for d in batched]) if batched else None
            runs = np.split(np.arange(len(batched)), np.flatnonzero(np.diff(batched) != 1) + 1) if batched else []
            for run in runs:  # consecutive documents the encoder took; the others one at a time
                first, last = batched[run[0]], batched[run[-1]] + 1
                accepted += self._learn_one_at_a_time(documents, keys, stream_times, i, first)[1]
                accepted += self._accept_encoded(encoded, int(run[0]), documents[first:last], keys[first:last],
                                                 stream_times[first:last])
                i = last
            accepted += self._learn_one_at_a_time(documents, keys, stream_times, i, stop)[1]
            i = stop
        return i, accepted

    def _learn_one_at_a_time(self, documents, keys, stream_times, start: int, stop: int,
                             limit: int | None = None) -> tuple[int, int]:
        """:meth:`learn_one` for documents ``start .. stop - 1`` until ``limit`` were accepted:
        (consumed, accepted). The warm-up's last document accepts the whole warm-up at once."""
        accepted = 0
        for d in range(start, stop):
            if limit is not None and accepted >= limit:
                return d - start, accepted
            before = self.documents_absorbed
            self.advance_clock(stream_times[d])
            self.learn_one(documents[d], keys[d])
            accepted += self.documents_absorbed - before
        return stop - start, accepted

    def _accept_encoded(self, encoded, row: int, documents: list, keys: list, stream_times: list) -> int:
        """Accept the texts ``documents`` encoded as rows ``row, row + 1, ...`` of ``encoded`` (a
        :class:`~streamtopics.text.batch_encoder.EncodedTexts`): what :meth:`_accept` does to each in turn,
        a segment at a time; returns how many were accepted. A segment ends at the document that
        fills the buffer, which then holds what one at a time would leave in it; only a
        rejection's ``on_reject`` may run before the earlier accepted documents of its segment
        are buffered."""
        n = len(documents)
        indptr = encoded.indptr[row:row + n + 1]
        run = DocumentBatch(indptr, encoded.indices, encoded.counts, np.zeros(n, np.uint64))
        cumulative = np.concatenate(([0.0], np.cumsum(encoded.counts[indptr[0]:indptr[-1]])))
        known = cumulative[indptr[1:] - indptr[0]] - cumulative[indptr[:-1] - indptr[0]]  # whole counts: exact
        outcome = np.full(n, ACCEPTED)
        outcome[known < MIN_TOKENS] = TOO_SHORT
        outcome[indptr[1:] == indptr[:-1]] = NO_KNOWN_WORDS
        outcome[encoded.tokens[row:row + n] == 0] = EMPTY
        oov = encoded.oov[row:row + n]
        clocks = self._running_clock(stream_times)
        accepted = np.flatnonzero(outcome == ACCEPTED)
        start, a = 0, 0  # the segment's first document and first accepted one (index into accepted)
        while start < n:
            left = len(accepted) - a
            room = max(self.config.batch_size - len(self.pending), 1)
            if left >= room:  # the segment ends at the document that fills the buffer
                take, stop = room, int(accepted[a + room - 1]) + 1
            else:  # it runs to the end, rejections after the last accepted document included
                take, stop = left, n
            rows = accepted[a:a + take]
            self._reject_outcomes(outcome, oov, documents, keys, start, stop)
            self.stream_time = clocks[stop - 1]
            if take:
                self._buffer_block(run.select(rows), rows, documents, keys, clocks)
                d = int(rows[-1])
                self.last_accepted = EncodedDocument(*self._entries(run, d), float(oov[d]))
            if len(self.pending) >= self.config.batch_size:
                self.flush()
            start, a = stop, a + take
        return len(accepted)

    def _running_clock(self, stream_times: list) -> list:
        """The stream clock after each of these documents (:meth:`advance_clock` in turn; the
        clock itself is left where it was, the caller sets it as the segments are accepted)."""
        now, clocks = self.stream_time, []
        for t in stream_times:
            self.advance_clock(t)
            clocks.append(self.stream_time)
        self.stream_time = now
        return clocks

    def _reject_outcomes(self, outcome: np.ndarray, oov: np.ndarray, documents: list, keys: list,
                         start: int, stop: int) -> None:
        """The rejections among documents ``start .. stop - 1`` of a run, in order, and the unknown
        tokens of those that reached the size check (as :meth:`_accept` counts them)."""
        part = outcome[start:stop]
        for tokens in oov[start:stop][part >= TOO_SHORT].tolist():
            self.oov_tokens += tokens  # one at a time: the same float sum
        for d in (np.flatnonzero(part < ACCEPTED) + start).tolist():
            if outcome[d] == EMPTY:
                rejection = Rejection("empty", "no tokens")
            elif outcome[d] == NO_KNOWN_WORDS:
                rejection = Rejection("no_known_words", f"{oov[d]:g} tokens, none in the vocabulary")
            else:
                rejection = too_short()
            self.reject(rejection, documents[d], keys[d])

    @staticmethod
    def _entries(batch: DocumentBatch, d: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = batch.indptr[d], batch.indptr[d + 1]
        return batch.indices[a:b], batch.counts[a:b]

    def _buffer_block(self, block: DocumentBatch, rows: np.ndarray, documents: list, keys: list, clocks: list) -> None:
        """Buffer accepted documents (``block``, the documents ``rows`` of a run) under their key
        hashes, and offer the reservoir and the excerpts the ones they may keep. Once the
        excerpts are full, a hash at or above their bound enters neither: the excerpts keep the
        ``capacity`` smallest distinct hashes of the texts offered to both, the reservoir the
        ``capacity`` smallest hashes (repeats included) of a superset, so its largest is no larger."""
        rows = rows.tolist()
        hashes = [key_hash(keys[d]) if keys[d] is not None else content_hash(*self._entries(block, j))
                  for j, d in enumerate(rows)]
        block.keys = np.array(hashes, np.uint64)
        self.pending.extend(block, [clocks[d] for d in rows] if self.pending.dated else [])
        if self.reservoir is None:
            return
        bound = self.excerpts.bound()
        offered = range(len(rows)) if bound is None else np.flatnonzero(block.keys < np.uint64(bound)).tolist()
        for j in offered:
            self.reservoir.add(*self._entries(block, j), hashes[j])
            self.excerpts.add(hashes[j], keys[rows[j]], documents[rows[j]])

    def _batch_encodable(self) -> bool:
        return (self.vocabulary is not None and self.open_vocabulary is None
                and self.tokenizer.pattern == DEFAULT_PATTERN)

    def _text_encoder(self) -> TextBatchEncoder:
        if self.text_encoder is None or self.text_encoder.vocabulary is not self.vocabulary:
            self.text_encoder = TextBatchEncoder(self.tokenizer, self.vocabulary)
        return self.text_encoder

    def indexed_batch(self, documents, keys) -> DocumentBatch:
        """Pre-indexed counts (a scipy sparse matrix or a :class:`DocumentBatch`) as a batch
        whose keys are the hashes of ``keys`` (when given)."""
        if self.vocabulary is None:
            raise ValueError("pre-indexed documents need a vocabulary: pass one to the model")
        if not isinstance(documents, DocumentBatch):
            return DocumentBatch.from_csr(documents, keys)
        if keys is not None:
            return DocumentBatch(documents.indptr, documents.indices, documents.counts,
                                 np.asarray([key_hash(k) for k in keys], np.uint64))
        return documents

    def learn_indexed(self, documents: DocumentBatch, stream_times: list | None, start: int = 0,
                      limit: int | None = None) -> tuple[int, int]:
        """Absorb the rows of ``documents`` from ``start`` (an :meth:`indexed_batch`), each dated
        by its stream time, until ``limit`` were accepted: (consumed, accepted). The rows are
        checked in one compiled pass (:func:`~streamtopics.text.documents.indexed_outcomes`) and
        accepted a segment at a time, as :meth:`_accept_encoded` accepts texts: the same
        rejections, buffer and statistics as one at a time."""
        left = len(documents) - start
        scan = left if limit is None else min(left, max(2 * limit, INDEXED_SCAN))
        while True:  # with a limit, only as many rows as it may take are checked (a step may be one row)
            rows = DocumentBatch(documents.indptr[start:start + scan + 1], documents.indices, documents.counts,
                                 documents.keys[start:start + scan])
            outcome = indexed_outcomes(rows.indptr, rows.indices, rows.counts, len(self.vocabulary))
            accepted = np.flatnonzero(outcome == INDEXED_ACCEPTED)
            if limit is None or len(accepted) >= limit or scan == left:
                break
            scan = min(left, 2 * scan)
        n = len(rows)
        if limit is not None and len(accepted) >= limit:  # consumed up to the limit-th accepted one
            accepted = accepted[:limit]
            n = int(accepted[-1]) + 1
        clocks = (self._running_clock(stream_times[start:start + n]) if stream_times is not None
                  else [self.stream_time] * n)
        first, a = 0, 0  # the segment's first document and first accepted one (index into accepted)
        while first < n:
            waiting = len(accepted) - a
            room = max(self.config.batch_size - len(self.pending), 1)
            take, stop = (room, int(accepted[a + room - 1]) + 1) if waiting >= room else (waiting, n)
            for d in (np.flatnonzero(outcome[first:stop] != INDEXED_ACCEPTED) + first).tolist():
                self.reject(indexed_rejection(outcome[d], len(self.vocabulary)), self._entries(rows, d),
                            int(rows.keys[d]))
            self.stream_time = clocks[stop - 1]
            if take:
                taken = accepted[a:a + take]
                block = rows.select(taken)
                if (block.counts <= 0).any():
                    block = block.keep_entries(block.counts > 0)
                self.pending.extend(block, [clocks[d] for d in taken.tolist()] if self.pending.dated else [])
                if self.reservoir is not None:
                    for j, hashed in enumerate(block.keys.tolist()):
                        self.reservoir.add(*self._entries(block, j), hashed)
                self.last_accepted = EncodedDocument(*self._entries(block, take - 1))
            if len(self.pending) >= self.config.batch_size:
                self.flush()
            first, a = stop, a + take
        return n, len(accepted)

    def _accept(self, encoded, document, key, hashed_key: int | None = None, text: str | None = None) -> bool:
        """Buffer an encoded document (True) or count its rejection (False). ``text``: the
        document's text when ``document`` is its counts (a warm-up document), for its excerpt."""
        if isinstance(encoded, Rejection):
            self.reject(encoded, document, key)
            return False
        self.oov_tokens += encoded.oov_tokens
        self.documents_truncated += encoded.truncated
        if encoded.counts.sum() < MIN_TOKENS:
            self.reject(too_short(), document, key)
            return False
        if hashed_key is None:
            hashed_key = key_hash(key) if key is not None else content_hash(encoded.ids, encoded.counts)
        self.pending.append(encoded, hashed_key, self.stream_time)
        if self.reservoir is not None:
            self.reservoir.add(encoded.ids, encoded.counts, hashed_key)
            self.excerpts.add(hashed_key, key, document if text is None else text)
        self.last_accepted = encoded
        if len(self.pending) >= self.config.batch_size:
            self.flush()
        return True

    def reject(self, rejection: Rejection, document, key) -> None:
        self.rejections[rejection.reason] += 1
        if self.on_reject is not None:
            self.on_reject(rejection, document, key)

    def encode_many(self, documents) -> tuple[DocumentBatch, list[Rejection | None]]:
        """Encode documents against the vocabulary without learning anything."""
        if self.vocabulary is None:
            raise RuntimeError("the model has no vocabulary yet")
        return self.encoder.encode_many(documents, self.vocabulary)

    # ------------------------------------------------------------------ statistics
    def flush(self) -> None:
        """Run the ingest kernel over the buffered documents."""
        if not len(self.pending):
            return
        self._ingest(*self.pending.take())

    def _ingest(self, batch: DocumentBatch, stream_times: np.ndarray | None = None) -> None:
        self.statistics.update(batch, stream_times)

    # the parts of the statistics, by name (the model shows them as its attributes)
    stats = property(lambda self: None if self.statistics is None else self.statistics.sums)
    tracker = property(lambda self: None if self.statistics is None else self.statistics.tracker)
    activity = property(lambda self: None if self.statistics is None else self.statistics.activity)
    window = property(lambda self: None if self.statistics is None else self.statistics.window)

    @property
    def documents_absorbed(self) -> int:
        """Documents whose statistics are in the model (buffered ones included)."""
        if self.stats is None:
            return 0
        return self.stats.n_docs + len(self.pending)

    def current_sums(self) -> CooccurrenceStats | SketchedCooccurrence:
        """The co-occurrence sums with every buffered document included."""
        if self.vocabulary is None:
            self.freeze_vocabulary()
        self.flush()
        return self.stats

    def merge(self, other: "Ingest") -> None:
        """Add another ingest's statistics (a disjoint sub-stream over the same vocabulary)."""
        if other.vocabulary != self.vocabulary or self.vocabulary is None:
            raise ValueError("models can only be merged over the same, fixed vocabulary")
        if self.tokenizer.get_config() != other.tokenizer.get_config():
            raise ValueError(f"models can only be merged when they tokenize alike: {self.tokenizer!r} and "
                             f"{other.tokenizer!r} (a model saved before strip_mail existed resumes without it)")
        self.flush()
        other.flush()
        self.statistics.merge(other.statistics)
        if self.reservoir is not None and other.reservoir is not None:
            self.reservoir.merge(other.reservoir)
            self.excerpts.merge(other.excerpts)
        self.rejections.update(other.rejections)
        self.oov_tokens += other.oov_tokens
        self.documents_truncated += other.documents_truncated
        self.clock.clamped += other.clock.clamped

    def reservoir_batch(self) -> DocumentBatch | None:
        """The refinement reservoir's documents with their key hashes, or None while it holds
        too few (or is off)."""
        return self.stamped_reservoir()[0]

    def stamped_reservoir(self) -> tuple[DocumentBatch | None, np.ndarray | None]:
        """:meth:`reservoir_batch` and its documents' stamps
        (:meth:`~streamtopics.refresh.reservoir.Reservoir.stamped_batch`), or ``(None, None)``."""
        if self.reservoir is None or len(self.reservoir) < 30:
            return None, None
        return self.reservoir.stamped_batch()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> tuple[dict, dict]:
        """``(arrays, meta)``: the statistics' and the reservoir's arrays, and the vocabulary,
        warm-up documents, counters, open vocabulary and excerpts (JSON)."""
        statistics = self.statistics_state()
        arrays, meta = self.state_without_statistics()
        return statistics | arrays, meta

    def statistics_state(self) -> dict:
        """The statistics' arrays, pending documents absorbed first: the bulk of a state file,
        which a writer starts encoding before the rest is gathered."""
        if self.vocabulary is not None:
            self.flush()
        return {} if self.statistics is None else self.statistics.state_dict()

    def state_without_statistics(self) -> tuple[dict, dict]:
        """:meth:`state_dict` but the statistics' arrays (after :meth:`statistics_state`)."""
        if self.vocabulary is not None:
            self.flush()
        arrays = {}
        if self.reservoir is not None:
            arrays.update({f"reservoir.{k}": v for k, v in self.reservoir.state_dict().items()})
        meta = {
            "vocabulary": None if self.vocabulary is None else self.vocabulary.words,
            "warmup": [[counts, jsonable_key(key), stream_time, text] for counts, key, stream_time, text in self.warmup],
            "excerpts": None if self.excerpts is None else self.excerpts.to_state(arrays.get("reservoir.keys", ())),
            "rejections": dict(self.rejections),
            "oov_tokens": self.oov_tokens,
            "documents_truncated": self.documents_truncated,
            "open_vocabulary": None if self.open_vocabulary is None else self.open_vocabulary.to_dict(),
            "replaced_slots": sorted(self.replaced_slots),
            "admitted_at": [[i, t] for i, t in sorted(self.admitted_at.items())],
            "stream_time": self.stream_time,
            "times_clamped": self.clock.clamped,
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        """Take up what :meth:`state_dict` wrote (keys missing from older files keep their defaults)."""
        if meta["vocabulary"] is not None:
            self.vocabulary = Vocabulary(meta["vocabulary"])
            self.statistics = Statistics.from_state_dict(arrays, self.config)
        self.warmup = [(entry[0], restore_key(entry[1]), entry[2] if len(entry) > 2 else None,
                        entry[3] if len(entry) > 3 else None) for entry in meta["warmup"]]
        if self.excerpts is not None and meta.get("excerpts"):
            self.excerpts = DocumentExcerpts.from_state(self.excerpts.capacity, self.excerpts.kind, meta["excerpts"],
                                                        arrays.get("reservoir.keys", ()))
        if self.reservoir is not None:
            self.reservoir.load_state_dict({k[len("reservoir."):]: v for k, v in arrays.items()
                                            if k.startswith("reservoir.")})
        self.rejections = Counter(meta["rejections"])
        self.oov_tokens = meta["oov_tokens"]
        self.documents_truncated = meta["documents_truncated"]
        self.stream_time = meta.get("stream_time")
        self.clock.clamped = int(meta.get("times_clamped", 0))
        self.replaced_slots = set(meta.get("replaced_slots", []))
        self.admitted_at = {int(i): float(t) for i, t in meta.get("admitted_at", [])}
        if meta.get("open_vocabulary") is not None:
            self.open_vocabulary = OpenVocabulary.from_dict(meta["open_vocabulary"])

    # ------------------------------------------------------------------ vocabulary
    def set_vocabulary(self, vocabulary: Vocabulary) -> None:
        """Fix the vocabulary and start empty statistics over it."""
        config = self.config
        if len(vocabulary) < config.n_topics:
            raise NotEnoughCandidatesError(f"a vocabulary of {len(vocabulary)} words cannot hold {config.n_topics} topics")
        self.vocabulary = vocabulary
        self.statistics = Statistics.empty(config, len(vocabulary))

    def freeze_vocabulary(self) -> None:
        """Build the vocabulary from the warm-up documents, then absorb them."""
        if not self.warmup:
            raise RuntimeError("no documents seen yet: cannot build a vocabulary")
        self.set_vocabulary(Vocabulary.from_document_counts(
            (counts for counts, *_ in self.warmup), self.config.vocabulary_size))
        warmup, self.warmup = self.warmup, []
        latest = self.stream_time
        for counts, key, stream_time, text in warmup:
            self.stream_time = stream_time  # each warm-up document keeps its own date
            self._accept(self.encoder.encode_counts(counts, self.vocabulary), counts, key, text=text)
        self.stream_time = latest

    def _admit(self, words: list[str]) -> None:
        """Give words ready for admission a vocabulary slot: a new one at the end while there is
        room, else (forgetting on) the slot of a word that fell out of use
        (:mod:`~streamtopics.text.open_vocabulary`). Words that find no slot stay counted in the
        sketch. A background refresh works on its own copy and is not waited for (the warm start
        pads what it publishes); no word is retired while one runs."""
        room = max(self.config.max_vocabulary - len(self.vocabulary), 0)
        slots = self._retirable_slots(len(words) - room) if len(words) > room else []
        words = words[: room + len(slots)]
        if not words:
            return
        self.flush()  # buffered documents are encoded against the vocabulary as it was
        grown, reused = words[:room], words[room:]
        vocabulary = list(self.vocabulary.words)
        for slot, word in zip(slots, reused):
            self.open_vocabulary.retire(vocabulary[slot], self.documents_absorbed)
            vocabulary[slot] = word
            self.statistics.clear_word(slot)
            if self.reservoir is not None:
                self.reservoir.drop_word(slot)
            self.lineage.forget_word(slot)
            self.replaced_slots.add(slot)
        self.vocabulary = Vocabulary(vocabulary + grown)
        if grown:
            self.statistics.grow(len(self.vocabulary))
        for word in words:
            self.open_vocabulary.admit(word, self.documents_absorbed)
        if self.activity is not None:
            now = self.stats.decay.clock
            self.admitted_at = {i: t for i, t in self.admitted_at.items() if now - t < self.config.half_life}
            self.admitted_at.update((self.vocabulary.index[w], now) for w in words)

    def _retirable_slots(self, wanted: int) -> list[int]:
        """Up to ``wanted`` words that fell out of use, least used first: decayed document
        frequency below ``retire_df``, not an anchor of the current snapshot, and not admitted
        within the last half-life (a new word starts from zero: without that grace the next
        admission would evict it). None without forgetting (nothing fades) or while a
        background refresh runs."""
        if self.activity is None or self.refreshing():
            return []
        frequency = self.stats.document_frequency * self.stats.decay.scale()
        faded = np.flatnonzero(frequency < self.open_vocabulary.retire_df)
        now = self.stats.decay.clock
        protected = {i for i, t in self.admitted_at.items() if now - t < self.config.half_life}
        if self.lineage.snapshot is not None:
            protected |= {self.vocabulary.index.get(w) for w in self.lineage.snapshot.anchors}
        faded = [int(i) for i in faded[np.argsort(frequency[faded], kind="stable")] if int(i) not in protected]
        return faded[:wanted]
