"""StreamingTopicModel: the public API that every source, sink and service uses.

A facade over three named parts: :class:`~streamtopics.ingest.Ingest` (documents in, statistics
up to date), :class:`~streamtopics.refresh.lineage.RefreshState` (statistics to the next snapshot, ids
continued from the last one) and :mod:`~streamtopics.persistence` (save and load). The model
itself schedules refreshes (its :class:`~streamtopics.schedule.RefreshSchedule`), runs them in the
caller's thread or a background one, and infers topic mixtures. Its settings are a
:class:`~streamtopics.config.ModelConfig`, each readable as an attribute (``model.n_topics``).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Iterable, Mapping

import numba
import numpy as np

from .config import ModelConfig, current_spelling, doc
from .statistics.cooccurrence import CooccurrenceStats
from .text.documents import DocumentBatch, Rejection
from .history import TopicHistory
from .inference import infer_mixtures
from .ingest import TEXT_BATCH, Ingest, RejectHandler
from .refresh.lineage import Lineage, RefreshState
from .persistence import load_model, save_model
from .drift import DriftMonitor
from .refresh.anchor_selection import NotEnoughCandidatesError
from .schedule import RefreshSchedule
from .statistics.sketch import SketchedCooccurrence
from .snapshot import TopicSnapshot
from .text.tokenizer import Tokenizer
from .text.vocabulary import Vocabulary


def _leave_a_core_to_ingest() -> None:
    """Run in the background refresh's thread: its numba kernels use one thread fewer than
    numba's pool (at least one), so ingest, going on meanwhile, keeps a core (numba's thread
    count belongs to the calling thread; BENCHMARKS.md, "Ingest during a background refresh")."""
    numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS - 1))


@contextmanager
def _ingest_threads(refreshing: bool):
    """Ingest's numba kernels on one thread while a background refresh runs (on the others:
    :func:`_leave_a_core_to_ingest`). With both on numba's whole pool, three busy threads on 2
    cores stalled the fork-join kernels of both: ingest during a refresh 29,000 documents/s and
    the refresh 6.5-8 s, against 36,300 and 4.3-7.2 s (20 Newsgroups K = 40,
    ``benchmarks.background_refresh``)."""
    if not refreshing:
        yield
        return
    everyone = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(everyone)


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
    tokenizer
        A :class:`~streamtopics.text.tokenizer.Tokenizer` (stop words, mail headers); the default one if None.
    on_reject
        Called as ``on_reject(rejection, document, key)`` for each rejected document (e.g. to
        route it to a dead-letter topic). Rejections are also counted in :attr:`rejections`.
    **settings
        Any setting of :class:`~streamtopics.config.ModelConfig`, where each has its default and a
        one-line doc; docs/configuration.md ("Settings at length") explains each and why its
        default is what it is. The ones most often set:

        - ``refresh_every``, ``refresh_every_stream_seconds``, ``refresh_every_wall_seconds``,
          ``drift_threshold``, ``refresh_in_background``: refresh by itself after that many
          absorbed documents, seconds of stream time (the ``stream_time`` given to
          :meth:`learn_one`) or of wall time, or when the held-out fit drops
          (:class:`~streamtopics.schedule.RefreshSchedule`); in a background thread. Default:
          only on demand (:meth:`refresh`).
        - ``half_life`` (``half_life_unit``: ``"documents"`` or ``"stream"`` seconds) or
          ``window``: forget old documents, exponentially and lazily or by a sliding window.
        - ``anchor_method``: ``"fastanchors"`` (default), ``"rp"`` or ``"hybrid"`` (Ding et al.'s
          random-projection trackers, :mod:`~streamtopics.refresh.anchor_selection`).
        - ``refine_iterations``, ``refine_sweeps``, ``reservoir_size``, ``refine_device``: the
          seeded refinement over a reservoir of documents after recovery (KL-tEM, then CVB0
          sweeps; :mod:`~streamtopics.refresh.refinement`), most of a refresh's cost and what brings
          the topics close to a batch Gibbs fit.
        - ``max_vocabulary``: an open vocabulary that admits new words (and, with forgetting,
          retires faded ones).
        - ``cooccurrence``: exact sums or, above 20,000 words, a sketch whose memory grows
          linearly in V.
        - ``burn_in``, ``birth_grace``, ``death_grace``, ``min_prevalence``,
          ``match_threshold``: when births, deaths and changes are announced.

    Attributes
    ----------
    config
        The settings (:class:`~streamtopics.config.ModelConfig`); each is also an attribute of the
        model (``model.n_topics``).
    snapshot
        The latest published :class:`TopicSnapshot` (None before the first refresh).
    vocabulary
        The :class:`Vocabulary` (None while it is learned from the warm-up documents).
    stats, tracker, activity, reservoir, open_vocabulary
        The statistics (:meth:`statistics` includes the buffered documents), the tracker of the
        ``"rp"`` and ``"hybrid"`` methods, the recent document frequencies with forgetting, the
        documents refinement runs over, and the open vocabulary's sketch (each None when off).
    rejections, oov_tokens, documents_truncated, documents_absorbed, times_clamped
        Rejected documents by reason (a Counter), unknown tokens of accepted documents, texts cut
        at ``max_text_chars``, documents whose statistics are in the model, and documents dated
        more than ``max_time_skew`` after the stream clock (counted as dated that far).
    ingest, lineage, schedule, history
        The parts: :class:`~streamtopics.ingest.Ingest`, :class:`~streamtopics.refresh.lineage.RefreshState`,
        the :class:`~streamtopics.schedule.RefreshSchedule` and the :class:`~streamtopics.history.TopicHistory`.

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

    def __init__(self, n_topics: int, vocabulary=None, *, tokenizer: Tokenizer | None = None,
                 on_reject: RejectHandler | None = None, **settings):
        self.config = config = ModelConfig(n_topics=n_topics, **current_spelling(settings))
        self.lineage = RefreshState(config)
        self.ingest = Ingest(config, tokenizer, on_reject, self.lineage, self._refreshing)
        self.schedule = RefreshSchedule(
            config.refresh_every, config.refresh_every_stream_seconds, config.refresh_every_wall_seconds,
            None if config.drift_threshold is None else DriftMonitor(config.drift_threshold))
        self.history = TopicHistory(self.config.history_size)
        self.last_refresh: dict = {}
        self._refresh_lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending_refresh: Future | None = None
        if vocabulary is not None:
            self.ingest.set_vocabulary(_as_vocabulary(vocabulary))

    @property
    def documents_rejected(self) -> int:
        return sum(self.rejections.values())

    # ------------------------------------------------------------------ learning
    def learn_one(self, document, key=None, stream_time: float | None = None) -> None:
        """Absorb one document: raw text (str or UTF-8 bytes), a token list, or a
        ``{word: count}`` mapping. ``key`` (bytes, str or int) identifies the document; without
        one its content does. ``stream_time`` (seconds, e.g. the message timestamp) dates the
        document for a half-life in stream time, drives ``refresh_every_stream_seconds`` and
        stamps automatic snapshots. The stream clock never goes back: a document
        older than one seen before is dated at the latest time seen; nor does it jump: a document
        dated more than ``max_time_skew`` after it counts as dated that far (:mod:`~streamtopics.stream_clock`)."""
        self.ingest.advance_clock(stream_time)
        before = self.documents_absorbed
        with _ingest_threads(self._refreshing()):
            self.ingest.learn_one(document, key)
        if self.documents_absorbed != before:
            self._accepted()

    def learn_many(self, documents, keys: Iterable | None = None, stream_times: Iterable | None = None) -> None:
        """Absorb many documents: an iterable of anything :meth:`learn_one` takes, or
        pre-indexed counts (a scipy sparse matrix, documents x vocabulary, or a
        :class:`DocumentBatch`) for speed. ``keys`` and ``stream_times``, when given, have one
        entry per document (see :meth:`learn_one`)."""
        if isinstance(documents, (str, bytes, bytearray, Mapping)):
            raise TypeError(f"learn_many takes many documents (a list of texts, token lists or mappings); "
                            f"got one {type(documents).__name__}: use learn_one for a single document")
        if isinstance(documents, DocumentBatch) or hasattr(documents, "tocsr"):
            batch = self.ingest.indexed_batch(documents, keys)
            if stream_times is not None:
                stream_times = list(stream_times)
                if len(stream_times) != len(batch):
                    raise ValueError("one stream time per document")
            self._learn_in_steps(len(batch), lambda start, limit: self.ingest.learn_indexed(
                batch, stream_times, start, limit))
            return
        given = [column for column in (keys, stream_times) if column is not None]
        rows = zip(documents, *given, strict=True)  # lazily: a generator of documents stays one
        while chunk := list(islice(rows, TEXT_BATCH)):
            columns = iter(zip(*chunk))
            texts = list(next(columns))
            chunk_keys = [None] * len(texts) if keys is None else list(next(columns))
            chunk_times = [None] * len(texts) if stream_times is None else list(next(columns))
            self._learn_in_steps(len(texts), lambda start, limit: self.ingest.learn_many(
                texts[start:], chunk_keys[start:], chunk_times[start:], limit))

    def _learn_in_steps(self, total: int, learn) -> None:
        """Feed ``total`` documents through ``learn(start, limit) -> (consumed, accepted)``, a
        step at a time: each step stops at the accepted document a refresh may fall due at
        (:meth:`RefreshSchedule.documents_until_due`), where the schedule is checked."""
        start = 0
        while start < total:
            until = self.schedule.documents_until_due(self.documents_absorbed)
            with _ingest_threads(self._refreshing()):
                consumed, accepted = learn(start, None if until is None else max(until, 1))
            start += consumed
            if accepted:
                self._accepted()

    def _accepted(self) -> None:
        """Documents were accepted: score the latest for drift (the snapshot has not seen it; with
        a drift monitor, documents are accepted one step each) and refresh if one is due."""
        drift = self.schedule.drift
        if drift is not None and self.snapshot is not None:
            drift.observe(self.ingest.last_accepted.ids, self.ingest.last_accepted.counts, self.snapshot)
        self._maybe_refresh()

    def _refreshing(self) -> bool:
        return self._pending_refresh is not None and not self._pending_refresh.done()

    def statistics(self) -> CooccurrenceStats | SketchedCooccurrence:
        """The co-occurrence statistics (exact sums or their sketch, see ``cooccurrence``) with
        every buffered document included."""
        return self.ingest.current_sums()

    def merge(self, other: "StreamingTopicModel") -> "StreamingTopicModel":
        """Add another model's statistics (a disjoint sub-stream over the same vocabulary)."""
        self.ingest.merge(other.ingest)
        return self

    # ------------------------------------------------------------------ refresh
    def min_document_frequency(self, view=None) -> int:
        """The candidate-anchor threshold in force for the current number of documents (the
        effective, decayed number with forgetting on)."""
        if self.config.anchor_min_df == "auto" and view is None:
            view = self.statistics().view()
        return self.config.min_document_frequency(None if view is None else view.n_docs)

    def anchor_candidate_limit(self) -> int | None:
        """The cap on candidate anchors in force (``max_anchor_candidates``, resolved)."""
        return self.config.candidate_limit()

    def _maybe_refresh(self) -> None:
        if not self.schedule.due(self.documents_absorbed, self.ingest.stream_time):
            return
        if self.config.refresh_in_background:
            if not self._refreshing():
                self.refresh_async(stream_time=self.ingest.stream_time)
        else:
            try:
                self.refresh(stream_time=self.ingest.stream_time)
            except NotEnoughCandidatesError as error:
                # A young stream may not support K topics yet: an automatic refresh must not stop
                # it. Try again after the next interval; an explicit refresh() still raises.
                self.schedule.postpone(self.documents_absorbed)
                self.last_refresh = {"skipped": str(error)}

    def refresh(self, position: dict | None = None, stream_time: float | None = None) -> TopicSnapshot:
        """Recompute the topics from the current sums and publish a new snapshot (waits for a
        background refresh in progress)."""
        with self._refresh_lock:
            prepared = self._prepare_refresh(position, stream_time, frozen=False)
            snapshot = self._refresh_from(prepared)
            self._restart_schedule()
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
        prepared = self._prepare_refresh(position, stream_time, frozen=True)
        self._restart_schedule()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="streamtopics-refresh",
                                                initializer=_leave_a_core_to_ingest)

        def run():
            with self._refresh_lock:
                return self._refresh_from(prepared)

        self._pending_refresh = self._executor.submit(run)
        return self._pending_refresh

    def _prepare_refresh(self, position, stream_time, frozen: bool) -> dict:
        """What a refresh reads, taken in the caller's thread: the statistics' view (of a
        ``frozen`` copy for a background refresh, so ingestion may go on), the tracker, the
        reservoir's documents, the position and the stream time; ``prepare_s`` is the time it
        took (in :meth:`refresh_async`, the time ingestion was held)."""
        t0 = time.perf_counter()
        n_docs = self.statistics().n_docs  # every buffered document included
        if n_docs == 0:
            raise RuntimeError("no documents absorbed yet: nothing to refresh")
        statistics = self.ingest.statistics.frozen_copy() if frozen else self.ingest.statistics
        reservoir, stamps = self.ingest.stamped_reservoir()
        if self.ingest.reservoir is not None:  # the documents from now on come after this refresh
            self.ingest.reservoir.stamp = n_docs
        return {"view": statistics.refresh_view(self.config), "tracker": statistics.tracker, "n_docs": n_docs,
                "position": position, "reservoir": reservoir, "stamps": stamps,
                "stream_time": self.ingest.stream_time if stream_time is None else stream_time,
                "prepare_s": time.perf_counter() - t0}

    def wait_for_refresh(self) -> TopicSnapshot | None:
        """Wait for the background refresh in progress, if any, and return the latest snapshot."""
        if self._pending_refresh is not None:
            self._pending_refresh.result()
        return self.snapshot

    def _refresh_from(self, prepared: dict) -> TopicSnapshot:
        """Advance the lineage from a :meth:`_prepare_refresh`; ``last_refresh`` gets the timings
        of its steps, ``prepare_s`` among them and in ``total_s``."""
        # the excerpts are read live (a background refresh too): one evicted meanwhile shows its words only
        snapshot, timings = self.lineage.advance(
            prepared["view"], prepared["tracker"], self.vocabulary, prepared["n_docs"], prepared["position"],
            prepared["reservoir"], prepared["stream_time"], self.ingest.replaced_slots, self.ingest.excerpts,
            prepared["stamps"])
        prepare_s = prepared["prepare_s"]
        if self.schedule.drift is not None:
            self.schedule.drift.reset()  # the baseline is the fit against the new snapshot
        self.history.add_snapshot(snapshot)
        self.last_refresh = {**timings, "prepare_s": prepare_s, "total_s": timings["total_s"] + prepare_s,
                             "reason": self.schedule.last_reason}
        self.schedule.last_reason = None
        return snapshot

    def _restart_schedule(self) -> None:
        self.schedule.restart(self.documents_absorbed, self.ingest.stream_time)

    def adopt_lineage(self, lineage: Lineage) -> None:
        """Continue the topic lineage of another model (:meth:`RefreshState.export`): the next
        refresh warm-starts from its coefficients and keeps its topic ids; with only a snapshot,
        :meth:`infer` uses that snapshot."""
        self.wait_for_refresh()
        self.lineage.adopt(lineage)

    # ------------------------------------------------------------------ inference
    def encode_many(self, documents) -> tuple[DocumentBatch, list[Rejection | None]]:
        """Encode documents against the vocabulary without learning anything."""
        return self.ingest.encode_many(documents)

    def infer(self, documents, return_known: bool = False):
        """Topic mixtures (documents x K, columns in ``snapshot.topic_ids`` order). A document
        with no known word gets the prior (the topic prevalences): with ``return_known`` the
        known tokens of each document come too, ``(mixtures, known)``, and a 0 there marks a row
        that is the prior, not an inference. Changes nothing."""
        snapshot = self._require_snapshot()
        if isinstance(documents, DocumentBatch):
            batch = documents
        elif hasattr(documents, "tocsr"):
            batch = DocumentBatch.from_csr(documents)
        else:
            batch, _ = self.encode_many(documents)
        known = len(snapshot.vocabulary)
        replaced = self.ingest.replaced_slots
        if batch.indices.size and (batch.indices.max() >= known or replaced):
            # Words admitted to an open vocabulary after the snapshot have no topic row yet (nor
            # do words given the slot of a retired one).
            batch = batch.keep_entries((batch.indices < known) & ~np.isin(batch.indices, list(replaced)))
        columns, prior = snapshot.mixture_components()
        mixtures = snapshot.topic_part(infer_mixtures(batch, columns, prior))
        return (mixtures, batch.token_counts()) if return_known else mixtures

    # ------------------------------------------------------------------ DataFrame views
    def topic_info(self):
        """The latest snapshot's topics as a pandas DataFrame, most prevalent first
        (:func:`~streamtopics.integrations.frames.topic_info`: topic, label, anchor, prevalence, coherence,
        top_words, representative_docs).

        >>> model = StreamingTopicModel(n_topics=2, vocabulary=["apple", "pear", "goal", "match"],
        ...                             anchor_min_df=1)
        >>> for _ in range(20):
        ...     model.learn_many(["apple pear apple", "goal match goal"])
        >>> _ = model.refresh()
        >>> info = model.topic_info()
        >>> sorted(zip(info["label"], info["prevalence"].round(2)))
        [('apple_pear', 0.5), ('goal_match', 0.5)]
        >>> model.document_topics(["pear pear apple", "cherry"])[["label", "known_tokens"]]
                label  known_tokens
        0  apple_pear           3.0
        1         NaN           0.0
        >>> over_time = model.topics_over_time()
        >>> sorted(zip(over_time["version"], over_time["label"]))
        [(1, 'apple_pear'), (1, 'goal_match')]
        """
        from .integrations.frames import topic_info

        return topic_info(self._require_snapshot())

    def topics_over_time(self):
        """Every recorded snapshot's topics as a pandas DataFrame, one row per snapshot and topic
        (:func:`~streamtopics.integrations.frames.topics_over_time`: version, documents_seen, stream_time,
        topic, label, prevalence, words), from :attr:`history`."""
        from .integrations.frames import topics_over_time

        return topics_over_time(self.history)

    def document_topics(self, documents):
        """Each document's topic mixture as a pandas DataFrame (:func:`~streamtopics.integrations.frames.document_topics`:
        topic, label, weight, known_tokens, then ``topic_<id>`` per topic); a document with no
        known word has ``known_tokens`` 0 and no topic (missing values)."""
        from .integrations.frames import document_topics

        mixtures, known = self.infer(documents, return_known=True)
        return document_topics(self.snapshot, mixtures, known)

    def _require_snapshot(self) -> TopicSnapshot:
        if self.snapshot is None:
            raise RuntimeError("no snapshot yet: call refresh() first")
        return self.snapshot

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
        """Every setting (:meth:`ModelConfig.to_dict`): ``StreamingTopicModel(**get_config())``
        builds a model configured alike."""
        return self.config.to_dict()

    def save(self, path) -> Path:
        """Write the whole state (statistics, vocabulary, configuration, latest snapshot and
        warm-start point) atomically to one checksummed file."""
        return save_model(self, path)

    @classmethod
    def load(cls, path, on_reject: RejectHandler | None = None) -> "StreamingTopicModel":
        """Restore a model written by :meth:`save`; raises
        :class:`~streamtopics.state.CorruptStateError` if the file is damaged (FileNotFoundError
        if there is none)."""
        return load_model(cls, path, on_reject)

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


def _read_only(part: str, name: str, text: str) -> property:
    return property(lambda self: getattr(getattr(self, part), name), doc=text)


#: The parts' state users read on the model (the class docstring's Attributes): ``model.vocabulary``
#: is ``model.ingest.vocabulary``.
_PART_ATTRIBUTES = {
    "lineage": ("snapshot",),
    "ingest": ("vocabulary", "stats", "tracker", "activity", "reservoir", "open_vocabulary", "tokenizer",
               "on_reject", "rejections", "oov_tokens", "documents_truncated", "documents_absorbed", "times_clamped"),
}
for _part, _names in _PART_ATTRIBUTES.items():
    for _name in _names:
        setattr(StreamingTopicModel, _name, _read_only(_part, _name, f"``{_part}.{_name}``"))
for _name in ModelConfig.__dataclass_fields__:  # the settings: model.n_topics is model.config.n_topics
    setattr(StreamingTopicModel, _name, _read_only("config", _name, doc(_name)))
del _name, _names, _part


def _as_vocabulary(vocabulary) -> Vocabulary:
    if isinstance(vocabulary, Vocabulary):
        return vocabulary
    if isinstance(vocabulary, (str, Path)):
        return Vocabulary.from_file(vocabulary)
    return Vocabulary(vocabulary)
