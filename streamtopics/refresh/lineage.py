"""The refresh lineage: what one snapshot hands on to the next.

A :class:`RefreshState` holds the last snapshot, the warm-start coefficients, the next topic id,
the significant topics, the missing topics still within their grace and the departed ones (dead,
remembered so that a topic which comes back gets its id back). :meth:`RefreshState.advance`
turns statistics and that state into the next snapshot by the steps of :mod:`~streamtopics.refresh.steps`
(anchors, warm-started recovery, seeded refinement, alignment, description); the alignment step is
:meth:`RefreshState.publish` here: topic ids aligned with the previous snapshot, and the births,
deaths and changes between them. :class:`Lineage` is the part
another refresher may take over (the scale-out refresher of ``consumers.group`` does, round after
round).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .alignment import MissingTopic, align_topics
from .candidate_depth import CandidateDepth
from .carried import CarriedRefinement
from .describe import gone_topic_lately
from .emerging import EmergingAnchors
from .moving import MovingTopics
from .rectification import RectificationSchedule
from ..config import ModelConfig
from .labels import LABEL_WORDS, SEPARATOR
from .steps import run_refresh
from ..snapshot import DISPLAY_RELEVANCE, TopicSnapshot
from ..text.vocabulary import Vocabulary

EVENT_WORDS = 10  # top words compared by change events (births and deaths show the first 8)
SETTLED_ANCHORS = 0.8  # the burn-in ends once this share of the anchors holds between two refreshes
DEPARTED_PER_TOPIC = 1  # departed topics remembered: this many per topic slot (the most recent deaths)
#: A topic about to be announced after the burn-in is a *birth* (a subject new to the stream) when its mean weight
#: in the oldest eighth of the reservoir's pooled documents is below this share of its weight in the newer half
#: (:func:`~streamtopics.refresh.describe.older_share`); otherwise it is *found*: a subject the stream held all
#: along, which the model now tells apart (a true topic resolved late, a split of a broad one). Measured
#: (``benchmarks.events``, K = 20): every birth after the burn-in of the Gibbs-truth stream (3, true topics resolved
#: late) and of the shuffled archives (20 Newsgroups 8, Reuters 2) at 0.83-1.16; the planted stream's two starts
#: at 0.06 and 0.22 when announced, its third birth (a late true topic) at 0.95.
NEW_SUBJECT = 0.5
#: A topic is new too when its subject is *rising*: its mean weight in the reservoir's documents since the last
#: refresh is at least ``RISING_SUBJECT`` times its weight in the older pooled ones (with ``STOP_EVIDENCE``
#: documents' worth of evidence; :func:`~streamtopics.refresh.describe.recent_shares`). The older share misses a
#: new subject whose words the old ones use too (its oldest eighth is not empty) and a recent one diluted in the
#: newer half. Measured (``benchmarks.events``, K = 20): the staged stream's new newsgroups at 1.73-2.78 (sale,
#: space, medicine; older shares 0.38, 0.68 and 0.66); every topic found and every large change (L1 0.7 or more)
#: after the burn-in of shuffled 20 Newsgroups and of the staged stream's old newsgroups at 0.78-1.24.
RISING_SUBJECT = 1.5
#: A kept topic whose column moved at least ``CONVERTED`` (L1: half its mass on other words) since the last
#: refresh onto a subject new to the stream (as a new topic would be judged above) is a *conversion*: the model
#: gave its slot to the new subject. The new words get a new id (a birth, after its grace) and the old id goes
#: missing (lost or dead, after its grace, or back if its words return). Measured (staged stream, seed 1): a
#: radar-and-police slot moved 1.17 onto space (rising 2.78), a graphics split 1.64 onto medicine (1.75), both
#: announced as changes before; the largest moves of stationary streams, 0.8-1.15, rose 0.86-1.12.
CONVERTED = 1.0
#: Its mirror for deaths: an announced topic that goes is *dead* (its subject stopped) when, its last column added
#: to the topics the documents are inferred over, its mean weight in the newest eighth of the pooled documents is
#: below this share of its weight in the older half (:func:`~streamtopics.refresh.describe.gone_topic_lately`);
#: otherwise it is *lost*: the model no longer tells it apart (merged into others, split) while its subject goes on.
STOPPED_SUBJECT = 0.5
#: A forgetting model's gone topic (or a window's) is dead too when it *faded* (:func:`faded`): its share when last
#: seen was below ``FADED_SHARE`` of the highest it had, and its last column, added back, takes below ``FADED_USE``
#: of that peak in the newest documents. The test above cannot tell once none of the pooled documents holds the
#: subject, old or new: such a model pools only its recent past. Exact sums pool the whole stream, where the test
#: tells: fading there is a topic the model split or crowded out (the planted stream, seed 5: a car topic displaced
#: by an emerging subject's anchor and a topic 1.55 from every true one, both with newer shares of 0.9 and more).
#: Measured (``benchmarks.events``, K = 20): the planted stream's two stops (half-life 10,000, a reservoir of 14,427
#: documents) went at 0.12 and 0.17 of their peak share, taking 0.06 of it back, with a newer share of 0.96 (so they
#: were called lost); the topics lost on the shuffled archives, exact or with a half-life of 4,000, went at 0.52-1.0
#: of their peak, taking 0.14-0.41 of it back.
FADED_SHARE = 0.5
FADED_USE = 0.25
#: A topic the model still holds is announced dead too when its subject *stopped*: its mean weight in the
#: reservoir's documents since the last refresh is below ``STOPPED_LATELY`` of its weight in the older pooled ones
#: (:func:`~streamtopics.refresh.describe.recent_shares`), where those recent documents would have held at least
#: ``STOP_EVIDENCE`` documents' worth of it at that older weight (a rarer topic's low share is noise). Exact sums
#: describe the whole stream, so they keep such a topic; the snapshot lists it as ``stopped``, and it *returns*
#: once its recent share is back to ``STOPPED_SUBJECT``. Measured (``benchmarks.events``, K = 20, exact sums): the
#: planted stream's two stops at 0.37 and 0.39 at the refresh that saw the stop (a third of its documents before
#: it), 0.06-0.10 from the next on; every other topic of it, of the Gibbs-truth stationary stream and of the
#: shuffled archives at 0.77 or more, of the staged stream (new newsgroups dilute the old) 0.47 or more. A subject
#: drifting onto new words reads as low too (:mod:`~streamtopics.refresh.moving` tells it from a stop).
STOPPED_LATELY = 0.25
STOP_EVIDENCE = 10.0


def new_subject(older: float | None, recent: float | None, evidence: float | None) -> bool:
    """Whether a topic's subject is new to the stream by its older share (:data:`NEW_SUBJECT`) or
    its rise (:data:`RISING_SUBJECT`); unknown shares say nothing."""
    rising = recent is not None and evidence is not None and evidence >= STOP_EVIDENCE and recent >= RISING_SUBJECT
    return rising or (older is not None and older < NEW_SUBJECT)


def faded(gone: MissingTopic, use: float | None) -> bool:
    """Whether a gone topic faded away (see :data:`FADED_SHARE`): ``use`` is its mean weight in the
    newest documents with its last column added back (None: not known)."""
    if use is None or gone.share is None or not gone.peak:
        return False
    return gone.share < FADED_SHARE * gone.peak and use < FADED_USE * gone.peak


@dataclass
class Lineage:
    """The latest snapshot, its warm-start coefficients (V x K, plus the background's column), the
    id the next new topic gets, the carried refinement (None: the next refines from the seed), the
    anchor candidates' depth (None: chosen afresh) and whether to rectify (None: rectify): enough for
    a refresh elsewhere to continue the ids, the refinement and the anchor search (and the anchors
    it placed for emerging subjects, the topics it saw moving and those announced stopped)."""

    snapshot: TopicSnapshot | None
    coefficients: np.ndarray | None
    next_topic_id: int
    carried: CarriedRefinement | None = None
    candidate_depth: CandidateDepth | None = None
    rectification: RectificationSchedule | None = None
    emerging: EmergingAnchors | None = None
    moving: MovingTopics | None = None


class RefreshState:
    """Everything a refresh reads from the ones before it (see the module docstring)."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self.snapshot: TopicSnapshot | None = None
        self.coefficients: np.ndarray | None = None
        self.next_topic_id = 0
        self.significant: set[int] = set()
        self.missing: dict[int, MissingTopic] = {}  # absent topics within their grace, by id
        self.departed: dict[int, MissingTopic] = {}  # announced dead, oldest first: a return keeps its id
        self.stopped: set[int] = set()  # announced dead while still held (their subject stopped: STOPPED_LATELY)
        self.unannounced: dict[int, int] = {}  # new topics within their birth grace -> refreshes lasted
        self.first_new: dict[int, bool | None] = {}  # unannounced ids -> whether their subject looked new then
        self.burn_in_left: int | None = None  # refreshes of burn-in left (None: over, or not started)
        self.labels: dict[int, str] = {}  # the last label of every topic that may still make an event
        self.peak_shares: dict[int, float] = {}  # the highest share of every topic that may still make an event
        self.carried = CarriedRefinement()  # the refinement's state (refresh/carried.py)
        self.candidate_depth = CandidateDepth()  # how deep the anchor search looks (refresh/candidate_depth.py)
        self.rectification = RectificationSchedule()  # whether it rectifies (refresh/rectification.py)
        self.emerging = EmergingAnchors()  # anchors placed for emerging subjects (refresh/emerging.py)
        self.moving = MovingTopics()  # topics whose subject moves onto new words (refresh/moving.py)

    def export(self) -> Lineage:
        """The part of the state another refresher continues from."""
        return Lineage(self.snapshot, self.coefficients, self.next_topic_id, self.carried, self.candidate_depth,
                       self.rectification, self.emerging, self.moving)

    def adopt(self, lineage: Lineage) -> None:
        """Continue from ``lineage``: the next refresh warm-starts from its coefficients,
        aligns with its snapshot, numbers new topics from its next id and continues its carried
        refinement."""
        self.snapshot, self.coefficients, self.next_topic_id = (
            lineage.snapshot, lineage.coefficients, lineage.next_topic_id)
        self.carried = lineage.carried if lineage.carried is not None else CarriedRefinement()
        self.candidate_depth = lineage.candidate_depth if lineage.candidate_depth is not None else CandidateDepth()
        self.rectification = (lineage.rectification if lineage.rectification is not None
                              else RectificationSchedule())
        self.emerging = lineage.emerging if lineage.emerging is not None else EmergingAnchors()
        self.moving = lineage.moving if lineage.moving is not None else MovingTopics()
        self.stopped = set() if self.snapshot is None else set(self.snapshot.stopped)

    def forget_word(self, slot: int) -> None:
        """A vocabulary slot now holds another word: its warm start becomes uniform and the
        remembered columns of missing and departed topics no longer weigh it."""
        if self.coefficients is not None:
            self.coefficients[slot] = 1.0 / self.coefficients.shape[1]
        for kept in (*self.missing.values(), *self.departed.values()):
            if slot < kept.column.shape[0]:
                kept.column[slot] = 0.0

    def state_dict(self, vocabulary: Vocabulary | None) -> tuple[dict, dict]:
        """``(arrays, meta)``: the snapshot, the warm start, the ids, the events' memory, the carried refinement,
        the anchor candidates' depth, the rectification's schedule and the anchors placed for emerging subjects.
        The snapshot's own words are kept only when they are no longer a prefix of
        ``vocabulary`` (an open vocabulary gave a slot to another word since)."""
        arrays, snapshot = {}, self.snapshot
        if self.coefficients is not None:
            arrays["coefficients"] = self.coefficients
        if snapshot is not None:
            arrays["snapshot.topic_word"] = snapshot.topic_word
            if snapshot.background is not None:
                arrays["snapshot.background"] = snapshot.background
        for name, kept in (("missing", self.missing), ("departed", self.departed)):
            arrays.update({f"{name}.{topic}": topic_state.column for topic, topic_state in kept.items()})
        carried_arrays, carried_meta = self.carried.state_dict()
        arrays.update({f"carried.{name}": array for name, array in carried_arrays.items()})
        relabelled = (snapshot is not None and vocabulary is not None
                      and list(snapshot.vocabulary) != vocabulary.words[:len(snapshot.vocabulary)])
        meta = {
            "next_topic_id": self.next_topic_id,
            "snapshot": None if snapshot is None else _snapshot_meta(snapshot),
            "significant": sorted(self.significant),
            "missing": [[t, m.anchor, m.words, m.refreshes, m.share, m.peak] for t, m in self.missing.items()],
            "departed": [[t, m.anchor, m.words, m.refreshes, m.share, m.peak] for t, m in self.departed.items()],
            "stopped": sorted(self.stopped),
            "unannounced": [[t, n] for t, n in self.unannounced.items()],
            "first_new": [[t, v] for t, v in self.first_new.items()],
            "burn_in_left": self.burn_in_left,
            "labels": [[t, label] for t, label in self.labels.items()],
            "peak_shares": [[t, share] for t, share in self.peak_shares.items()],
            "snapshot_vocabulary": list(snapshot.vocabulary) if relabelled else None,
            "carried": carried_meta,
            "candidate_depth": self.candidate_depth.state(),
            "rectification": self.rectification.state(),
            "emerging_anchors": self.emerging.state(),
            "moving": self.moving.state(),
        }
        return arrays, meta

    def load_state_dict(self, arrays: dict, meta: dict, vocabulary: Vocabulary | None) -> None:
        """Take up what :meth:`state_dict` wrote (keys missing from older files keep their defaults)."""
        self.next_topic_id = meta["next_topic_id"]
        self.coefficients = arrays.get("coefficients")
        self.significant = set(meta.get("significant", []))
        self.missing = {int(t): MissingTopic(arrays[f"missing.{t}"], anchor, list(words), int(refreshes), *shares)
                        for t, anchor, words, refreshes, *shares in meta.get("missing", [])}
        self.departed = {int(t): MissingTopic(arrays[f"departed.{t}"], anchor, list(words), int(refreshes), *shares)
                         for t, anchor, words, refreshes, *shares in meta.get("departed", [])}
        self.stopped = {int(t) for t in meta.get("stopped", [])}
        self.unannounced = {int(t): int(n) for t, n in meta.get("unannounced", [])}
        self.first_new = {int(t): v for t, v in meta.get("first_new", [])}
        self.first_new.update({int(t): None if v is None else v < NEW_SUBJECT  # files written before the rise
                               for t, v in meta.get("first_older", [])})
        self.burn_in_left = meta.get("burn_in_left")
        self.labels = {int(t): label for t, label in meta.get("labels", [])}
        self.peak_shares = {int(t): float(share) for t, share in meta.get("peak_shares", [])}
        self.carried = CarriedRefinement()
        self.carried.load_state_dict({k[len("carried."):]: v for k, v in arrays.items() if k.startswith("carried.")},
                                     meta.get("carried"))
        self.candidate_depth = CandidateDepth()
        self.candidate_depth.load_state(meta.get("candidate_depth"))
        self.rectification = RectificationSchedule()
        self.rectification.load_state(meta.get("rectification"))
        self.emerging = EmergingAnchors()
        self.emerging.load_state(meta.get("emerging_anchors"))
        self.moving = MovingTopics()
        self.moving.load_state(meta.get("moving"))
        if meta["snapshot"] is not None:
            topic_word = arrays["snapshot.topic_word"]
            words = meta.get("snapshot_vocabulary") or vocabulary.words[:topic_word.shape[0]]
            snapshot = TopicSnapshot(**meta["snapshot"], vocabulary=words, topic_word=topic_word,
                                     background=arrays.get("snapshot.background"))
            snapshot.prevalence = np.asarray(snapshot.prevalence)
            snapshot.alpha = np.asarray(snapshot.alpha)
            self.snapshot = snapshot

    def advance(self, view, tracker, vocabulary: Vocabulary, n_docs: int, position, reservoir,
                stream_time, replaced_slots: set[int], excerpts=None, stamps=None) -> tuple[TopicSnapshot, dict]:
        """The next snapshot from the statistics ``view`` (and ``tracker`` for the tracker-based
        anchor methods), refined over the ``reservoir`` documents if given, which also give its
        topics' coherence and representative documents (with the texts of ``excerpts``, a
        :class:`~streamtopics.refresh.describe.DocumentExcerpts`) and, with their ``stamps``
        (:meth:`~streamtopics.refresh.reservoir.Reservoir.stamped_batch`), which new topics are new
        subjects; returns it with the timings of its steps. See :meth:`publish` for
        ``replaced_slots``. The steps: :func:`~streamtopics.refresh.steps.run_refresh`."""
        return run_refresh(self, view, tracker, vocabulary, n_docs, position, reservoir, stream_time, replaced_slots,
                           excerpts, stamps)

    @property
    def settled(self) -> bool:
        """Whether the burn-in is over: a snapshot published and no burn-in refresh left."""
        return self.snapshot is not None and self.burn_in_left is None

    def publish(self, result, vocabulary: Vocabulary, n_docs: int, position=None, stream_time=None,
                replaced_slots: set[int] | None = None, pool: tuple | None = None) -> TopicSnapshot:
        """The snapshot of a :class:`~streamtopics.refresh.recovery.Recovery`: topic ids aligned with the
        previous snapshot and the missing topics, events since it. ``replaced_slots``, the
        vocabulary slots given to another word since the previous snapshot, are left out of the
        alignment and the set is emptied (the new snapshot has their new words). ``pool``: the
        share step's pooled documents and their reservoir stamps, which tell a topic gone dead
        from lost (:data:`STOPPED_SUBJECT`, :data:`FADED_SHARE`)."""
        previous = self.snapshot
        anchors = [vocabulary.words[w] for w in result.anchors]
        alignment = self._align(previous, result.topic_word, anchors, replaced_slots)
        if previous is not None and self.burn_in_left is None:
            self._convert(alignment, previous, result)
        self.coefficients = result.coefficients
        snapshot = TopicSnapshot(
            version=1 if previous is None else previous.version + 1,
            documents_seen=n_docs,
            vocabulary=vocabulary.words[: result.topic_word.shape[0]],  # words admitted meanwhile: not yet
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
        self.snapshot = snapshot
        older, newer, recent, expected = (_by_topic(alignment.topic_ids, getattr(result, name, None))
                                          for name in ("older_share", "newer_share", "recent_share", "recent_expected"))
        lately = None if pool is None else (lambda column: gone_topic_lately(result, *pool, column))
        settled = previous is not None and self.burn_in_left is None
        events = self._events(previous, snapshot, alignment, older, newer, lately, recent, expected)
        if settled:
            announced = {event["topic"] for event in events if event["type"] in ("birth", "found", "return")}
            events += self._stops(snapshot, recent, expected, alignment.distances, announced)
        snapshot.events.extend(self._labelled(events, snapshot))
        for topic, share in zip(snapshot.topic_ids, np.asarray(snapshot.prevalence, dtype=np.float64).tolist()):
            if np.isfinite(share):
                self.peak_shares[topic] = max(share, self.peak_shares.get(topic, 0.0))
        snapshot.forming = self.burn_in_left is not None
        if not snapshot.forming:
            snapshot.tentative, snapshot.missing = self._unsettled(snapshot)
            snapshot.stopped = [t for t in snapshot.topic_ids if t in self.stopped]
        return snapshot

    def _convert(self, alignment, previous: TopicSnapshot, result) -> None:
        """Give a new id to each announced topic that moved onto a subject new to the stream
        (:data:`CONVERTED`): its old id becomes a death of the alignment, the new one a birth. A
        stopped topic's slot too: otherwise the newcomer's rise would read as the stopped one's return."""
        shares = [getattr(result, name, None) for name in ("older_share", "recent_share", "recent_expected")]
        if all(share is None for share in shares):
            return
        known = [np.full(len(alignment.topic_ids), np.nan) if share is None else np.asarray(share, dtype=np.float64)
                 for share in shares]
        for k, topic in enumerate(alignment.topic_ids):
            moved = alignment.distances.get(topic)
            if moved is None or moved < CONVERTED or topic not in previous.topic_ids or topic in self.unannounced:
                continue
            older, recent, evidence = (None if np.isnan(share[k]) else float(share[k]) for share in known)
            if new_subject(older, recent, evidence):
                alignment.topic_ids[k] = self.next_topic_id
                alignment.births.append(self.next_topic_id)
                alignment.deaths.append(topic)
                del alignment.distances[topic]
                self.next_topic_id += 1

    def _unsettled(self, snapshot: TopicSnapshot) -> tuple[list[int], list[int]]:
        """The snapshot's topics within their birth grace, and the announced topics absent within
        their death grace: with them the events add up (every topic listed was announced as born,
        or is tentative, or stopped; every announced one absent is missing, or was announced dead). Minor
        topics (``min_prevalence``) make no events and are neither."""
        tentative = [t for t in snapshot.topic_ids if t in self.unannounced]
        missing = [t for t in self.missing if t not in self.unannounced and t not in self.stopped
                   and (self.config.min_prevalence == 0 or t in self.significant)]
        return tentative, sorted(missing)

    def _labelled(self, events: list[dict], snapshot: TopicSnapshot) -> list[dict]:
        """The events with their topic's label: its label in ``snapshot``, or for a topic that
        is gone the one it had when last seen; then remembers the labels of every topic that may
        still make an event."""
        self.labels.update(zip(snapshot.topic_ids, snapshot.labels))
        out = []
        for event in events:
            topic = event["topic"]
            label = self.labels.get(topic) or SEPARATOR.join(event.get("words", [])[:LABEL_WORDS])
            out.append({"type": event["type"], "topic": topic, "label": label, **event})
        alive = (set(snapshot.topic_ids) | set(self.missing) | set(self.unannounced)
                 | self.significant)
        self.labels = {t: label for t, label in self.labels.items() if t in alive}
        self.peak_shares = {t: share for t, share in self.peak_shares.items() if t in alive}
        return out

    def _align(self, previous: TopicSnapshot | None, topic_word: np.ndarray, anchors: list[str],
               replaced_slots: set[int] | None):
        """Ids for the new topics: matched against the previous snapshot's topics, the missing
        ones still within their grace and the departed ones
        (:class:`~streamtopics.refresh.alignment.MissingTopic`)."""
        if previous is None:
            alignment = align_topics(None, None, topic_word, self.next_topic_id, self.config.match_threshold)
            self.next_topic_id = alignment.next_id
            return alignment
        missing = list(self.missing.items()) + list(self.departed.items())
        columns = [previous.topic_word] + [m.column[:, None] for _, m in missing]
        n_words = max(topic_word.shape[0], max(c.shape[0] for c in columns))
        before = np.column_stack([np.vstack([c, np.zeros((n_words - c.shape[0], c.shape[1]))])  # words admitted since
                                  for c in columns])[: topic_word.shape[0]]
        if replaced_slots:  # slots whose word was retired since: not comparable
            before[sorted(i for i in replaced_slots if i < before.shape[0])] = 0.0
            replaced_slots.clear()
        alignment = align_topics(before, list(previous.topic_ids) + [t for t, _ in missing], topic_word,
                                 self.next_topic_id, self.config.match_threshold,
                                 list(previous.anchors) + [m.anchor for _, m in missing], anchors)
        self.next_topic_id = alignment.next_id
        return alignment

    def _events(self, previous: TopicSnapshot | None, snapshot: TopicSnapshot, alignment,
                older: dict[int, float | None] | None = None, newer: dict[int, float | None] | None = None,
                lately=None, recent: dict | None = None, expected: dict | None = None) -> list[dict]:
        """Births, topics found, deaths and topics lost (after the grace), returns and changes
        since ``previous``, with their words; ``older`` and ``newer``: each topic's
        :func:`~streamtopics.refresh.describe.older_share` and ``newer_share`` (``recent`` and
        ``expected``: the ratio and evidence of ``recent_shares``), ``lately(column)``
        a gone topic's newer share and its weight in the newest documents
        (:func:`~streamtopics.refresh.describe.gone_topic_lately`; None: every new topic is a birth,
        every topic gone a death)."""
        config = self.config
        forgets = config.half_life is not None or config.window is not None  # it pools only its recent past
        top = snapshot.top_words(EVENT_WORDS, DISPLAY_RELEVANCE)
        for topic in alignment.births:  # whether its subject looked new when it appeared (_new_subjects)
            self.first_new.setdefault(topic, self._looks_new(topic, older, recent, expected))
        self.first_new = {t: v for t, v in self.first_new.items() if t in snapshot.topic_ids}
        before = {} if previous is None else previous.top_words(EVENT_WORDS, DISPLAY_RELEVANCE)
        returned = [t for t in snapshot.topic_ids if t in self.departed]
        for topic in returned:
            del self.departed[topic]
        gone = set(alignment.deaths) - set(self.departed)
        for topic in list(self.missing):
            if topic in gone:
                self.missing[topic].refreshes += 1
            else:
                del self.missing[topic]  # back under its id
        for topic in gone - set(self.missing):
            column = previous.column(topic)
            share = float(previous.prevalence[column]) if np.isfinite(previous.prevalence[column]) else None
            self.missing[topic] = MissingTopic(np.array(previous.topic_word[:, column]), previous.anchors[column],
                                               [w for w, _ in before[topic][:8]], share=share,
                                               peak=self.peak_shares.get(topic, share))
        dead = sorted(t for t, m in self.missing.items() if m.refreshes > config.death_grace)
        if config.min_prevalence > 0:
            # births and deaths of significant topics: an id whose prevalence reaches the floor is
            # born, one that falls below it (or is gone past its grace) dies; minor topics make no
            # events. Hysteresis: a significant topic stays so until it falls below half the floor.
            share = dict(zip(snapshot.topic_ids, np.asarray(snapshot.prevalence, dtype=np.float64).tolist()))
            significant = {t for t, p in share.items()
                           if p >= config.min_prevalence or (t in self.significant and p >= config.min_prevalence / 2)}
            significant |= self.significant & (set(self.missing) - set(dead))
            births = [t for t in snapshot.topic_ids if t in significant and t not in self.significant]
            deaths = sorted(self.significant - significant)
            self.significant = significant
        else:
            births, deaths = alignment.births, dead
        if previous is None or self.burn_in_left is not None:
            return self._burn_in(previous, snapshot, top, dead)
        births = [t for t in births if t not in returned]
        if config.min_prevalence > 0:  # a minor topic's return is no event (nor was its death)
            returned = [t for t in returned if t in self.significant]
        births, deaths = self._debounced(previous, snapshot, births, deaths, alignment.distances)
        already = [t for t in deaths if t in self.stopped]  # announced when their subject stopped
        deaths = [t for t in deaths if t not in self.stopped]
        births, found = self._new_subjects(births, older, recent, expected)
        events = self._births(snapshot, top, births)
        events += [{**event, "type": "found"} for event in self._births(snapshot, top, found)]
        events += [{**event, "type": "return"} for event in self._births(snapshot, top, returned)]
        for topic in deaths:
            gone = self.missing.get(topic)
            if gone is None:  # a significant topic that fell below the floor while present
                share, use = (newer or {}).get(topic), None
            else:
                share, use = (None, None) if lately is None else lately(gone.column)
            goes_on = (share is not None and share >= STOPPED_SUBJECT
                       and not (gone is not None and forgets and faded(gone, use)))
            kind = "lost" if goes_on else "death"
            events.append({"type": kind, "topic": topic} if gone is None else
                          {"type": kind, "topic": topic, "anchor": gone.anchor, "words": gone.words})
        self._depart([t for t in dead if t in deaths or t in already])
        self.stopped.difference_update(already)
        for topic in dead:
            self.missing.pop(topic, None)
        for k, topic in enumerate(snapshot.topic_ids):
            if topic not in alignment.distances or topic not in before:
                continue  # new, or back from missing (no event either way)
            anchor_before = previous.anchors[previous.column(topic)]
            moved = alignment.distances[topic]
            if moved >= config.change_threshold or anchor_before != snapshot.anchors[k]:
                now, then = [w for w, _ in top[topic]], [w for w, _ in before[topic]]
                events.append({"type": "change", "topic": topic, "distance": round(moved, 6),
                               "anchor_before": anchor_before, "anchor_after": snapshot.anchors[k],
                               "words_in": [w for w in now if w not in then],
                               "words_out": [w for w in then if w not in now]})
        return events

    def _depart(self, topics: list[int]) -> None:
        """Remember the columns of topics whose death (or loss) was just announced, the most recent
        ``DEPARTED_PER_TOPIC`` per topic slot: one that comes back (same anchor, close in L1 or
        most of its top words, as for a missing topic) takes its id back with a return event
        instead of a birth under a new id. On the Reuters replay (K = 20) oil and banking lost
        their anchors to a burst of commodity-price tables for four refreshes and came back."""
        for topic in topics:
            self.departed[topic] = self.missing[topic]
        for topic in list(self.departed)[: max(0, len(self.departed) - DEPARTED_PER_TOPIC * self.config.n_topics)]:
            del self.departed[topic]

    def _stops(self, snapshot: TopicSnapshot, recent: dict | None, expected: dict | None,
               moved: dict[int, float], announced: set[int]) -> list[dict]:
        """Deaths of announced topics the model still holds whose subject stopped, and returns of
        stopped ones that picked up again (:data:`STOPPED_LATELY`); none when the stamps cannot tell.
        A topic whose subject is moving onto new words (:mod:`~streamtopics.refresh.moving`) has not stopped.
        A stopped topic that ``moved`` (L1, by id) ``change_threshold`` or more since the last refresh
        does not return: its slot is taking other words, and the rise is theirs (the reversed stream,
        seed 3: a stopped slot moved 0.6 towards a starting subject, "returned", and died again).
        A topic ``announced`` (born, found, back) in this very refresh does not stop in it: the
        newsgroup-sorted 20 Newsgroups replay announced a Mac topic born and dead in one snapshot."""
        if recent is None or expected is None:
            return []
        top = snapshot.top_words(EVENT_WORDS, DISPLAY_RELEVANCE)
        events = []
        for k, topic in enumerate(snapshot.topic_ids):
            share, evidence = recent.get(topic), expected.get(topic)
            if share is None or evidence is None:
                continue
            if topic in self.stopped:
                if share >= STOPPED_SUBJECT and moved.get(topic, 0.0) < self.config.change_threshold:
                    self.stopped.discard(topic)
                    events += [{**event, "type": "return"} for event in self._births(snapshot, top, [topic])]
                continue
            if (share < STOPPED_LATELY and evidence >= STOP_EVIDENCE and topic not in self.unannounced
                    and topic not in announced
                    and topic not in self.moving.leads
                    and (self.config.min_prevalence == 0 or topic in self.significant)):
                self.stopped.add(topic)
                events.append({"type": "death", "topic": topic, "anchor": snapshot.anchors[k],
                               "words": [w for w, _ in top[topic][:8]], "held": True})
        return events

    def _burn_in(self, previous, snapshot: TopicSnapshot, top: dict, dead: list[int]) -> list[dict]:
        """While a young stream's first topics still form, no events: the burn-in lasts at most
        ``burn_in`` refreshes after the first snapshot, fewer once ``SETTLED_ANCHORS`` of the
        anchors hold between two refreshes. The refresh that ends it announces the topics present
        then as births (one new in that very refresh starts its ``birth_grace`` instead); topics
        that came and went meanwhile were never announced and make no event. With ``burn_in`` 0
        the first snapshot announces its topics. Significant-topic mode (``min_prevalence``)
        announces only the significant ones.

        Announcing the first snapshot at once and the net change at the end of the burn-in (as
        before) gave 32 births and deaths after the first snapshot of the demo (K = 20), most of
        them the first snapshot's immature topics being replaced within the burn-in."""
        for topic in dead:
            del self.missing[topic]
        significant = self.significant if self.config.min_prevalence > 0 else set(snapshot.topic_ids)
        present = [t for t in snapshot.topic_ids if t in significant]
        if previous is None:
            self.burn_in_left = self.config.burn_in or None
            return [] if self.burn_in_left else self._births(snapshot, top, present)
        self.burn_in_left -= 1
        settled = len(set(snapshot.anchors) & set(previous.anchors)) >= SETTLED_ANCHORS * len(snapshot.anchors)
        if not (settled or self.burn_in_left <= 0):
            return []
        # topics new in this very refresh start their birth grace as after the burn-in
        fresh = set(present) - set(previous.topic_ids) if self.config.birth_grace > 0 else set()
        self.burn_in_left, self.unannounced = None, {t: 0 for t in fresh}
        self.first_new = {t: v for t, v in self.first_new.items() if t in fresh}
        self.missing.clear()  # never announced: a return is a birth
        return self._births(snapshot, top, [t for t in present if t not in fresh])

    def _new_subjects(self, births: list[int], older: dict[int, float | None] | None, recent: dict | None = None,
                      expected: dict | None = None) -> tuple[list[int], list[int]]:
        """``births`` split into the topics whose subject is new to the stream and those *found*:
        looking old (:func:`new_subject`: present from the start of what the reservoir remembers,
        and not rising) both when the topic appeared and now. Either time alone misjudges: a
        forgetting model's newcomer, announced 4,500 documents after it started, had an older share
        of 0.2 when it appeared and 0.6 when announced; a minor slot of a model with
        ``min_prevalence`` scored high when it appeared and 0.3 once a new subject had moved into it;
        the staged stream's medicine newsgroup rose 1.75 when its topic appeared, 1.45 when announced.
        A topic whose first share is unknown (it appeared while the stamps could not tell, or left
        and came back) is judged by the share now; one whose share now is unknown is a birth."""
        found = []
        for topic in births:
            then, now = self.first_new.pop(topic, None), self._looks_new(topic, older, recent, expected)
            if now is not None and not now and not then:
                found.append(topic)
        return [t for t in births if t not in found], found

    @staticmethod
    def _looks_new(topic: int, older: dict | None, recent: dict | None, expected: dict | None) -> bool | None:
        """Whether ``topic``'s subject looks new to the stream now (:func:`new_subject`); None when
        its older share is unknown."""
        now = None if older is None else older.get(topic)
        if now is None:
            return None
        rise, evidence = (None if shares is None else shares.get(topic) for shares in (recent, expected))
        return new_subject(now, rise, evidence)

    @staticmethod
    def _births(snapshot: TopicSnapshot, top: dict, topics: list[int]) -> list[dict]:
        return [{"type": "birth", "topic": t, "anchor": snapshot.anchors[snapshot.column(t)],
                 "words": [w for w, _ in top[t][:8]]} for t in topics]

    def _debounced(self, previous, snapshot: TopicSnapshot, births: list[int], deaths: list[int],
                   moved: dict[int, float]):
        """Births announced once the topic has lasted ``birth_grace`` refreshes in which it held
        still: moved (``moved``, by id) less than ``change_threshold``, the least move that is a
        change event. A topic that dies unannounced makes no event. A new topic that still moves
        that much is a slot the refinement has not settled yet, not a subject: on a stationary
        Gibbs-truth stream (20 Newsgroups K = 20, alpha 0.1) two such topics, 1.1 and 1.6 (L1)
        from every true topic and moving 0.6-0.9 a refresh, were announced a refresh after they
        appeared (one died three refreshes later). The price: a subject that starts while the
        reservoir still fills forms over several restarts, and its birth waits until it has
        formed (the planted stream of ``benchmarks.events``: 4 refreshes after the start, not 1)."""
        if previous is None or self.config.birth_grace == 0:
            return births, deaths
        present = set(snapshot.topic_ids)
        for topic in list(self.unannounced):
            if topic in present and moved.get(topic, np.inf) < self.config.change_threshold:
                self.unannounced[topic] += 1
        self.unannounced.update({t: 0 for t in births})
        announced = [t for t in snapshot.topic_ids if self.unannounced.get(t, -1) >= self.config.birth_grace]
        for topic in announced:
            del self.unannounced[topic]
        silent = {t for t in deaths if t in self.unannounced}
        for topic in silent:
            del self.unannounced[topic]
        return announced, [t for t in deaths if t not in silent]


def _by_topic(topic_ids: list[int], shares) -> dict[int, float | None] | None:
    """``shares`` (one per column, NaN: unknown) by topic id; None when there are none."""
    if shares is None:
        return None
    return {t: (None if np.isnan(v) else v) for t, v in zip(topic_ids, np.asarray(shares, dtype=np.float64).tolist())}


def _snapshot_meta(snapshot: TopicSnapshot) -> dict:
    """A snapshot's fields other than its arrays and words (a state file's JSON part)."""
    return {
        "version": snapshot.version, "documents_seen": snapshot.documents_seen,
        "anchors": snapshot.anchors, "topic_ids": snapshot.topic_ids,
        "prevalence": snapshot.prevalence.tolist(), "alpha": snapshot.alpha.tolist(),
        "events": snapshot.events, "position": snapshot.position, "stream_time": snapshot.stream_time,
        "background_share": snapshot.background_share, "labels": snapshot.labels,
        "forming": snapshot.forming, "tentative": snapshot.tentative, "missing": snapshot.missing,
        "coherence": None if snapshot.coherence is None else snapshot.coherence.tolist(),
        "representatives": snapshot.representatives,
    }
