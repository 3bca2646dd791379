"""The streaming anchor-word topic model as a river transformer: ``streamtopics.integrations.river``.

The module shares its name with the ``river`` package and imports it: ``import river`` is an
absolute import, so it finds the installed package, never this file, and importing
``streamtopics.integrations.river`` leaves ``river`` untouched (``tests/test_river.py`` checks
both). The one way to break that is to put the ``streamtopics/integrations/`` folder itself on
``sys.path`` (running Python from inside it, or ``python streamtopics/integrations/river.py``); the
import then fails with a message saying so.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import typing
from collections import Counter

import numpy as np

try:
    from river import base
except ImportError as error:  # `river` resolved to this very file
    raise ImportError(
        "streamtopics.integrations.river needs the river package, but 'river' resolved to "
        f"{__file__}: the folder holding it is on sys.path (Python was started inside it?). "
        "Start Python from another folder."
    ) from error

from .. import inference
from ..config import ModelConfig, default
from ..model import StreamingTopicModel
from ..refresh.anchor_selection import NotEnoughCandidatesError
from ..schedule import RefreshSchedule
from ..snapshot import TopicSnapshot

__all__ = ["AnchorTopics"]

# AnchorTopics' signature (which river's clone, repr and checks read) takes the engine's defaults
# from their one home, so it cannot drift from them.
_ENGINE = {name: default(name) for name in ModelConfig.__dataclass_fields__}


class AnchorTopics(base.MiniBatchTransformer):
    """Streaming anchor-word topic model: bags of words in, topic mixtures out.

    A river wrapper around :class:`~streamtopics.StreamingTopicModel`. Each document updates exact
    word co-occurrence sums in time proportional to its length; every ``refresh_every``
    absorbed documents the topics are recomputed from the sums (anchor words, then recovery of
    the topic-word distributions) and topic ids are aligned with the previous refresh, so the
    output features ``"topic_<id>"`` keep their meaning as the stream goes on.

    Input is a ``{token: count}`` dict, as produced by `feature_extraction.BagOfWords`: counts
    are used (a word seen 5 times weighs 5 times as much), n-gram keys (tuples) are joined with
    spaces, and a raw string is also accepted (tokenized by streamtopics' own tokenizer).
    `learn_many` and `transform_many` take a pandas dataframe with one row per document and one
    column per token (e.g. the sparse frame of `BagOfWords.transform_many`); missing values
    and zeros mean "absent". They also take a list of dicts (`transform_many` then returns a
    list of dicts).

    `transform_one` is pure (it changes nothing in the model, unlike `preprocessing.LDA`) and
    returns a mixture: non-negative weights summing to 1, one per topic, keyed ``"topic_<id>"``.
    A topic the document does not use weighs exactly 0: the inference only drives such weights
    towards 0 (1e-237 and below), and one under its convergence tolerance
    (``inference.TOLERANCE``, 1e-6) is zero to the fit's precision; the other weights are
    renormalised (changing by at most K x 1e-6). The zeros keep their keys because a downstream
    `preprocessing.StandardScaler` learns a feature only from the documents that carry it.
    **Before the first refresh there are no topics yet and `transform_one` returns ``{}``** (a
    downstream river model then sees no features, as for any missing feature); `transform_many`
    returns a frame with no columns. With a learned vocabulary the first refresh happens once the
    ``warmup_documents`` first documents have built the vocabulary and ``refresh_every``
    documents have been absorbed (with the defaults: from about document 1000 on). A document
    with no known word gets the topic prevalences. If a scheduled refresh finds too few
    candidate anchor words (a young stream) it is postponed by ``refresh_every`` documents and
    counted in ``refresh_failures``; the previous topics stay in use.

    The vocabulary is learned from the ``warmup_documents`` first documents (the
    ``vocabulary_size`` words of highest document frequency) and then fixed, because every
    statistic is indexed by it; later unknown tokens are counted in ``model.oov_tokens``. Give
    ``vocabulary`` to skip the warm-up. (`learn_one` raises ValueError at the end of the warm-up
    if fewer than ``n_topics`` words occur in two or more of its documents.) Memory is about ``4 * vocabulary_size**2`` bytes
    (the co-occurrence sums).

    Parameters
    ----------
    n_topics
        Number of topics.
    vocabulary
        Words to model (a list or tuple). If None, learned from the warm-up documents.
    vocabulary_size
        Size of the learned vocabulary.
    warmup_documents
        Documents used to learn the vocabulary (absorbed once it is built, so none is lost).
    refresh_every
        Recompute the topics after every this many absorbed documents. None: only when
        `refresh` is called.
    anchor_min_df
        Documents a word must occur in to be a candidate anchor word; ``"auto"`` grows with the
        stream.
    max_anchor_candidates
        At most this many candidate anchor words (the most frequent) are searched ("auto":
        max(1000, 20 per topic)).
    projection_dim
        Candidate rows are randomly projected to this many dimensions during the anchor search
        when the vocabulary is larger (None: never).
    recovery
        ``"l2"`` or ``"kl"``: the objective used to recover the topic-word distributions.
    warm_start
        Start each refresh's recovery from the previous solution.
    match_threshold
        How close a new topic must be to a previous one to keep its id, relative to the
        distances between the previous topics (see `StreamingTopicModel`; larger: fewer births).
    batch_size
        Documents buffered before the co-occurrence kernel runs (results do not depend on it).
    seed
        Seed of the random projection. The model is deterministic given its seed.

    Attributes
    ----------
    model : StreamingTopicModel
        The wrapped engine: statistics, snapshots and their events, rejections, `save`.
    refresh_failures : int
        Scheduled refreshes postponed because the stream was too young.

    Examples
    --------

    >>> from river import compose, feature_extraction
    >>> from streamtopics.integrations.river import AnchorTopics

    >>> fruit = ["apple pear plum", "pear plum juice", "apple pear pie", "plum pie apple"]
    >>> sport = ["goal match team", "match referee goal", "goal team match", "referee win team"]

    >>> model = compose.Pipeline(
    ...     feature_extraction.BagOfWords(),
    ...     AnchorTopics(n_topics=2, warmup_documents=8, refresh_every=40, anchor_min_df=1,
    ...                  recovery="kl"),
    ... )

    >>> model.transform_one("apple pear")  # no topics before the first refresh
    {}

    >>> for _ in range(10):
    ...     for doc in fruit + sport:
    ...         model.learn_one(doc)

    >>> topics = model["AnchorTopics"]
    >>> topics.snapshot.version, topics.documents_absorbed
    (2, 80)
    >>> for name, words in topics.top_words(3).items():
    ...     print(name, sorted(word for word, p in words))
    topic_0 ['apple', 'pear', 'plum']
    topic_1 ['goal', 'match', 'team']

    >>> def show(mixture):
    ...     return {name: round(weight, 3) for name, weight in mixture.items()}

    >>> show(model.transform_one("The referee, a goal and an apple"))
    {'topic_0': 0.333, 'topic_1': 0.667}

    Counts matter: the same words in other proportions give another mixture.

    >>> show(topics.transform_one({"apple": 3, "goal": 1}))
    {'topic_0': 0.75, 'topic_1': 0.25}

    Real text is full of stop words, which `BagOfWords` keeps ("the" would top every topic);
    streamtopics' `Tokenizer` drops them (English list, words of 3+ letters):

    >>> import random
    >>> from streamtopics import Tokenizer
    >>> sentences = {
    ...     "law": ["The court ruled on the appeal of the judge.", "A jury found the defendant guilty.",
    ...             "The lawyer asked the judge for a new trial.", "The appeal was heard by the court."],
    ...     "sport": ["The team won the match in the final minute.", "Their coach said the team played well.",
    ...               "The final goal was scored by the captain.", "The league fined the team after the match."],
    ... }
    >>> rng = random.Random(0)
    >>> model = compose.Pipeline(
    ...     feature_extraction.BagOfWords(tokenizer=Tokenizer().tokenize),
    ...     AnchorTopics(n_topics=2, warmup_documents=100, refresh_every=200),
    ... )
    >>> for subject in ["law", "sport"] * 300:
    ...     model.learn_one(rng.choice(sentences[subject]))
    >>> for name, words in model["AnchorTopics"].top_words(4).items():
    ...     print(name, [word for word, p in words])
    topic_0 ['court', 'appeal', 'judge', 'ruled']
    topic_1 ['team', 'match', 'final', 'minute']

    """

    def __init__(
        self,
        n_topics: int = _ENGINE["n_topics"],
        vocabulary: list[str] | tuple[str, ...] | None = None,
        vocabulary_size: int = _ENGINE["vocabulary_size"],
        warmup_documents: int = _ENGINE["warmup_documents"],
        refresh_every: int | None = 1000,
        anchor_min_df: int | str = _ENGINE["anchor_min_df"],
        max_anchor_candidates: int | None = _ENGINE["max_anchor_candidates"],
        projection_dim: int | None = _ENGINE["projection_dim"],
        recovery: str = _ENGINE["recovery"],
        warm_start: bool = _ENGINE["warm_start"],
        match_threshold: float = _ENGINE["match_threshold"],
        batch_size: int = _ENGINE["batch_size"],
        seed: int = _ENGINE["seed"],
    ):
        if refresh_every is not None and refresh_every < 1:
            raise ValueError("refresh_every must be None or at least 1")
        self.n_topics = n_topics
        self.vocabulary = vocabulary
        self.vocabulary_size = vocabulary_size
        self.warmup_documents = warmup_documents
        self.refresh_every = refresh_every
        self.anchor_min_df = anchor_min_df
        self.max_anchor_candidates = max_anchor_candidates
        self.projection_dim = projection_dim
        self.recovery = recovery
        self.warm_start = warm_start
        self.match_threshold = match_threshold
        self.batch_size = batch_size
        self.seed = seed

        # The refresh policy lives here rather than in the engine (whose `refresh_every` is
        # left None) so that a refresh the young stream cannot support is postponed instead of
        # raising out of `learn_one`, and so the warm-up documents, absorbed all at once, cost
        # one refresh rather than one per `refresh_every` of them.
        self.model = StreamingTopicModel(
            n_topics,
            vocabulary=None if vocabulary is None else list(vocabulary),
            vocabulary_size=vocabulary_size,
            warmup_documents=warmup_documents,
            anchor_min_df=anchor_min_df,
            max_anchor_candidates=max_anchor_candidates,
            projection_dim=projection_dim,
            recovery=recovery,
            warm_start=warm_start,
            match_threshold=match_threshold,
            refresh_every=None,
            batch_size=batch_size,
            seed=seed,
        )
        self.refresh_failures = 0
        self.last_refresh_error: str | None = None
        self._schedule = RefreshSchedule(refresh_every)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["model"] = _EngineState(self.model)
        return state

    def __setstate__(self, state):
        state = dict(state)
        state["model"] = state["model"].restore()
        self.__dict__.update(state)

    @classmethod
    def _unit_test_params(cls):
        # river's checks stream a few hundred short documents: a tiny warm-up and frequent
        # refreshes make them exercise real topics rather than the empty pre-refresh output.
        yield {
            "n_topics": 2,
            "warmup_documents": 5,
            "refresh_every": 10,
            "anchor_min_df": 1,
            "projection_dim": None,
        }

    # ------------------------------------------------------------------ learning
    def learn_one(self, x):
        self.model.learn_one(_as_document(x))
        self._maybe_refresh()

    def learn_many(self, X):
        """Update with a mini-batch: a dataframe (rows are documents, columns tokens) or an
        iterable of ``{token: count}`` dicts. Equivalent to calling `learn_one` on each row in
        order, refreshes included."""
        for x in _iter_documents(X):
            self.model.learn_one(x)
            self._maybe_refresh()

    def _maybe_refresh(self) -> None:
        absorbed = self.model.documents_absorbed
        if self._schedule.due(absorbed):
            self._schedule.restart(absorbed)  # a failed refresh is tried again refresh_every later
            try:
                self.model.refresh()
            except NotEnoughCandidatesError as error:
                self.refresh_failures += 1
                self.last_refresh_error = str(error)

    def refresh(self) -> TopicSnapshot:
        """Recompute the topics now (outside the `refresh_every` schedule) and return the new
        snapshot. Raises if no document has been absorbed or the stream is too young."""
        self._schedule.restart(self.model.documents_absorbed)
        return self.model.refresh()

    # ------------------------------------------------------------------ inference
    def _topic_columns(self) -> tuple[list[int], list[str]]:
        """Snapshot columns in topic-id order and their feature names. Recomputed on each call
        (K is small) rather than cached, so that transforming leaves the estimator unchanged."""
        ids = self.model.snapshot.topic_ids
        order = sorted(range(len(ids)), key=ids.__getitem__)
        return order, [f"topic_{ids[k]}" for k in order]

    def transform_one(self, x):
        if self.model.snapshot is None:
            return {}
        order, names = self._topic_columns()
        row = _without_negligible(_infer_one(self.model, _as_document(x))[None, order])[0]
        return dict(zip(names, row.tolist()))

    def transform_many(self, X):
        """Topic mixtures of a mini-batch: a dataframe in, a dataframe out (same index, one
        ``topic_<id>`` column per topic, none before the first refresh); a list of dicts in, a
        list of dicts out."""
        documents = list(_iter_documents(X))
        if not _is_frame(X):
            return [self.transform_one(x) for x in documents]
        from river.utils import dataframe

        like = dataframe.into_frame(X)
        if self.model.snapshot is None:
            if like.implementation.is_pandas_like():
                return like.to_native().iloc[:, :0].copy()
            return dataframe.to_native_frame({}, like=like)
        order, names = self._topic_columns()
        mixtures = self.model.infer(documents)[:, order] if documents else np.zeros((0, len(order)))
        return dataframe.to_native_frame(_without_negligible(mixtures), like=like, columns=names)

    # ------------------------------------------------------------------ topics
    @property
    def snapshot(self) -> TopicSnapshot | None:
        """The latest topics (a :class:`~streamtopics.TopicSnapshot`: ``topic_word`` is the
        V x K topic-word matrix, ``vocabulary`` its rows, ``topic_ids`` its columns), or None
        before the first refresh."""
        return self.model.snapshot

    @property
    def documents_absorbed(self) -> int:
        return self.model.documents_absorbed

    @property
    def rejections(self) -> Counter:
        """Documents not learned, by reason (e.g. ``too_short``: fewer than 2 known tokens)."""
        return self.model.rejections

    def top_words(self, n: int = 10) -> dict[str, list[tuple[str, float]]]:
        """The ``n`` most probable words of each topic, ``{"topic_<id>": [(word, p), ...]}``
        (``{}`` before the first refresh)."""
        snapshot = self.model.snapshot
        if snapshot is None:
            return {}
        top = snapshot.top_words(n)
        return {f"topic_{t}": top[t] for t in sorted(top)}

    def topic_word(self, topic: int | str) -> dict[str, float]:
        """The word distribution of one topic (by id or feature name), ``{word: p}`` for every
        word of the vocabulary with ``p > 0``, most probable first."""
        snapshot = self.model.snapshot
        if snapshot is None:
            raise KeyError("no topics yet: the model has not refreshed")
        if isinstance(topic, str):
            if not topic.startswith("topic_"):
                raise KeyError(topic)
            topic = int(topic[len("topic_"):])
        column = snapshot.topic_word[:, snapshot.column(topic)]
        order = np.argsort(-column, kind="stable")
        order = order[column[order] > 0]
        return {snapshot.vocabulary[i]: float(column[i]) for i in order}


# ---------------------------------------------------------------------- one-document inference
def _infer_one(model: StreamingTopicModel, document) -> np.ndarray:
    """``model.infer([document])[0]`` without the parallel kernel's per-call cost: the same
    kernel compiled serially (``inference.infer_mixtures(serial=True)``), with the same start
    point and stopping rule, so the result is the same as the engine's."""
    snapshot = model.snapshot
    batch, _ = model.encode_many([document])
    columns, prior = snapshot.mixture_components()
    return snapshot.topic_part(inference.infer_mixtures(batch, columns, prior, serial=True))[0]


def _without_negligible(mixtures: np.ndarray) -> np.ndarray:
    """Mixtures with the weights under the inference's tolerance set to 0 and each row
    renormalised (every row keeps its largest weight, at least 1/K)."""
    kept = np.where(mixtures >= inference.TOLERANCE, mixtures, 0.0)
    return kept / kept.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------- pickling
_LOCKS = {type(threading.Lock()): threading.Lock, type(threading.RLock()): threading.RLock}
_RUNTIME = (concurrent.futures.Executor, concurrent.futures.Future, threading.Thread)


class _EngineState:
    """A picklable stand-in for the engine: its attributes without the runtime-only objects
    (locks, a background-refresh executor or future), which come back fresh (locks) or empty
    (None, what the engine starts with). Pickling and ``copy.deepcopy`` are river requirements
    (checks, ``compose`` internals, model persistence); the engine keeps such objects for
    ``refresh_async``, which AnchorTopics never calls."""

    def __init__(self, model: StreamingTopicModel):
        self.cls = type(model)
        self.locks, self.state = {}, {}
        for name, value in vars(model).items():
            if type(value) in _LOCKS:
                self.locks[name] = _LOCKS[type(value)]
            elif isinstance(value, _RUNTIME):
                self.state[name] = None
            else:
                self.state[name] = value

    def restore(self) -> StreamingTopicModel:
        model = self.cls.__new__(self.cls)
        model.__dict__.update(self.state)
        for name, make in self.locks.items():
            setattr(model, name, make())
        return model


# ---------------------------------------------------------------------- input conversion
def _as_document(x):
    """A river feature dict as the engine's ``{word: count}``: n-gram tuples become strings."""
    if isinstance(x, dict) and any(type(k) is not str for k in x):
        out: dict = {}
        for k, v in x.items():
            if isinstance(k, tuple) and all(isinstance(t, str) for t in k):
                k = " ".join(k)
            out[k] = out.get(k, 0) + v
        return out
    return x


def _is_frame(X) -> bool:
    return hasattr(X, "columns") and hasattr(X, "shape")


def _iter_documents(X) -> typing.Iterator:
    """Rows of a dataframe as ``{token: count}`` dicts without zeros or missing values; any
    other iterable is passed through (n-gram tuples joined)."""
    if not _is_frame(X):
        for x in X:
            yield _as_document(x)
        return
    from river.utils import dataframe

    frame = dataframe.into_frame(X)
    columns = [" ".join(c) if isinstance(c, tuple) else c for c in frame.columns]
    native = frame.to_native()
    sparse_rows = None
    if frame.implementation.is_pandas_like() and native.shape[1] and all(
            str(dtype).startswith("Sparse") for dtype in native.dtypes):
        sparse_rows = native.sparse.to_coo().tocsr()
        sparse_rows.sort_indices()
    if sparse_rows is not None:
        indptr, indices, data = sparse_rows.indptr, sparse_rows.indices, sparse_rows.data
        for d in range(sparse_rows.shape[0]):
            doc: dict = {}
            for j, v in zip(indices[indptr[d]:indptr[d + 1]].tolist(), data[indptr[d]:indptr[d + 1]].tolist()):
                if v != 0 and not math.isnan(v):
                    doc[columns[j]] = doc.get(columns[j], 0) + v
            yield doc
        return
    values = dataframe.to_numpy(frame)
    for row in values:
        present = np.flatnonzero((row != 0) & ~np.isnan(row))
        doc = {}
        for j, v in zip(present.tolist(), row[present].tolist()):
            doc[columns[j]] = doc.get(columns[j], 0) + v
        yield doc
