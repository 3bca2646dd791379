"""Ingest: documents in, statistics up to date (the learning half of a StreamingTopicModel).

Encodes documents against the vocabulary (learning it from the warm-up documents first),
counts and reports rejections, admits and retires words of an open vocabulary, buffers accepted
documents and runs the ingest kernel over each full buffer: the co-occurrence sums, the sliding
window, the random-projection tracker, the activity counter and the refinement reservoir are
all updated here and nowhere else. It decides nothing about refreshes: an accepted document is
handed to the ``accepted`` callback, where the model observes drift and schedules them.

Raw text in ``learn_many`` is accepted a segment at a time (:meth:`Ingest._accept_encoded`): the
rejections, the buffered block and the reservoir's candidates of a whole segment come from array
operations; per document remain its key hash and, for the documents the reservoir may keep, the
reservoir's and the excerpts' ``add``. A segment ends at the document that fills the buffer (the
kernel runs on the same documents as one at a time) and at the one the model must check for a
refresh (``documents_until_check``), so a refresh sees the same documents.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Callable

import numpy as np

from .config import ModelConfig
from .describe import DocumentExcerpts, excerpt_of
from .cooccurrence import CooccurrenceStats
from .documents import (
    DocumentBatch, DocumentEncoder, EncodedDocument, Rejection, content_hash, key_hash, validate_indexed,
)
from .forgetting import DecayedCounter
from .open_vocabulary import OpenVocabulary
from .refinement import Reservoir
from .sketch import SketchedCooccurrence
from .text import DEFAULT_PATTERN, Tokenizer
from .text_batch import TextBatchEncoder
from .trackers import RandomProjectionTracker, n_projections_for_topics
from .vocabulary import Vocabulary
from .window import DocumentWindow

TEXT_BATCH = 512  # raw texts encoded per compiled pass (learn_many)
EMPTY, NO_KNOWN_WORDS, TOO_SHORT, ACCEPTED = range(4)  # outcomes of a batch-encoded text, rejections first

FADING_RATIO = 0.25  # see Ingest.active_view
RejectHandler = Callable[[Rejection, Any, Any], None]


class PendingDocuments:
    """Accepted documents waiting for the ingest kernel, in arrival order: single documents
    (:meth:`append`) and blocks of them (:meth:`extend`), each with its key hash and, when
    ``dated`` (a half-life in stream time), its stream time (NaN: none)."""

    def __init__(self, dated: bool):
        self.dated = dated
        self.blocks: list[DocumentBatch] = []
        self.singles: list[tuple[np.ndarray, np.ndarray]] = []  # appended since the last block
        self.single_keys: list[int] = []
        self.times: list[float] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, encoded: EncodedDocument, key_hash: int, stream_time) -> None:
        self.singles.append((encoded.ids, encoded.counts))
        self.single_keys.append(key_hash)
        self._date([stream_time])
        self.count += 1

    def extend(self, block: DocumentBatch, stream_times: list) -> None:
        self._seal()
        self.blocks.append(block)
        self._date(stream_times)
        self.count += len(block)

    def take(self) -> tuple[DocumentBatch, np.ndarray | None]:
        """Every pending document as one batch, with their stream times (None when not dated)."""
        self._seal()
        batch = self.blocks[0] if len(self.blocks) == 1 else DocumentBatch.concatenate(self.blocks)
        times = np.array(self.times) if self.dated else None
        self.blocks, self.times, self.count = [], [], 0
        return batch, times

    def _seal(self) -> None:
        if self.singles:
            self.blocks.append(DocumentBatch.from_pairs(self.singles, self.single_keys))
            self.singles, self.single_keys = [], []

    def _date(self, stream_times) -> None:
        if self.dated:
            self.times.extend(np.nan if t is None else float(t) for t in stream_times)


class Ingest:
    """The statistics a model learns and everything that feeds them.

    ``lineage`` (a :class:`~streamtopics.lineage.RefreshState`) is read when a word is retired (an
    anchor of the current snapshot never is; its warm-start row is reset); ``refreshing`` says
    whether a background refresh runs (no word is retired meanwhile); ``accepted`` is called
    with every accepted document once it is buffered (the snapshot has not seen it: drift
    measures it as held out). ``documents_until_check`` says how many accepted documents may be
    buffered before one must be handed to ``accepted`` (None: any number)."""

    def __init__(self, config: ModelConfig, tokenizer: Tokenizer | None, on_reject: RejectHandler | None,
                 lineage, accepted: Callable[[EncodedDocument], None], refreshing: Callable[[], bool],
                 documents_until_check: Callable[[], int | None]):
        self.config = config
        self.tokenizer = tokenizer or Tokenizer()
        self.encoder = DocumentEncoder(self.tokenizer, config.max_text_chars)
        self.on_reject = on_reject
        self.lineage = lineage
        self.accepted = accepted
        self.refreshing = refreshing
        self.documents_until_check = documents_until_check
        self.vocabulary: Vocabulary | None = None
        self.stats: CooccurrenceStats | SketchedCooccurrence | None = None
        self.tracker: RandomProjectionTracker | None = None
        self.activity: DecayedCounter | None = None
        self.window: DocumentWindow | None = None
        self.open_vocabulary = (None if config.max_vocabulary is None else OpenVocabulary(
            config.max_vocabulary, config.admit_df, config.vocabulary_sketch_size, config.retire_df))
        self.replaced_slots: set[int] = set()  # vocabulary slots given to another word since the snapshot
        self.admitted_at: dict[int, float] = {}  # slot -> decay clock when its word was admitted (grace)
        self.text_encoder: TextBatchEncoder | None = None  # built for the vocabulary in force
        self.reservoir = self.excerpts = None
        if config.refine_iterations > 0:
            kind = "uniform" if config.half_life is None else "recent"
            capacity = config.resolved_reservoir_size()
            self.reservoir = Reservoir(capacity, kind)
            self.excerpts = DocumentExcerpts(capacity, kind)  # the text of the reservoir's documents
        self.warmup: list[tuple[dict, Any, float | None, str | None]] = []  # (counts, key, stream time, excerpt)
        self.pending = PendingDocuments(dated=config.half_life_unit == "stream" and config.half_life is not None)
        self.rejections: Counter = Counter()
        self.oov_tokens = 0.0
        self.documents_truncated = 0
        self.stream_time = None

    # ------------------------------------------------------------------ documents in
    def advance_clock(self, stream_time) -> None:
        """The stream clock never goes back: an older time leaves it where it is."""
        if stream_time is not None:
            self.stream_time = stream_time if self.stream_time is None else max(self.stream_time, stream_time)

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

    def learn_many(self, documents: list, keys: list, stream_times: list) -> None:
        """:meth:`learn_one` for every document, in order (each dated by its stream time). Raw
        ASCII text is tokenized and looked up ``TEXT_BATCH`` documents at a time in one compiled
        pass (:class:`~streamtopics.text_batch.TextBatchEncoder`) and accepted a segment at a
        time (:meth:`_accept_encoded`): the same encoded documents and rejections as one at a
        time, accepted in the same order, so the same statistics."""
        i = 0
        while i < len(documents):
            if not self._batch_encodable():  # warm-up, open vocabulary or a custom token pattern
                self.advance_clock(stream_times[i])
                self.learn_one(documents[i], keys[i])
                i += 1
                continue
            stop = min(len(documents), i + TEXT_BATCH)
            batched = [d for d in range(i, stop) if TextBatchEncoder.handles(documents[d], self.config.max_text_chars)]
            encoded = self._text_encoder().encode([documents[d] for d in batched]) if batched else None
            runs = np.split(np.arange(len(batched)), np.flatnonzero(np.diff(batched) != 1) + 1) if batched else []
            for run in runs:  # consecutive documents the encoder took; the others one at a time
                first, last = batched[run[0]], batched[run[-1]] + 1
                self._learn_one_at_a_time(documents, keys, stream_times, i, first)
                self._accept_encoded(encoded, int(run[0]), documents[first:last], keys[first:last],
                                     stream_times[first:last])
                i = last
            self._learn_one_at_a_time(documents, keys, stream_times, i, stop)
            i = stop

    def _learn_one_at_a_time(self, documents, keys, stream_times, start: int, stop: int) -> None:
        for d in range(start, stop):
            self.advance_clock(stream_times[d])
            self.learn_one(documents[d], keys[d])

    def _accept_encoded(self, encoded, row: int, documents: list, keys: list, stream_times: list) -> None:
        """Accept the texts ``documents`` encoded as rows ``row, row + 1, ...`` of ``encoded`` (a
        :class:`~streamtopics.text_batch.EncodedTexts`): what :meth:`_accept` does to each in turn,
        a segment at a time. A segment ends at the document that fills the buffer (the kernel
        runs on the same documents) or that the model must check for a refresh, which then sees
        the buffer, reservoir, clock and counters as one at a time would leave them; only a
        rejection's ``on_reject`` may run before the earlier accepted documents of its segment
        are buffered."""
        n = len(documents)
        indptr = encoded.indptr[row:row + n + 1]
        run = DocumentBatch(indptr, encoded.indices, encoded.counts, np.zeros(n, np.uint64))
        cumulative = np.concatenate(([0.0], np.cumsum(encoded.counts[indptr[0]:indptr[-1]])))
        known = cumulative[indptr[1:] - indptr[0]] - cumulative[indptr[:-1] - indptr[0]]  # whole counts: exact
        outcome = np.full(n, ACCEPTED)
        outcome[known < 2] = TOO_SHORT
        outcome[indptr[1:] == indptr[:-1]] = NO_KNOWN_WORDS
        outcome[encoded.tokens[row:row + n] == 0] = EMPTY
        oov = encoded.oov[row:row + n]
        clocks = self._running_clock(stream_times)
        accepted = np.flatnonzero(outcome == ACCEPTED)
        start, a = 0, 0  # the segment's first document and first accepted one (index into accepted)
        while start < n:
            left = len(accepted) - a
            until = self.documents_until_check()
            if until == 0 and left:  # this one goes through the model's check: one at a time
                d = int(accepted[a])
                self._reject_outcomes(outcome, oov, documents, keys, start, d)
                self.stream_time = clocks[d]
                self._accept(EncodedDocument(*self._entries(run, d), float(oov[d])), documents[d], keys[d])
                start, a = d + 1, a + 1
                continue
            room = max(self.config.batch_size - len(self.pending), 1)
            limit = room if until is None else min(room, until + 1)
            if left >= limit:  # the segment ends at the document that fills the buffer or is checked
                take, stop = limit, int(accepted[a + limit - 1]) + 1
            else:  # it runs to the end, rejections after the last accepted document included
                take, stop = left, n
            rows = accepted[a:a + take]
            self._reject_outcomes(outcome, oov, documents, keys, start, stop)
            self.stream_time = clocks[stop - 1]
            if take:
                self._buffer_block(run.select(rows), rows, documents, keys, clocks)
            if len(self.pending) >= self.config.batch_size:
                self.flush()
            if until is not None and take == until + 1:
                d = int(rows[-1])
                self.accepted(EncodedDocument(*self._entries(run, d), float(oov[d])))
            start, a = stop, a + take

    def _running_clock(self, stream_times: list) -> list:
        """The stream clock after each of these documents (:meth:`advance_clock` in turn)."""
        now, clocks = self.stream_time, []
        for t in stream_times:
            if t is not None:
                now = t if now is None else max(now, t)
            clocks.append(now)
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
                rejection = Rejection("too_short", "fewer than 2 known tokens")
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

    def learn_indexed(self, documents, keys, stream_times=None) -> None:
        """Absorb pre-indexed counts (a scipy sparse matrix or a :class:`DocumentBatch`)."""
        if self.vocabulary is None:
            raise ValueError("pre-indexed documents need a vocabulary: pass one to the model")
        if not isinstance(documents, DocumentBatch):
            documents = DocumentBatch.from_csr(documents, keys)
        elif keys is not None:
            documents = DocumentBatch(documents.indptr, documents.indices, documents.counts,
                                      np.asarray([key_hash(k) for k in keys], np.uint64))
        if stream_times is not None:
            stream_times = list(stream_times)
            if len(stream_times) != len(documents):
                raise ValueError("one stream time per document")
        bounds = zip(documents.indptr[:-1], documents.indptr[1:])
        for d, (a, b) in enumerate(bounds):
            if stream_times is not None:
                self.advance_clock(stream_times[d])
            ids, counts = documents.indices[a:b], documents.counts[a:b]
            rejection = validate_indexed(ids, counts, len(self.vocabulary))
            if rejection is None and (np.any(np.diff(ids) <= 0)):
                rejection = Rejection("invalid_word_id", "ids must be sorted and unique")
            if rejection is not None:
                self.reject(rejection, (ids, counts), int(documents.keys[d]))
                continue
            positive = counts > 0
            self._accept(EncodedDocument(ids[positive], counts[positive]), None, None,
                         hashed_key=int(documents.keys[d]))

    def _accept(self, encoded, document, key, hashed_key: int | None = None, text: str | None = None) -> None:
        """Buffer an encoded document (or count its rejection). ``text``: the document's text
        when ``document`` is its counts (a warm-up document), for its excerpt."""
        if isinstance(encoded, Rejection):
            self.reject(encoded, document, key)
            return
        self.oov_tokens += encoded.oov_tokens
        self.documents_truncated += encoded.truncated
        if encoded.counts.sum() < 2:
            self.reject(Rejection("too_short", "fewer than 2 known tokens"), document, key)
            return
        if hashed_key is None:
            hashed_key = key_hash(key) if key is not None else content_hash(encoded.ids, encoded.counts)
        self.pending.append(encoded, hashed_key, self.stream_time)
        if self.reservoir is not None:
            self.reservoir.add(encoded.ids, encoded.counts, hashed_key)
            self.excerpts.add(hashed_key, key, document if text is None else text)
        if len(self.pending) >= self.config.batch_size:
            self.flush()
        self.accepted(encoded)

    def reject(self, rejection: Rejection, document, key) -> None:
        self.rejections[rejection.reason] += 1
        if self.on_reject is not None:
            self.on_reject(rejection, document, key)

    def encode_many(self, documents) -> tuple[DocumentBatch, list[Rejection | None]]:
        """Encode documents against the vocabulary without learning anything."""
        if self.vocabulary is None:
            raise RuntimeError("the model has no vocabulary yet")
        encoded, outcome = [], []
        for document in documents:
            result = self.encoder.encode(document, self.vocabulary)
            if isinstance(result, Rejection):
                outcome.append(result)
                result = EncodedDocument(np.zeros(0, np.int32), np.zeros(0))
            else:
                outcome.append(None)
            encoded.append(result)
        return DocumentBatch.from_documents(encoded, [0] * len(encoded)), outcome

    # ------------------------------------------------------------------ statistics
    def flush(self) -> None:
        """Run the ingest kernel over the buffered documents."""
        if not len(self.pending):
            return
        self._ingest(*self.pending.take())

    def _ingest(self, batch: DocumentBatch, stream_times: np.ndarray | None = None) -> None:
        """Every statistic the model keeps is updated here, from one batch."""
        self.stats.update(batch, stream_times)
        if self.window is not None:
            leaving = self.window.push(batch.select(np.flatnonzero(batch.lengths >= 2.0)))
            if leaving is not None:
                self.stats.subtract(leaving)
                if self.tracker is not None:
                    self.tracker.subtract(leaving.indptr, leaving.indices, leaving.counts, leaving.keys)
        if self.tracker is not None or self.activity is not None:
            kept = batch.lengths >= 2.0  # the documents the co-occurrence sums count
            if not kept.all():
                batch = batch.select(np.flatnonzero(kept))
                stream_times = None if stream_times is None else stream_times[kept]
        if self.tracker is not None:
            self.tracker.update(batch.indptr, batch.indices, batch.counts, batch.keys, stream_times)
        if self.activity is not None:
            self.activity.update(batch.indptr, batch.indices, stream_times)

    @property
    def documents_absorbed(self) -> int:
        """Documents whose statistics are in the model (buffered ones included)."""
        if self.stats is None:
            return 0
        return self.stats.n_docs + len(self.pending)

    def statistics(self) -> CooccurrenceStats | SketchedCooccurrence:
        """The co-occurrence sums with every buffered document included."""
        if self.vocabulary is None:
            self.freeze_vocabulary()
        self.flush()
        return self.stats

    def merge(self, other: "Ingest") -> None:
        """Add another ingest's statistics (a disjoint sub-stream over the same vocabulary)."""
        if self.config.window is not None or other.config.window is not None:
            raise ValueError("models with a sliding window cannot be merged (the windows would overlap in time)")
        if other.vocabulary != self.vocabulary or self.vocabulary is None:
            raise ValueError("models can only be merged over the same, fixed vocabulary")
        if self.tokenizer.get_config() != other.tokenizer.get_config():
            raise ValueError(f"models can only be merged when they tokenize alike: {self.tokenizer!r} and "
                             f"{other.tokenizer!r} (a model saved before strip_mail existed resumes without it)")
        if (self.tracker is None) != (other.tracker is None) or (self.tracker is not None and (
                (self.tracker.seed, self.tracker.n_projections) != (other.tracker.seed, other.tracker.n_projections))):
            raise ValueError("models can only be merged when both keep the same tracker (anchor_method, "
                             "n_projections, seed) or neither does")
        mine, theirs = self.statistics(), other.statistics()
        if type(mine) is not type(theirs):
            raise ValueError("models can only be merged when both keep the same kind of statistics "
                             "(cooccurrence='exact' or 'sketch')")
        mine.merge(theirs)
        if self.activity is not None:
            self.activity.merge(other.activity)
        if self.tracker is not None:
            self.tracker.merge(other.tracker)
        if self.reservoir is not None and other.reservoir is not None:
            self.reservoir.merge(other.reservoir)
            self.excerpts.merge(other.excerpts)
        self.rejections.update(other.rejections)
        self.oov_tokens += other.oov_tokens
        self.documents_truncated += other.documents_truncated

    def active_view(self, view, activity):
        """With forgetting: the view whose document frequencies are zero for the words not
        recently active (see ``activity_half_life``), so they cannot be anchor candidates. With a
        sliding window: the view whose ``n_docs`` is the documents in the window."""
        if self.window is not None:
            out = copy.copy(view)  # the same kind of view (exact sums or a sketch's), shallow
            out.n_docs = len(self.window)
            return out
        if activity is None:
            return view
        scale = self.config.activity_half_life / self.config.half_life
        recent, df = activity.values(), np.asarray(view.document_frequency)
        threshold = self.config.min_document_frequency(view.n_docs) * scale
        # active: recent frequency passes the (rescaled) threshold and is at least a quarter of
        # the word's long-run frequency (a fading word is out ~2 activity half-lives after it stops)
        active = (recent >= threshold) & (recent >= FADING_RATIO * scale * df)
        out = copy.copy(view)
        out.document_frequency = np.where(active, df, 0.0)
        return out

    def reservoir_batch(self) -> DocumentBatch | None:
        """The refinement reservoir's documents with their key hashes, or None while it holds
        too few (or is off)."""
        if self.reservoir is None or len(self.reservoir) < 30:
            return None
        items = self.reservoir.items()
        return DocumentBatch.from_pairs([(ids, counts) for ids, counts, _ in items], [h for _, _, h in items])

    # ------------------------------------------------------------------ vocabulary
    def set_vocabulary(self, vocabulary: Vocabulary) -> None:
        """Fix the vocabulary and start empty statistics over it."""
        config = self.config
        if len(vocabulary) < config.n_topics:
            raise ValueError(f"a vocabulary of {len(vocabulary)} words cannot hold {config.n_topics} topics")
        self.vocabulary = vocabulary
        if config.cooccurrence_kind(len(vocabulary)) == "sketch":
            self.stats = SketchedCooccurrence(len(vocabulary), config.resolved_sketch_size(),
                                              config.resolved_sketch_rank(), seed=config.seed,
                                              half_life=config.half_life, half_life_unit=config.half_life_unit)
        else:
            self.stats = CooccurrenceStats(len(vocabulary), half_life=config.half_life,
                                           half_life_unit=config.half_life_unit)
        if config.window is not None:
            self.window = DocumentWindow(config.window)
        if config.half_life is not None:
            self.activity = DecayedCounter(len(vocabulary), config.activity_half_life, config.half_life_unit)
        if config.anchor_method != "fastanchors":
            n_projections = config.n_projections or n_projections_for_topics(config.n_topics)
            self.tracker = RandomProjectionTracker(len(vocabulary), n_projections, seed=config.seed,
                                                   half_life=config.half_life, half_life_unit=config.half_life_unit)

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
        (:mod:`~streamtopics.open_vocabulary`). Words that find no slot stay counted in the
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
            self.stats.clear_word(slot)
            self.activity.clear(slot)
            if self.tracker is not None:
                self.tracker.clear_word(slot)
            if self.reservoir is not None:
                self.reservoir.drop_word(slot)
            self.lineage.forget_word(slot)
            self.replaced_slots.add(slot)
        self.vocabulary = Vocabulary(vocabulary + grown)
        if grown:
            self.stats.grow(len(self.vocabulary))
            if self.tracker is not None:
                self.tracker.grow(len(self.vocabulary))
            if self.activity is not None:
                self.activity.grow(len(self.vocabulary))
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
