"""Versioned, serialisable topic snapshots: what a refresh publishes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .refresh.labels import MAX_LABEL_WORDS, topic_labels

DISPLAY_RELEVANCE = 0.6  # Sievert & Shirley's (2014) user study: lambda ~0.6 reads best
EVENT_TYPES = ("birth", "found", "death", "lost", "return", "change")  # what ``TopicSnapshot.events`` may say
ANCHOR_SHOWN_WORDS = 20  # an anchor is shown with its topic only when among this many of its most relevant words
RANKED_WORDS = ANCHOR_SHOWN_WORDS  # top_words ranks at least this many words at once (labels ask for 3, events
# for 10, the anchor shown for 20): one ranking per snapshot


@dataclass
class TopicSnapshot:
    """The topics at one point of the stream.

    ``topic_word`` is V x K with columns summing to 1, column k being topic ``topic_ids[k]``;
    ids are stable across refreshes (docs/design.md, "Topic identity"). ``events`` lists what
    changed since the previous snapshot: ``{"type": "birth" | "found" | "death" | "lost" |
    "return" | "change", "topic": id, ...}`` (a birth: a new topic whose subject is new to the
    stream; found: a new topic whose subject the stream held all along, now told apart; a death:
    a topic gone whose subject stopped; lost: one gone whose subject goes on; a return: a topic
    announced dead or lost came back and has its id again).
    ``position`` is the stream position the snapshot reflects (Kafka offsets, archive line, ...),
    set by the caller. The snapshot holds no wall-clock time, so replaying a stream reproduces it
    byte for byte.
    ``background`` (V, or None) is the distribution of the words common to all topics, explaining
    ``background_share`` of the tokens; documents are inferred against the topics and it together
    (:meth:`mixture_components`), and their mixtures are reported over the topics alone.

    What a refresh says about each topic beyond its words, in column order: ``labels``, a short
    distinct label (:mod:`~streamtopics.refresh.labels`; computed here when not given, so snapshots saved
    before labels existed get them on load); ``coherence``, the NPMI of its 10 most probable words
    over the documents the model keeps (None when it keeps none); ``representatives``, by topic
    id, its best-matching kept documents (:mod:`~streamtopics.refresh.describe`; None when none are kept).
    """

    version: int
    documents_seen: int
    vocabulary: list[str]
    topic_word: np.ndarray
    anchors: list[str]
    topic_ids: list[int]
    prevalence: np.ndarray
    alpha: np.ndarray
    events: list[dict] = field(default_factory=list)
    position: dict | None = None
    stream_time: float | None = None
    background: np.ndarray | None = None
    background_share: float = 0.0
    labels: list[str] | None = None
    coherence: np.ndarray | None = None
    representatives: dict[int, list[dict]] | None = None
    forming: bool = False  # the stream's first topics still form (the burn-in): events wait
    tentative: list[int] = field(default_factory=list)  # this snapshot's topics within their birth grace: not yet
    # announced as born (they are, if they last), so the topics listed are those announced plus these
    missing: list[int] = field(default_factory=list)  # announced topics absent here, within their death grace: an
    # id that stays away past it is announced dead, one that comes back makes no event
    stopped: list[int] = field(default_factory=list)  # this snapshot's topics whose subject stopped: announced dead
    # while the model still holds them (exact sums describe the whole stream); one that picks up again returns
    # each ranking :meth:`top_words` computed, by relevance weight (None: probability): K x n word
    # ids; a refresh asks for the same ranking for labels, events and history (0.25 s a time at V = 100,000)
    _rankings: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.labels is None:
            top = self.top_words(MAX_LABEL_WORDS, DISPLAY_RELEVANCE)
            self.labels = topic_labels([[w for w, _ in top[t]] for t in self.topic_ids], self.topic_ids)
        if self.coherence is not None:
            self.coherence = np.asarray(self.coherence, dtype=np.float64)
        if self.representatives is not None:
            self.representatives = {int(t): list(docs) for t, docs in self.representatives.items()}

    def label(self, topic_id: int) -> str:
        """The label of topic ``topic_id``."""
        return self.labels[self.column(topic_id)]

    @property
    def n_topics(self) -> int:
        return len(self.topic_ids)

    def column(self, topic_id: int) -> int:
        """The column of ``topic_word`` holding topic ``topic_id``."""
        try:
            return self.topic_ids.index(topic_id)
        except ValueError:
            raise KeyError(f"no topic with id {topic_id} in snapshot {self.version}") from None

    def shown_anchors(self) -> dict[int, str | None]:
        """By topic id, the anchor to show with the topic: its anchor word when that is among its
        :data:`ANCHOR_SHOWN_WORDS` most relevant words (:data:`DISPLAY_RELEVANCE`), else None. The
        anchor seeds a topic; after the refinement it can end far down the topic's words (20
        Newsgroups: space anchored on "part"), where showing it names the topic wrongly."""
        top = self.top_words(ANCHOR_SHOWN_WORDS, DISPLAY_RELEVANCE)
        return {topic: anchor if any(w == anchor for w, _ in top[topic]) else None
                for topic, anchor in zip(self.topic_ids, self.anchors)}

    def mixture_components(self) -> tuple[np.ndarray, np.ndarray]:
        """The columns a document is a mixture of and their prior weights (:func:`mixture_components`)."""
        return mixture_components(self)

    def topic_part(self, mixtures: np.ndarray) -> np.ndarray:
        """Mixtures over :meth:`mixture_components` restricted to the topics (:func:`topic_part`)."""
        return topic_part(self, mixtures)

    def word_distribution(self) -> np.ndarray:
        """p(w) under the snapshot: the topics weighted by prevalence, plus the background."""
        columns, prior = self.mixture_components()
        return columns @ (prior / max(float(prior.sum()), 1e-300))

    def top_words(self, n: int = 10, relevance: float | None = None) -> dict[int, list[tuple[str, float]]]:
        """The ``n`` most probable words of every topic, by topic id.

        With ``relevance`` = lambda in [0, 1] (Sievert & Shirley 2014, as in pyLDAvis) words are
        ranked by ``lambda log p(w|z) + (1 - lambda) log(p(w|z) / p(w))`` instead, which lifts
        the words peculiar to a topic above those frequent everywhere; :data:`DISPLAY_RELEVANCE`
        is what the command line and the dashboard show. The values are p(w|z) either way.
        """
        from .evaluation import relevance as relevance_of, top_word_ids  # scipy and numba: not for --help

        ranking = self._rankings.get(relevance)
        if ranking is None or ranking.shape[1] < min(n, self.topic_word.shape[0]):
            # a longer ranking's first n words are the n-word ranking (one order: value, then word id)
            score = (self.topic_word if relevance is None
                     else relevance_of(self.topic_word, self.word_distribution(), relevance))
            ranking = self._rankings[relevance] = top_word_ids(score, max(n, RANKED_WORDS))
        order = ranking[:, :n].T
        return {
            topic: [(self.vocabulary[i], float(self.topic_word[i, k])) for i in order[:, k]]
            for k, topic in enumerate(self.topic_ids)
        }

    def to_dict(self, top_n: int | None = None) -> dict:
        """A JSON-ready dict. With ``top_n`` only each topic's top words are kept (for APIs and
        message buses); without it the full matrix is included and :meth:`from_dict` restores
        the snapshot exactly."""
        topics, tentative, stopped = [], set(self.tentative), set(self.stopped)
        top = self.top_words(top_n) if top_n else None
        for k, topic in enumerate(self.topic_ids):
            entry = {
                "id": topic,
                "anchor": self.anchors[k],
                "prevalence": float(self.prevalence[k]),
                "alpha": float(self.alpha[k]),
                "label": self.labels[k],
                "coherence": None if self.coherence is None else float(self.coherence[k]),
                "representatives": None if self.representatives is None else self.representatives.get(topic, []),
                "tentative": topic in tentative,
                "stopped": topic in stopped,
            }
            if top is not None:
                entry["top_words"] = [[w, p] for w, p in top[topic]]
            else:
                entry["word_probabilities"] = self.topic_word[:, k].tolist()
            topics.append(entry)
        out = {
            "version": self.version,
            "documents_seen": self.documents_seen,
            "position": self.position,
            "stream_time": self.stream_time,
            "n_topics": self.n_topics,
            "forming": self.forming,
            "events": self.events,
            "missing": self.missing,
            "topics": topics,
        }
        if self.background is not None:
            out["background_share"] = self.background_share
            if top is None:
                out["background"] = self.background.tolist()
        if top is None:
            out["vocabulary"] = self.vocabulary
        return out

    def to_json(self, top_n: int | None = None) -> str:
        return json.dumps(self.to_dict(top_n), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "TopicSnapshot":
        if "vocabulary" not in data:
            raise ValueError("a snapshot serialised with top_n cannot be restored; save it in full")
        topics = data["topics"]
        topic_word = np.array([t["word_probabilities"] for t in topics], dtype=np.float64).T
        return cls(
            version=data["version"],
            documents_seen=data["documents_seen"],
            vocabulary=list(data["vocabulary"]),
            topic_word=topic_word.reshape(len(data["vocabulary"]), len(topics)),
            anchors=[t["anchor"] for t in topics],
            topic_ids=[t["id"] for t in topics],
            prevalence=np.array([t["prevalence"] for t in topics]),
            alpha=np.array([t["alpha"] for t in topics]),
            events=list(data["events"]),
            position=data.get("position"),
            stream_time=data.get("stream_time"),
            background=None if data.get("background") is None else np.array(data["background"], dtype=np.float64),
            background_share=float(data.get("background_share", 0.0)),
            labels=[t["label"] for t in topics] if all("label" in t for t in topics) else None,
            coherence=(None if any(t.get("coherence") is None for t in topics)
                       else [t["coherence"] for t in topics]),
            representatives=(None if any(t.get("representatives") is None for t in topics)
                             else {t["id"]: t["representatives"] for t in topics}),
            forming=bool(data.get("forming", False)),
            tentative=[t["id"] for t in topics if t.get("tentative")],
            stopped=[t["id"] for t in topics if t.get("stopped")],
            missing=list(data.get("missing", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> "TopicSnapshot":
        return cls.from_dict(json.loads(text))

    def save(self, path) -> Path:
        """Write the full snapshot as JSON (atomically: temporary file, then rename)."""
        from .state import atomic_write_bytes

        return atomic_write_bytes(Path(path), self.to_json().encode("utf-8"))

    @classmethod
    def load(cls, path) -> "TopicSnapshot":
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def __repr__(self) -> str:
        return (
            f"TopicSnapshot(version={self.version}, documents_seen={self.documents_seen}, "
            f"topics={self.n_topics}, words={len(self.vocabulary)}, events={len(self.events)})"
        )


def mixture_components(topics) -> tuple[np.ndarray, np.ndarray]:
    """The columns a document is a mixture of and their prior weights: the topics, plus the
    background as a last column when there is one. ``topics`` is anything with ``topic_word``,
    ``prevalence``, ``background`` and ``background_share`` (a snapshot, or a refresh's
    :class:`~streamtopics.refresh.recovery.Recovery` before it is published)."""
    prior = np.asarray(topics.prevalence, dtype=np.float64)
    if topics.background is None:
        return np.asarray(topics.topic_word, dtype=np.float64), prior
    share = min(max(float(topics.background_share), 0.0), 1.0)
    columns = np.column_stack([topics.topic_word, topics.background]).astype(np.float64)
    return columns, np.append(prior * (1.0 - share), share)


def topic_part(topics, mixtures: np.ndarray) -> np.ndarray:
    """Mixtures over :func:`mixture_components` restricted to the topics, rows renormalised
    (a document explained by the background alone gets the topic prevalences)."""
    if topics.background is None:
        return mixtures
    n_topics = np.shape(topics.topic_word)[1]
    part = mixtures[:, :n_topics]
    total = part.sum(axis=1, keepdims=True)
    prior = np.asarray(topics.prevalence, dtype=np.float64)
    return np.where(total > 1e-12, part / np.maximum(total, 1e-300), prior / max(prior.sum(), 1e-300))
