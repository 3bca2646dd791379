"""StreamingTopicModel: the public API that every source, sink and service uses."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .alignment import MissingTopic, align_topics
from .anchors import default_min_document_frequency
from .cooccurrence import CooccurrenceStats
from .forgetting import HALF_LIFE_UNITS, DecayedCounter
from .history import TopicHistory
from .window import DocumentWindow
from .open_vocabulary import OpenVocabulary
from .refinement import Reservoir, choose_alpha_scale, refine_topics
from .policy import DriftMonitor, RefreshPolicy
from .documents import (
    DocumentBatch, DocumentEncoder, EncodedDocument, Rejection, content_hash, key_hash, validate_indexed,
)
from .inference import infer_mixtures
from .refresh import (
    ANCHOR_METHODS, DEFAULT_RP_MIN_SUPPORT, NotEnoughCandidatesError, match_columns, recover_topics, select_anchors,
)
from .snapshot import DISPLAY_RELEVANCE, TopicSnapshot
from .state import CorruptStateError, read_state, write_state
from .text import Tokenizer
from .trackers import RandomProjectionTracker, n_projections_for_topics
from .vocabulary import Vocabulary

FADING_RATIO = 0.25  # see _active_view
RejectHandler = Callable[[Rejection, Any, Any], None]


EVENT_WORDS = 10  # top words compared by change events (births and deaths show the first 8)


class StreamingTopicModel:
    """An anchor-word topic model whose statistics grow one document at a time.

    Documents update exact co-occurrence sums in time proportional to the document;
    :meth:`refresh` turns the sums into topics (anchors, warm-started recovery, alignment of
    topic ids with the previous snapshot) and publishes a versioned :class:`TopicSnapshot`.

    Parameters
    ----------
    n_topics
        K, the number of topics.
    vocabulary
        A :class:`Vocabulary`, a list of words, or a path to a one-word-per-line file. If None,
        the vocabulary is learned from the first ``warmup_documents`` documents (the
        ``vocabulary_size`` words of highest document frequency) and then frozen; those
        documents are absorbed once it is built, so none is lost.
    anchor_min_df
        Documents a word must occur in to be a candidate anchor; ``"auto"`` grows with the
        stream (:func:`~streamtopics.anchors.default_min_document_frequency`).
    max_anchor_candidates
        At most this many candidates (the most frequent) enter the anchor search.
    projection_dim
        Candidate rows are randomly projected to this many dimensions when the vocabulary is
        larger (None: never).
    anchor_method
        How anchors are selected (:func:`~streamtopics.refresh.select_anchors`):
        ``"fastanchors"`` (default; FastAnchorWords over the frequent words), ``"rp"`` (Ding et
        al.'s random-projection trackers, their candidates clustered into K groups) or
        ``"hybrid"`` (FastAnchorWords over the trackers' candidates only). ``"rp"`` and
        ``"hybrid"`` keep a :class:`~streamtopics.trackers.RandomProjectionTracker` (V x
        ``n_projections`` float64) updated with every document.
    n_projections
        Random directions P of the tracker (None: ``n_projections_for_topics(n_topics)``).
    rp_min_support
        Fraction of the documents seen a word must occur in to be a tracker candidate (and at
        least the ``anchor_min_df`` documents).
    recovery
        ``"l2"`` (default) or ``"kl"``.
    warm_start
        Start every word's solve from the previous refresh's solution.
    match_threshold
        A new topic keeps an old topic's id when their L1 distance is below this fraction of the
        median distance between distinct old topics (:mod:`~streamtopics.alignment`).
    change_threshold
        A kept topic whose L1 distance moved by at least this much is reported as a change.
    refresh_every
        Refresh automatically after every this many absorbed documents (None: only on demand).
    refresh_every_seconds, refresh_clock
        Also refresh automatically after this many seconds of ``"stream"`` time (the
        ``stream_time`` given to :meth:`learn_one`) or ``"wall"`` time
        (:class:`~streamtopics.policy.RefreshPolicy`).
    drift_threshold
        Also refresh when the held-out fit of recent documents against the current snapshot
        drops by this many nats per token (:class:`~streamtopics.policy.DriftMonitor`; None: off).
    refresh_in_background
        Automatic refreshes run with :meth:`refresh_async` (ingestion goes on meanwhile).
    half_life, half_life_unit
        Exponential forgetting (DESIGN 2.7): a document's weight in every sum halves each
        ``half_life`` documents absorbed after it (``half_life_unit="documents"``, the default)
        or each ``half_life`` seconds of stream time (``"stream"``: documents are dated by the
        ``stream_time`` given to :meth:`learn_one`/:meth:`learn_many`; one without a time, or
        older than the latest seen, takes the latest seen); done lazily, so ingestion stays O(document)
        (:class:`~streamtopics.forgetting.DecayClock`). None (default): exact sums. Needs
        ``anchor_method="fastanchors"`` (the trackers do not forget).
    window
        Sliding window (issue 4): the sums cover only the last ``window`` documents, each
        subtracted when it leaves (:mod:`~streamtopics.window`; keeps those documents, so memory
        grows with W). Not with ``half_life``; needs ``anchor_method="fastanchors"``.
    activity_half_life
        With forgetting, only words whose document frequency decayed with this shorter
        half-life (same unit; default ``half_life / 8``) passes the candidate threshold, rescaled, can be
        anchors, so a topic that stopped leaves the candidates quickly
        (:mod:`~streamtopics.forgetting`).
    min_prevalence
        When positive, births and deaths are those of *significant* topics: an id is born when
        its prevalence reaches this floor and dies when it falls below half of it or vanishes; minor
        topics (e.g. a spare topic slot picking up noise) make no birth or death events. 0
        (default): every new id is a birth and every vanished id a death.
    refine_iterations
        Seeded refinement (DESIGN 2.5, :mod:`~streamtopics.refinement`): after recovery, at most
        this many KL-tEM iterations (it stops once the held-out likelihood has passed its peak)
        over a reservoir of ``reservoir_size`` documents (the most recent ones with forgetting
        on, else a uniform sample of the stream: :class:`~streamtopics.refinement.Reservoir`),
        keeping the iterate with the best held-out likelihood (never worse than the recovered
        topics), and Dirichlet alpha's scale chosen by held-out likelihood. Default 10 (0: off);
        it lifts real-text coherence most on young streams and costs a fraction of a second per
        refresh (BENCHMARKS.md, topic quality).
    background_topic
        Recover a background distribution next to the K topics (``snapshot.background``): the
        unigram distribution joins the anchors as one more pseudo-anchor, and the part of each
        word it explains leaves the topics, so words common to every document do not lead every
        topic (:func:`~streamtopics.refresh.recover_topics`). Default True; used with
        ``recovery="l2"`` (RecoverKL recovers the topics alone).
    death_grace
        Refreshes a topic may stay absent before its death is announced: one that returns
        within them (matched by anchor, L1 or top words to its last appearance) keeps its id and
        makes no event. 0: a topic missing from one snapshot dies at once. Default 2.
    max_df
        A document-frequency ceiling (a fraction of the documents, 0 to 1): words in more of them
        are never anchors and belong to the background alone (a data-driven stop list for mail
        or newswire boilerplate such as "writes", "said", "reuter"). Needs ``background_topic``.
        None (default): no ceiling.
    max_vocabulary
        Open vocabulary (:mod:`~streamtopics.open_vocabulary`): unknown words are counted by a
        space-saving sketch of ``vocabulary_sketch_size`` counters and a word found in at least
        ``admit_df`` documents joins the vocabulary, up to this many words (None: the vocabulary
        stays fixed). With forgetting on, a full vocabulary makes room by retiring words whose
        decayed document frequency fell below ``retire_df`` (default ``admit_df / 4``). Needs
        ``anchor_method="fastanchors"``.
    history_size
        Records kept by :attr:`history` (:class:`~streamtopics.history.TopicHistory`).
    batch_size
        Documents buffered before the ingest kernel runs; results do not depend on it.
    on_reject
        Called as ``on_reject(rejection, document, key)`` for each rejected document (e.g. to
        route it to a dead-letter topic). Rejections are also counted in :attr:`rejections`.

    Examples
    --------
    >>> model = StreamingTopicModel(n_topics=2, vocabulary=["apple", "pear", "goal", "match"],
    ...                             anchor_min_df=1)
    >>> for _ in range(20):
    ...     model.learn_one("apple pear apple")
    ...     model.learn_one("goal match goal")
    >>> model.learn_one("")          # bad input is counted, never raised
    >>> model.rejections
    Counter({'empty': 1})
    >>> snapshot = model.refresh()
    >>> sorted(sorted(w for w, _ in words[:2]) for words in snapshot.top_words(2).values())
    [['apple', 'pear'], ['goal', 'match']]
    >>> mixture = model.transform_one("apple pear")
    >>> round(max(mixture.values()), 3)
    1.0
    """

    def __init__(self, n_topics: int, vocabulary=None, *, vocabulary_size: int = 10_000,
                 warmup_documents: int = 1000, tokenizer: Tokenizer | None = None,
                 anchor_min_df: int | str = "auto", max_anchor_candidates: int | None = 3000,
                 projection_dim: int | None = 1000, anchor_cleanup: bool = True,
                 anchor_method: str = "fastanchors", n_projections: int | None = None,
                 rp_min_support: float = DEFAULT_RP_MIN_SUPPORT, recovery: str = "l2",
                 recovery_tol: float = 1e-5, recovery_max_iter: int = 500, warm_start: bool = True,
                 match_threshold: float = 0.5, change_threshold: float = 0.5,
                 refresh_every: int | None = None, batch_size: int = 2048,
                 max_text_chars: int = 1_000_000, seed: int = 0, on_reject: RejectHandler | None = None,
                 refresh_every_seconds: float | None = None, refresh_clock: str = "stream",
                 drift_threshold: float | None = None, refresh_in_background: bool = False,
                 half_life: float | None = None, activity_half_life: float | None = None,
                 half_life_unit: str = "documents",
                 min_prevalence: float = 0.0, history_size: int = 512, refine_iterations: int = 10,
                 reservoir_size: int = 2000, max_vocabulary: int | None = None, admit_df: int = 20,
                 vocabulary_sketch_size: int = 1000, retire_df: float | None = None, window: int | None = None,
                 background_topic: bool = True, max_df: float | None = None, death_grace: int = 2):
        if n_topics < 1:
            raise ValueError("n_topics must be at least 1")
        if anchor_method not in ANCHOR_METHODS:
            raise ValueError(f"unknown anchor_method {anchor_method!r}; use one of {ANCHOR_METHODS}")
        if half_life is not None and anchor_method != "fastanchors":
            raise ValueError("forgetting (half_life) needs anchor_method='fastanchors': the trackers keep exact sums")
        if max_vocabulary is not None and anchor_method != "fastanchors":
            raise ValueError("an open vocabulary needs anchor_method='fastanchors': the trackers have a fixed size")
        if window is not None and (half_life is not None or anchor_method != "fastanchors"):
            raise ValueError("a sliding window excludes half_life and needs anchor_method='fastanchors'")
        self.n_topics = int(n_topics)
        self.anchor_method = anchor_method
        self.window = None if window is None else int(window)
        self._window: DocumentWindow | None = None
        self.max_vocabulary = max_vocabulary
        self.admit_df = int(admit_df)
        self.vocabulary_sketch_size = int(vocabulary_sketch_size)
        self.retire_df = retire_df
        self.open_vocabulary = (None if max_vocabulary is None
                                else OpenVocabulary(max_vocabulary, admit_df, vocabulary_sketch_size, retire_df))
        self._replaced_slots: set[int] = set()  # vocabulary slots given to another word since the snapshot
        self._admitted_at: dict[int, float] = {}  # slot -> decay clock when its word was admitted (grace)
        self.half_life = None if half_life is None else float(half_life)
        self.activity_half_life = None if half_life is None else float(activity_half_life or half_life / 8)
        if half_life_unit not in HALF_LIFE_UNITS:
            raise ValueError(f"half_life_unit must be one of {HALF_LIFE_UNITS}")
        self.half_life_unit = half_life_unit
        self.activity: DecayedCounter | None = None
        self.refresh_every_seconds = refresh_every_seconds
        self.refresh_clock = refresh_clock
        self.drift_threshold = drift_threshold
        self.refresh_in_background = bool(refresh_in_background)
        self.history_size = int(history_size)
        self.min_prevalence = float(min_prevalence)
        self.refine_iterations = int(refine_iterations)
        self.background_topic = bool(background_topic)
        if max_df is not None and not (0.0 < float(max_df) <= 1.0):
            raise ValueError("max_df is a fraction of the documents, in (0, 1]")
        if max_df is not None and not self.background_topic:
            raise ValueError("max_df needs background_topic=True: the ceiling's words go to the background")
        self.max_df = None if max_df is None else float(max_df)
        self.reservoir_size = int(reservoir_size)
        self.reservoir = None
        if self.refine_iterations > 0:
            self.reservoir = Reservoir(self.reservoir_size, "uniform" if self.half_life is None else "recent")
        self._significant: set[int] = set()
        if death_grace < 0:
            raise ValueError("death_grace is a number of refreshes, at least 0")
        self.death_grace = int(death_grace)
        self._missing: dict[int, MissingTopic] = {}  # absent topics within their grace, by id
        self.policy = RefreshPolicy(None, refresh_every_seconds, refresh_clock,
                                    None if drift_threshold is None else DriftMonitor(drift_threshold))
        self.history = TopicHistory(self.history_size)
        self._stream_time = None
        self._refresh_lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending_refresh: Future | None = None
        self.n_projections = None if n_projections is None else int(n_projections)
        self.rp_min_support = float(rp_min_support)
        self.vocabulary_size = int(vocabulary_size)
        self.warmup_documents = int(warmup_documents)
        self.tokenizer = tokenizer or Tokenizer()
        self.anchor_min_df = anchor_min_df
        self.max_anchor_candidates = max_anchor_candidates
        self.projection_dim = projection_dim
        self.anchor_cleanup = anchor_cleanup
        self.recovery = recovery
        self.recovery_tol = recovery_tol
        self.recovery_max_iter = recovery_max_iter
        self.warm_start = warm_start
        self.match_threshold = match_threshold
        self.change_threshold = change_threshold
        self.refresh_every = refresh_every
        self.batch_size = int(batch_size)
        self.max_text_chars = int(max_text_chars)
        self.seed = int(seed)
        self.on_reject = on_reject
        self._encoder = DocumentEncoder(self.tokenizer, self.max_text_chars)

        self.vocabulary: Vocabulary | None = None
        self.stats: CooccurrenceStats | None = None
        self.tracker: RandomProjectionTracker | None = None
        self._warmup: list[tuple[dict, Any, float | None]] = []  # (counts, key, stream time)
        self._pending: list[EncodedDocument] = []
        self._pending_keys: list[int] = []
        self._pending_times: list[float] = []  # half-life in stream time: each pending document's date
        self.rejections: Counter = Counter()
        self.oov_tokens = 0.0
        self.documents_truncated = 0
        self.snapshot: TopicSnapshot | None = None
        self._coefficients: np.ndarray | None = None
        self._next_topic_id = 0
        self._absorbed_at_refresh = 0
        self.last_refresh: dict = {}
        if vocabulary is not None:
            self._set_vocabulary(_as_vocabulary(vocabulary))

    # ------------------------------------------------------------------ learning
    def learn_one(self, document, key=None, stream_time: float | None = None) -> None:
        """Absorb one document: raw text (str or UTF-8 bytes), a token list, or a
        ``{word: count}`` mapping. ``key`` (bytes, str or int) identifies the document; without
        one its content does. ``stream_time`` (seconds, e.g. the message timestamp) dates the
        document for a half-life in stream time, drives ``refresh_every_seconds`` on the stream
        clock and stamps automatic snapshots. The stream clock never goes back: a document
        older than one seen before is dated at the latest time seen."""
        if stream_time is not None:
            self._stream_time = stream_time if self._stream_time is None else max(self._stream_time, stream_time)
        if self.vocabulary is None:
            counts, rejection, truncated = self._encoder.word_counts(document)
            if rejection is not None:
                self._reject(rejection, document, key)
                return
            self.documents_truncated += truncated
            self._warmup.append((counts, key, self._stream_time))
            if len(self._warmup) >= self.warmup_documents:
                self._freeze_vocabulary()
            return
        if self.open_vocabulary is not None:
            counts, rejection, truncated = self._encoder.word_counts(document)
            if rejection is not None:
                self._reject(rejection, document, key)
                return
            unknown = [w for w in counts if w not in self.vocabulary.index]
            if unknown:
                ready = self.open_vocabulary.observe(unknown)
                if ready:
                    self._admit(ready)
            encoded = self._encoder.encode_counts(counts, self.vocabulary)
            if not isinstance(encoded, Rejection):
                encoded.truncated = truncated
            self._accept(encoded, document, key)
            return
        encoded = self._encoder.encode(document, self.vocabulary)
        self._accept(encoded, document, key)

    def _admit(self, words: list[str]) -> None:
        """Give words ready for admission a vocabulary slot: a new one at the end while there is
        room, else (forgetting on) the slot of a word that fell out of use
        (:mod:`~streamtopics.open_vocabulary`). Words that find no slot stay counted in the
        sketch. A background refresh works on its own copy and is not waited for (the warm start
        pads what it publishes); no word is retired while one runs."""
        room = max(self.max_vocabulary - len(self.vocabulary), 0)
        slots = self._retirable_slots(len(words) - room) if len(words) > room else []
        words = words[: room + len(slots)]
        if not words:
            return
        self._flush()  # buffered documents are encoded against the vocabulary as it was
        grown, reused = words[:room], words[room:]
        vocabulary = list(self.vocabulary.words)
        for slot, word in zip(slots, reused):
            self.open_vocabulary.retire(vocabulary[slot], self.documents_absorbed)
            vocabulary[slot] = word
            self.stats.clear_word(slot)
            self.activity.clear(slot)
            if self.reservoir is not None:
                self.reservoir.drop_word(slot)
            if self._coefficients is not None:
                self._coefficients[slot] = 1.0 / self._coefficients.shape[1]
            self._replaced_slots.add(slot)
        self.vocabulary = Vocabulary(vocabulary + grown)
        if grown:
            self.stats.grow(len(self.vocabulary))
            if self.activity is not None:
                self.activity.grow(len(self.vocabulary))
        for word in words:
            self.open_vocabulary.admit(word, self.documents_absorbed)
        if self.activity is not None:
            now = self.stats.decay.clock
            self._admitted_at = {i: t for i, t in self._admitted_at.items() if now - t < self.half_life}
            self._admitted_at.update((self.vocabulary.index[w], now) for w in words)

    def _retirable_slots(self, wanted: int) -> list[int]:
        """Up to ``wanted`` words that fell out of use, least used first: decayed document
        frequency below ``retire_df``, not an anchor of the current snapshot, and not admitted
        within the last half-life (a new word starts from zero: without that grace the next
        admission would evict it). None without forgetting (nothing fades) or while a
        background refresh runs."""
        if self.activity is None or (self._pending_refresh is not None and not self._pending_refresh.done()):
            return []
        frequency = self.stats.document_frequency * self.stats.decay.scale()
        faded = np.flatnonzero(frequency < self.open_vocabulary.retire_df)
        now = self.stats.decay.clock
        protected = {i for i, t in self._admitted_at.items() if now - t < self.half_life}
        if self.snapshot is not None:
            protected |= {self.vocabulary.index.get(w) for w in self.snapshot.anchors}
        faded = [int(i) for i in faded[np.argsort(frequency[faded], kind="stable")] if int(i) not in protected]
        return faded[:wanted]

    def learn_many(self, documents, keys: Iterable | None = None, stream_times: Iterable | None = None) -> None:
        """Absorb many documents: an iterable of anything :meth:`learn_one` takes, or
        pre-indexed counts (a scipy sparse matrix, documents x vocabulary, or a
        :class:`DocumentBatch`) for speed. ``keys`` and ``stream_times``, when given, have one
        entry per document (see :meth:`learn_one`)."""
        if isinstance(documents, DocumentBatch) or hasattr(documents, "tocsr"):
            self._learn_indexed(documents, keys, stream_times)
            return
        if keys is None and stream_times is None:
            for document in documents:
                self.learn_one(document)
            return
        documents = list(documents)
        keys = [None] * len(documents) if keys is None else keys
        stream_times = [None] * len(documents) if stream_times is None else stream_times
        for document, key, stream_time in zip(documents, keys, stream_times, strict=True):
            self.learn_one(document, key, stream_time)

    def _learn_indexed(self, documents, keys, stream_times=None) -> None:
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
            if stream_times is not None and stream_times[d] is not None:
                self._stream_time = (stream_times[d] if self._stream_time is None
                                     else max(self._stream_time, stream_times[d]))
            ids, counts = documents.indices[a:b], documents.counts[a:b]
            rejection = validate_indexed(ids, counts, len(self.vocabulary))
            if rejection is None and (np.any(np.diff(ids) <= 0)):
                rejection = Rejection("invalid_word_id", "ids must be sorted and unique")
            if rejection is not None:
                self._reject(rejection, (ids, counts), int(documents.keys[d]))
                continue
            positive = counts > 0
            self._accept(EncodedDocument(ids[positive], counts[positive]), None, None,
                         hashed_key=int(documents.keys[d]))

    def _accept(self, encoded, document, key, hashed_key: int | None = None) -> None:
        if isinstance(encoded, Rejection):
            self._reject(encoded, document, key)
            return
        self.oov_tokens += encoded.oov_tokens
        self.documents_truncated += encoded.truncated
        if encoded.counts.sum() < 2:
            self._reject(Rejection("too_short", "fewer than 2 known tokens"), document, key)
            return
        if hashed_key is None:
            hashed_key = key_hash(key) if key is not None else content_hash(encoded.ids, encoded.counts)
        if self.policy.drift is not None and self.snapshot is not None:
            self.policy.drift.observe(encoded.ids, encoded.counts, self.snapshot)  # held out: not learned yet
        self._pending.append(encoded)
        self._pending_keys.append(hashed_key)
        if self.half_life_unit == "stream" and self.half_life is not None:
            self._pending_times.append(np.nan if self._stream_time is None else float(self._stream_time))
        if self.reservoir is not None:
            self.reservoir.add(encoded.ids, encoded.counts, hashed_key)
        if len(self._pending) >= self.batch_size:
            self._flush()
        self._maybe_refresh()

    def _maybe_refresh(self) -> None:
        policy = self.policy
        policy.every_documents = self.refresh_every
        policy._documents = self._absorbed_at_refresh
        if not policy.due(self.documents_absorbed, self._stream_time):
            return
        if self.refresh_in_background:
            if self._pending_refresh is None or self._pending_refresh.done():
                self.refresh_async(stream_time=self._stream_time)
        else:
            try:
                self.refresh(stream_time=self._stream_time)
            except NotEnoughCandidatesError as error:
                # A young stream may not support K topics yet: an automatic refresh must not stop
                # it. Try again after the next interval; an explicit refresh() still raises.
                self._absorbed_at_refresh = self.documents_absorbed
                self.last_refresh = {"skipped": str(error)}

    def _reject(self, rejection: Rejection, document, key) -> None:
        self.rejections[rejection.reason] += 1
        if self.on_reject is not None:
            self.on_reject(rejection, document, key)

    def _flush(self) -> None:
        if not self._pending:
            return
        batch = DocumentBatch.from_documents(self._pending, self._pending_keys)
        times = np.array(self._pending_times) if self._pending_times else None
        self._pending, self._pending_keys, self._pending_times = [], [], []
        self._ingest(batch, times)

    def _ingest(self, batch: DocumentBatch, stream_times: np.ndarray | None = None) -> None:
        """Every statistic the model keeps is updated here, from one batch."""
        self.stats.update(batch, stream_times)
        if self._window is not None:
            leaving = self._window.push(batch.select(np.flatnonzero(batch.lengths >= 2.0)))
            if leaving is not None:
                self.stats.subtract(leaving)
        if self.tracker is not None or self.activity is not None:
            kept = batch.lengths >= 2.0  # the documents the co-occurrence sums count
            if not kept.all():
                batch = batch.select(np.flatnonzero(kept))
                stream_times = None if stream_times is None else stream_times[kept]
        if self.tracker is not None:
            self.tracker.update(batch.indptr, batch.indices, batch.counts, batch.keys)
        if self.activity is not None:
            self.activity.update(batch.indptr, batch.indices, stream_times)

    def _set_vocabulary(self, vocabulary: Vocabulary) -> None:
        if len(vocabulary) < self.n_topics:
            raise ValueError(f"a vocabulary of {len(vocabulary)} words cannot hold {self.n_topics} topics")
        self.vocabulary = vocabulary
        self.stats = CooccurrenceStats(len(vocabulary), half_life=self.half_life, half_life_unit=self.half_life_unit)
        if self.window is not None:
            self._window = DocumentWindow(self.window)
        if self.half_life is not None:
            self.activity = DecayedCounter(len(vocabulary), self.activity_half_life, self.half_life_unit)
        self.tracker = self._new_tracker(len(vocabulary))

    def _new_tracker(self, n_words: int) -> RandomProjectionTracker | None:
        if self.anchor_method == "fastanchors":
            return None
        n_projections = self.n_projections or n_projections_for_topics(self.n_topics)
        return RandomProjectionTracker(n_words, n_projections, seed=self.seed)

    def _freeze_vocabulary(self) -> None:
        """Build the vocabulary from the warm-up documents, then absorb them."""
        if not self._warmup:
            raise RuntimeError("no documents seen yet: cannot build a vocabulary")
        self._set_vocabulary(Vocabulary.from_document_counts(
            (counts for counts, _, _ in self._warmup), self.vocabulary_size))
        warmup, self._warmup = self._warmup, []
        latest = self._stream_time
        for counts, key, stream_time in warmup:
            self._stream_time = stream_time  # each warm-up document keeps its own date
            self._accept(self._encoder.encode_counts(counts, self.vocabulary), counts, key)
        self._stream_time = latest

    @property
    def documents_absorbed(self) -> int:
        """Documents whose statistics are in the model (buffered ones included)."""
        if self.stats is None:
            return 0
        return self.stats.n_docs + len(self._pending)

    @property
    def documents_rejected(self) -> int:
        return sum(self.rejections.values())

    def statistics(self) -> CooccurrenceStats:
        """The co-occurrence sums with every buffered document included."""
        if self.vocabulary is None:
            self._freeze_vocabulary()
        self._flush()
        return self.stats

    def merge(self, other: "StreamingTopicModel") -> "StreamingTopicModel":
        """Add another model's statistics (a disjoint sub-stream over the same vocabulary)."""
        if self.window is not None or other.window is not None:
            raise ValueError("models with a sliding window cannot be merged (the windows would overlap in time)")
        if other.vocabulary != self.vocabulary or self.vocabulary is None:
            raise ValueError("models can only be merged over the same, fixed vocabulary")
        if (self.tracker is None) != (other.tracker is None) or (self.tracker is not None and (
                (self.tracker.seed, self.tracker.n_projections) != (other.tracker.seed, other.tracker.n_projections))):
            raise ValueError("models can only be merged when both keep the same tracker (anchor_method, "
                             "n_projections, seed) or neither does")
        self.statistics().merge(other.statistics())
        if self.activity is not None:
            self.activity.merge(other.activity)
        if self.tracker is not None:
            self.tracker.merge(other.tracker)
        if self.reservoir is not None and other.reservoir is not None:
            self.reservoir.merge(other.reservoir)
        self.rejections.update(other.rejections)
        self.oov_tokens += other.oov_tokens
        self.documents_truncated += other.documents_truncated
        return self

    # ------------------------------------------------------------------ refresh
    def min_document_frequency(self, view=None) -> int:
        """The candidate-anchor threshold in force for the current number of documents (the
        effective, decayed number with forgetting on)."""
        if self.anchor_min_df == "auto":
            view = self.statistics().view() if view is None else view
            return default_min_document_frequency(view.n_docs)
        return int(self.anchor_min_df)

    def refresh(self, position: dict | None = None, stream_time: float | None = None) -> TopicSnapshot:
        """Recompute the topics from the current sums and publish a new snapshot (waits for a
        background refresh in progress)."""
        with self._refresh_lock:
            stats = self.statistics()
            if stats.n_docs == 0:
                raise RuntimeError("no documents absorbed yet: nothing to refresh")
            snapshot = self._refresh_from(self._active_view(stats.view(), self.activity), self.tracker, stats.n_docs,
                                          position, self._reservoir_batch(),
                                          self._stream_time if stream_time is None else stream_time)
            self._restart_policy()
            return snapshot

    def refresh_async(self, position: dict | None = None, stream_time: float | None = None) -> Future:
        """Refresh in a background thread; returns a :class:`~concurrent.futures.Future` of the
        snapshot.

        Ingestion is blocked only while a consistent view of the sums is copied (one memcpy of
        the packed triangle and of the tracker, here, in the caller's thread); anchors, recovery
        and alignment then run in the thread while :meth:`learn_one` goes on absorbing into the
        live sums. The snapshot reflects exactly the documents absorbed when this was called
        (``snapshot.documents_seen``). Refreshes are serialised: one started while another runs
        waits for it. The numba kernels of recovery and inference release the GIL."""
        stats = self.statistics()
        if stats.n_docs == 0:
            raise RuntimeError("no documents absorbed yet: nothing to refresh")
        activity = None if self.activity is None else DecayedCounter.from_state_dict(
            {k: np.array(v, copy=True) for k, v in self.activity.state_dict().items()})
        view = self._active_view(stats.copy().view(), activity)
        tracker = None
        if self.tracker is not None:
            tracker = type(self.tracker).from_state_dict(
                {k: np.array(v, copy=True) for k, v in self.tracker.state_dict().items()})
        n_docs = stats.n_docs
        stream_time = self._stream_time if stream_time is None else stream_time
        self._restart_policy()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="streamtopics-refresh")

        reservoir = self._reservoir_batch()

        def run():
            with self._refresh_lock:
                return self._refresh_from(view, tracker, n_docs, position, reservoir, stream_time)

        self._pending_refresh = self._executor.submit(run)
        return self._pending_refresh

    def _active_view(self, view, activity):
        """With forgetting: the view whose document frequencies are zero for the words not
        recently active (see ``activity_half_life``), so they cannot be anchor candidates. With a
        sliding window: the view whose ``n_docs`` is the documents in the window."""
        if self._window is not None:
            out = CooccurrenceStats.__new__(CooccurrenceStats)
            out.__dict__.update(view.__dict__)
            out.n_docs = len(self._window)
            return out
        if activity is None:
            return view
        scale = self.activity_half_life / self.half_life
        recent, df = activity.values(), np.asarray(view.document_frequency)
        threshold = self.min_document_frequency(view) * scale
        # active: recent frequency passes the (rescaled) threshold and is at least a quarter of
        # the word's long-run frequency (a fading word is out ~2 activity half-lives after it stops)
        active = (recent >= threshold) & (recent >= FADING_RATIO * scale * df)
        out = CooccurrenceStats.__new__(CooccurrenceStats)
        out.__dict__.update(view.__dict__)
        out.document_frequency = np.where(active, df, 0.0)
        return out

    def wait_for_refresh(self) -> TopicSnapshot | None:
        """Wait for the background refresh in progress, if any, and return the latest snapshot."""
        if self._pending_refresh is not None:
            self._pending_refresh.result()
        return self.snapshot

    def _reservoir_batch(self):
        return None if self.reservoir is None or len(self.reservoir) < 30 else self.reservoir.batch()

    def _refresh_from(self, view, tracker, n_docs: int, position, reservoir, stream_time) -> TopicSnapshot:
        t0 = time.perf_counter()
        anchors = select_anchors(view, self.n_topics, self.min_document_frequency(view),
                                 self.max_anchor_candidates, self.projection_dim, self.anchor_cleanup, self.seed,
                                 method=self.anchor_method, tracker=tracker,
                                 min_support=self.rp_min_support, max_df=self._ceiling(view))
        t_anchors = time.perf_counter() - t0
        start = self._warm_start_point(view, anchors) if self.warm_start else None
        ceiling = self._ceiling(view)
        result = recover_topics(view, anchors, start, self.recovery, self.recovery_tol, self.recovery_max_iter,
                                background=self.background_topic and self.recovery == "l2",
                                background_words=None if ceiling is None else np.asarray(view.document_frequency) > ceiling)
        refinement = None
        t_refine = time.perf_counter()
        if reservoir is not None:
            # the background is refined with the topics: both explain the reservoir's tokens
            columns = (result.topic_word if result.background is None
                       else np.column_stack([result.topic_word, result.background]))
            refinement = refine_topics(columns, reservoir, self.refine_iterations)
            topic_word = refinement.topic_word[:, : self.n_topics]
            shape = np.asarray(result.alpha, dtype=np.float64)
            shape = shape / shape.sum() if shape.sum() > 0 else np.asarray(result.prevalence)
            scale, _ = choose_alpha_scale(topic_word, shape, reservoir)
            background = None if result.background is None else refinement.topic_word[:, self.n_topics]
            result = dataclasses.replace(result, topic_word=topic_word, alpha=scale * shape, background=background)
        t_refine = time.perf_counter() - t_refine
        t1 = time.perf_counter()
        snapshot = self._publish(result, position, stream_time, n_docs)
        self.last_refresh = {
            "anchors_s": t_anchors, "recovery_s": result.timings["recovery"],
            "products_s": result.timings["products"], "solve_s": result.timings["solve"],
            "align_s": time.perf_counter() - t1, "total_s": time.perf_counter() - t0,
            "warm": start is not None, "iterations_mean": float(result.iterations.mean()),
            "iterations_max": int(result.iterations.max()),
            "reason": self.policy.last_reason,
            "refine_s": t_refine,
        }
        if refinement is not None:
            self.last_refresh.update(refinement_heldout=refinement.heldout,
                                     refinement_best_iteration=refinement.best_iteration)
        self.policy.last_reason = None
        return snapshot

    def _ceiling(self, view) -> float | None:
        """``max_df`` in documents (of the effective number, with forgetting), or None."""
        return None if self.max_df is None else self.max_df * view.n_docs

    def _restart_policy(self) -> None:
        self.policy.restart(self.documents_absorbed, self._stream_time)

    def _warm_start_point(self, stats, anchors: np.ndarray) -> np.ndarray | None:
        """The previous solution with its columns reordered to follow the new anchors."""
        if self._coefficients is None or self.snapshot is None:
            return None
        previous = np.array([self.vocabulary[w] for w in self.snapshot.anchors])
        mass = stats.word_mass
        both = np.concatenate([previous, anchors])
        rows = stats.rows(both) / np.where(mass[both] > 0, mass[both], 1.0)[:, None]
        mapping = match_columns(rows[: previous.size], rows[previous.size:])
        coefficients = self._coefficients
        extra = int(self.background_topic and self.recovery == "l2")  # the background's column stays last
        if coefficients.shape[1] != anchors.size + extra:
            return None  # saved with the background setting the other way: start cold
        if coefficients.shape[0] < stats.n_words:  # words admitted since: start them uniform
            k = coefficients.shape[1]
            coefficients = np.vstack([coefficients, np.full((stats.n_words - coefficients.shape[0], k), 1.0 / k)])
        return coefficients[:, np.concatenate([mapping, np.arange(anchors.size, anchors.size + extra)])]

    def _publish(self, result, position, stream_time, n_docs: int | None = None) -> TopicSnapshot:
        previous = self.snapshot
        anchors = [self.vocabulary.words[w] for w in result.anchors]
        alignment = self._align(previous, result.topic_word, anchors)
        self._coefficients = result.coefficients
        n_docs = self.stats.n_docs if n_docs is None else n_docs
        self._absorbed_at_refresh = n_docs
        if self.policy.drift is not None:
            self.policy.drift.reset()  # the baseline is the fit against the new snapshot
        self.snapshot = TopicSnapshot(
            version=1 if previous is None else previous.version + 1,
            documents_seen=n_docs,
            vocabulary=self.vocabulary.words[: result.topic_word.shape[0]],  # words admitted meanwhile: not yet
            topic_word=result.topic_word,
            anchors=anchors,
            topic_ids=alignment.topic_ids,
            prevalence=result.prevalence,
            alpha=result.alpha,
            position=position,
            stream_time=stream_time,
            background=result.background,
            background_share=result.background_share,
        )
        self.snapshot.events.extend(self._events(previous, self.snapshot, alignment))
        self.history.add_snapshot(self.snapshot)
        return self.snapshot

    def _align(self, previous: TopicSnapshot | None, topic_word: np.ndarray, anchors: list[str]):
        """Ids for the new topics: matched against the previous snapshot's topics and the missing
        ones still within their grace (:class:`~streamtopics.alignment.MissingTopic`)."""
        if previous is None:
            alignment = align_topics(None, None, topic_word, self._next_topic_id, self.match_threshold)
            self._next_topic_id = alignment.next_id
            return alignment
        missing = list(self._missing.items())
        columns = [previous.topic_word] + [m.column[:, None] for _, m in missing]
        n_words = max(topic_word.shape[0], max(c.shape[0] for c in columns))
        before = np.column_stack([np.vstack([c, np.zeros((n_words - c.shape[0], c.shape[1]))])  # words admitted since
                                  for c in columns])[: topic_word.shape[0]]
        if self._replaced_slots:  # slots whose word was retired since: not comparable
            before[sorted(i for i in self._replaced_slots if i < before.shape[0])] = 0.0
        self._replaced_slots.clear()
        alignment = align_topics(before, list(previous.topic_ids) + [t for t, _ in missing], topic_word,
                                 self._next_topic_id, self.match_threshold,
                                 list(previous.anchors) + [m.anchor for _, m in missing], anchors)
        self._next_topic_id = alignment.next_id
        return alignment

    def _events(self, previous: TopicSnapshot | None, snapshot: TopicSnapshot, alignment) -> list[dict]:
        """Births, deaths (after the grace) and changes since ``previous``, with their words."""
        top = snapshot.top_words(EVENT_WORDS, DISPLAY_RELEVANCE)
        before = {} if previous is None else previous.top_words(EVENT_WORDS, DISPLAY_RELEVANCE)
        gone = set(alignment.deaths)
        for topic in list(self._missing):
            if topic in gone:
                self._missing[topic].refreshes += 1
            else:
                del self._missing[topic]  # back under its id
        for topic in gone - set(self._missing):
            column = previous.column(topic)
            self._missing[topic] = MissingTopic(np.array(previous.topic_word[:, column]), previous.anchors[column],
                                                [w for w, _ in before[topic][:8]])
        dead = sorted(t for t, m in self._missing.items() if m.refreshes > self.death_grace)
        if self.min_prevalence > 0:
            # births and deaths of significant topics: an id whose prevalence reaches the floor is
            # born, one that falls below it (or is gone past its grace) dies; minor topics make no
            # events. Hysteresis: a significant topic stays so until it falls below half the floor.
            share = dict(zip(snapshot.topic_ids, np.asarray(snapshot.prevalence, dtype=np.float64).tolist()))
            significant = {t for t, p in share.items()
                           if p >= self.min_prevalence or (t in self._significant and p >= self.min_prevalence / 2)}
            significant |= self._significant & (set(self._missing) - set(dead))
            births = [t for t in snapshot.topic_ids if t in significant and t not in self._significant]
            deaths = sorted(self._significant - significant)
            self._significant = significant
        else:
            births, deaths = alignment.births, dead
        events = [{"type": "birth", "topic": t, "anchor": snapshot.anchors[snapshot.column(t)],
                   "words": [w for w, _ in top[t][:8]]} for t in births]
        for topic in deaths:
            lost = self._missing.get(topic)
            events.append({"type": "death", "topic": topic} if lost is None else
                          {"type": "death", "topic": topic, "anchor": lost.anchor, "words": lost.words})
        for topic in dead:
            del self._missing[topic]
        for k, topic in enumerate(snapshot.topic_ids):
            if topic not in alignment.distances or topic not in before:
                continue  # new, or back from missing (no event either way)
            anchor_before = previous.anchors[previous.column(topic)]
            moved = alignment.distances[topic]
            if moved >= self.change_threshold or anchor_before != snapshot.anchors[k]:
                now, then = [w for w, _ in top[topic]], [w for w, _ in before[topic]]
                events.append({"type": "change", "topic": topic, "distance": round(moved, 6),
                               "anchor_before": anchor_before, "anchor_after": snapshot.anchors[k],
                               "words_in": [w for w in now if w not in then],
                               "words_out": [w for w in then if w not in now]})
        return events

    # ------------------------------------------------------------------ inference
    def encode_many(self, documents) -> tuple[DocumentBatch, list[Rejection | None]]:
        """Encode documents against the vocabulary without learning anything."""
        if self.vocabulary is None:
            raise RuntimeError("the model has no vocabulary yet")
        encoded, outcome = [], []
        for document in documents:
            result = self._encoder.encode(document, self.vocabulary)
            if isinstance(result, Rejection):
                outcome.append(result)
                result = EncodedDocument(np.zeros(0, np.int32), np.zeros(0))
            else:
                outcome.append(None)
            encoded.append(result)
        return DocumentBatch.from_documents(encoded, [0] * len(encoded)), outcome

    def infer(self, documents) -> np.ndarray:
        """Topic mixtures (documents x K, columns in ``snapshot.topic_ids`` order). A document
        with no known word gets the prior (the topic prevalences). Changes nothing."""
        if self.snapshot is None:
            raise RuntimeError("no snapshot yet: call refresh() first")
        if isinstance(documents, DocumentBatch):
            batch = documents
        elif hasattr(documents, "tocsr"):
            batch = DocumentBatch.from_csr(documents)
        else:
            batch, _ = self.encode_many(documents)
        known = len(self.snapshot.vocabulary)
        if batch.indices.size and (batch.indices.max() >= known or self._replaced_slots):
            # Words admitted to an open vocabulary after the snapshot have no topic row yet (nor
            # do words given the slot of a retired one).
            keep = (batch.indices < known) & ~np.isin(batch.indices, list(self._replaced_slots))
            document_of_entry = np.repeat(np.arange(len(batch)), np.diff(batch.indptr))
            sizes = np.bincount(document_of_entry[keep], minlength=len(batch))
            indptr = np.zeros(len(batch) + 1, np.int64)
            np.cumsum(sizes, out=indptr[1:])
            batch = DocumentBatch(indptr, batch.indices[keep], batch.counts[keep], batch.keys)
        columns, prior = self.snapshot.mixture_components()
        return self.snapshot.topic_part(infer_mixtures(batch, columns, prior))

    def transform_one(self, document) -> dict[int, float]:
        """``{topic_id: weight}`` for one document; empty before the first refresh."""
        if self.snapshot is None:
            return {}
        return dict(zip(self.snapshot.topic_ids, self.infer([document])[0].tolist()))

    def transform_many(self, documents) -> list[dict[int, float]]:
        """:meth:`transform_one` for many documents at once."""
        if self.snapshot is None:
            return [{} for _ in documents]
        ids = self.snapshot.topic_ids
        return [dict(zip(ids, row)) for row in self.infer(documents).tolist()]

    # ------------------------------------------------------------------ persistence
    def get_config(self) -> dict:
        return {
            "n_topics": self.n_topics, "vocabulary_size": self.vocabulary_size,
            "warmup_documents": self.warmup_documents, "anchor_min_df": self.anchor_min_df,
            "max_anchor_candidates": self.max_anchor_candidates, "projection_dim": self.projection_dim,
            "anchor_cleanup": self.anchor_cleanup, "anchor_method": self.anchor_method,
            "n_projections": self.n_projections, "rp_min_support": self.rp_min_support,
            "recovery": self.recovery,
            "recovery_tol": self.recovery_tol, "recovery_max_iter": self.recovery_max_iter,
            "warm_start": self.warm_start, "match_threshold": self.match_threshold,
            "change_threshold": self.change_threshold, "refresh_every": self.refresh_every,
            "batch_size": self.batch_size, "max_text_chars": self.max_text_chars, "seed": self.seed,
            "refresh_every_seconds": self.refresh_every_seconds, "refresh_clock": self.refresh_clock,
            "drift_threshold": self.drift_threshold, "refresh_in_background": self.refresh_in_background,
            "half_life": self.half_life, "activity_half_life": self.activity_half_life,
            "half_life_unit": self.half_life_unit,
            "history_size": self.history_size, "min_prevalence": self.min_prevalence,
            "refine_iterations": self.refine_iterations, "reservoir_size": self.reservoir_size,
            "max_vocabulary": self.max_vocabulary, "admit_df": self.admit_df,
            "vocabulary_sketch_size": self.vocabulary_sketch_size, "retire_df": self.retire_df,
            "window": self.window, "background_topic": self.background_topic,
            "max_df": self.max_df, "death_grace": self.death_grace,
        }

    def save(self, path) -> Path:
        """Write the whole state (statistics, vocabulary, configuration, latest snapshot and
        warm-start point) atomically to one checksummed file."""
        self.wait_for_refresh()
        if self.vocabulary is not None:
            self._flush()
        arrays: dict[str, np.ndarray] = {}
        if self.stats is not None:
            arrays.update({f"stats.{k}": v for k, v in self.stats.state_dict().items()})
        if self.tracker is not None:
            arrays.update({f"tracker.{k}": np.asarray(v) for k, v in self.tracker.state_dict().items()})
        if self.activity is not None:
            arrays.update({f"activity.{k}": np.asarray(v) for k, v in self.activity.state_dict().items()})
        if self._window is not None:
            arrays.update({f"window.{k}": np.asarray(v) for k, v in self._window.state_dict().items()})
        if self.reservoir is not None and len(self.reservoir):
            items = self.reservoir.items()
            kept = self.reservoir.batch()
            arrays.update({"reservoir.indptr": kept.indptr, "reservoir.indices": kept.indices,
                           "reservoir.counts": kept.counts,
                           "reservoir.keys": np.array([k for _, _, k in items], np.uint64)})
        if self._coefficients is not None:
            arrays["coefficients"] = self._coefficients
        if self.snapshot is not None:
            arrays["snapshot.topic_word"] = self.snapshot.topic_word
            if self.snapshot.background is not None:
                arrays["snapshot.background"] = self.snapshot.background
        meta = {
            "config": self.get_config(),
            "tokenizer": self.tokenizer.get_config(),
            "vocabulary": None if self.vocabulary is None else self.vocabulary.words,
            "warmup": [[counts, _jsonable_key(key), stream_time] for counts, key, stream_time in self._warmup],
            "rejections": dict(self.rejections),
            "oov_tokens": self.oov_tokens,
            "documents_truncated": self.documents_truncated,
            "next_topic_id": self._next_topic_id,
            "absorbed_at_refresh": self._absorbed_at_refresh,
            "snapshot": None if self.snapshot is None else _snapshot_meta(self.snapshot),
            "history": self.history.to_dict(),
            "significant": sorted(self._significant),
            "open_vocabulary": None if self.open_vocabulary is None else self.open_vocabulary.to_dict(),
            "replaced_slots": sorted(self._replaced_slots),
            "admitted_at": [[i, t] for i, t in sorted(self._admitted_at.items())],
            "snapshot_vocabulary": (None if self.snapshot is None or not self._replaced_slots
                                    else list(self.snapshot.vocabulary)),
            "stream_time": self._stream_time,
        }
        return write_state(path, arrays, meta)

    @classmethod
    def load(cls, path, on_reject: RejectHandler | None = None) -> "StreamingTopicModel":
        """Restore a model written by :meth:`save`; raises
        :class:`~streamtopics.state.CorruptStateError` if the file is damaged."""
        arrays, meta = read_state(path)
        model = cls(**meta["config"], tokenizer=Tokenizer.from_config(meta["tokenizer"]), on_reject=on_reject)
        if meta["vocabulary"] is not None:
            model.vocabulary = Vocabulary(meta["vocabulary"])
            model.stats = CooccurrenceStats.from_state_dict(
                {k[len("stats."):]: v for k, v in arrays.items() if k.startswith("stats.")})
            tracker = {k[len("tracker."):]: v for k, v in arrays.items() if k.startswith("tracker.")}
            if model.anchor_method != "fastanchors":
                if not tracker:
                    raise CorruptStateError(f"{path}: no tracker saved for anchor_method {model.anchor_method!r}")
                model.tracker = RandomProjectionTracker.from_state_dict(tracker)
            activity = {k[len("activity."):]: v for k, v in arrays.items() if k.startswith("activity.")}
            if activity:
                model.activity = DecayedCounter.from_state_dict(activity)
            window = {k[len("window."):]: v for k, v in arrays.items() if k.startswith("window.")}
            if window:
                model._window = DocumentWindow.from_state_dict(window)
        model._warmup = [(entry[0], _restore_key(entry[1]), entry[2] if len(entry) > 2 else None)
                         for entry in meta["warmup"]]
        model.rejections = Counter(meta["rejections"])
        model.oov_tokens = meta["oov_tokens"]
        model.documents_truncated = meta["documents_truncated"]
        model._next_topic_id = meta["next_topic_id"]
        model._absorbed_at_refresh = meta["absorbed_at_refresh"]
        model._coefficients = arrays.get("coefficients")
        if model.reservoir is not None and "reservoir.indptr" in arrays:
            indptr = arrays["reservoir.indptr"]
            for d, (a, b) in enumerate(zip(indptr[:-1], indptr[1:])):
                model.reservoir.add(arrays["reservoir.indices"][a:b], arrays["reservoir.counts"][a:b],
                                    int(arrays["reservoir.keys"][d]))
        if "history" in meta:
            model.history = TopicHistory.from_dict(meta["history"])
        model._stream_time = meta.get("stream_time")
        model._significant = set(meta.get("significant", []))
        model._replaced_slots = set(meta.get("replaced_slots", []))
        model._admitted_at = {int(i): float(t) for i, t in meta.get("admitted_at", [])}
        if meta.get("open_vocabulary") is not None:
            model.open_vocabulary = OpenVocabulary.from_dict(meta["open_vocabulary"])
        if meta["snapshot"] is not None:
            n_rows = arrays["snapshot.topic_word"].shape[0]
            vocabulary = meta.get("snapshot_vocabulary") or model.vocabulary.words[:n_rows]
            model.snapshot = TopicSnapshot(**meta["snapshot"], vocabulary=vocabulary,
                                           topic_word=arrays["snapshot.topic_word"],
                                           background=arrays.get("snapshot.background"))
            model.snapshot.prevalence = np.asarray(model.snapshot.prevalence)
            model.snapshot.alpha = np.asarray(model.snapshot.alpha)
        return model

    def __getstate__(self) -> dict:
        """Pickle without the refresh thread's lock, executor and pending future (a background
        refresh in flight is waited for first, so its result is not lost)."""
        if self._pending_refresh is not None:
            self.wait_for_refresh()
        state = dict(self.__dict__)
        for name in ("_refresh_lock", "_executor", "_pending_refresh"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._refresh_lock = threading.RLock()
        self._executor = None
        self._pending_refresh = None

    def __repr__(self) -> str:
        words = "learning" if self.vocabulary is None else len(self.vocabulary)
        version = None if self.snapshot is None else self.snapshot.version
        return (f"StreamingTopicModel(n_topics={self.n_topics}, vocabulary={words}, "
                f"absorbed={self.documents_absorbed}, rejected={self.documents_rejected}, snapshot={version})")


def _as_vocabulary(vocabulary) -> Vocabulary:
    if isinstance(vocabulary, Vocabulary):
        return vocabulary
    if isinstance(vocabulary, (str, Path)):
        return Vocabulary.from_file(vocabulary)
    return Vocabulary(vocabulary)


def _snapshot_meta(snapshot: TopicSnapshot) -> dict:
    return {
        "version": snapshot.version, "documents_seen": snapshot.documents_seen,
        "anchors": snapshot.anchors, "topic_ids": snapshot.topic_ids,
        "prevalence": snapshot.prevalence.tolist(), "alpha": snapshot.alpha.tolist(),
        "events": snapshot.events, "position": snapshot.position, "stream_time": snapshot.stream_time,
        "background_share": snapshot.background_share,
    }


def _jsonable_key(key):
    if isinstance(key, (bytes, bytearray)):
        return {"bytes": bytes(key).hex()}
    return key


def _restore_key(key):
    if isinstance(key, dict):
        return bytes.fromhex(key["bytes"])
    return key
