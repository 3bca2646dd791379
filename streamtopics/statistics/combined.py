"""Statistics: everything the ingest kernels update, as one part that saves and merges itself.

The co-occurrence sums (exact, :class:`~streamtopics.statistics.cooccurrence.CooccurrenceStats`, or a
sketch, :class:`~streamtopics.statistics.sketch.SketchedCooccurrence`), the sliding window that subtracts
what leaves it, the random-projection tracker of the ``"rp"``/``"hybrid"`` selectors and the
recent document frequencies that keep faded words out of the anchors with forgetting on. One
:meth:`Statistics.update` per batch of accepted documents keeps them all in step.
"""

from __future__ import annotations

import copy

import numpy as np

from ..config import ModelConfig
from .cooccurrence import CooccurrenceStats
from ..text.documents import DocumentBatch
from .forgetting import DecayedCounter
from .sketch import SketchedCooccurrence
from .trackers import RandomProjectionTracker, n_projections_for_topics
from .window import DocumentWindow

FADING_RATIO = 0.25  # see Statistics.refresh_view
#: The parts, each under its prefix in a state file (``sums`` as ``stats.*``, as files always had it).
PREFIXES = {"sums": "stats", "tracker": "tracker", "activity": "activity", "window": "window"}


class Statistics:
    """The sums and what is updated with them (see the module docstring); each part but the
    sums is None when its setting is off."""

    def __init__(self, sums: CooccurrenceStats | SketchedCooccurrence, tracker: RandomProjectionTracker | None = None,
                 activity: DecayedCounter | None = None, window: DocumentWindow | None = None):
        self.sums, self.tracker, self.activity, self.window = sums, tracker, activity, window

    @classmethod
    def empty(cls, config: ModelConfig, n_words: int) -> "Statistics":
        """Empty statistics over ``n_words`` words, of the kinds ``config`` asks for."""
        if config.cooccurrence_kind(n_words) == "sketch":
            sums = SketchedCooccurrence(n_words, config.resolved_sketch_size(), config.resolved_sketch_rank(),
                                        seed=config.seed, half_life=config.half_life,
                                        half_life_unit=config.half_life_unit)
        else:
            sums = CooccurrenceStats(n_words, half_life=config.half_life, half_life_unit=config.half_life_unit)
        tracker = activity = window = None
        if config.window is not None:
            window = DocumentWindow(config.window)
        if config.half_life is not None:
            activity = DecayedCounter(n_words, config.activity_half_life, config.half_life_unit)
        if config.anchor_method != "fastanchors":
            tracker = RandomProjectionTracker(n_words, config.n_projections or n_projections_for_topics(config.n_topics),
                                              seed=config.seed, half_life=config.half_life,
                                              half_life_unit=config.half_life_unit)
        return cls(sums, tracker, activity, window)

    @property
    def n_docs(self) -> int:
        return self.sums.n_docs

    def update(self, batch: DocumentBatch, stream_times: np.ndarray | None = None) -> None:
        """Every statistic, from one batch of accepted documents (dated when ``stream_times``)."""
        self.sums.update(batch, stream_times)
        if self.window is not None:
            leaving = self.window.push(batch.select(np.flatnonzero(batch.forming_pairs())))
            if leaving is not None:
                self.sums.subtract(leaving)
                if self.tracker is not None:
                    self.tracker.subtract(leaving.indptr, leaving.indices, leaving.counts, leaving.keys)
        if self.tracker is not None or self.activity is not None:
            kept = batch.forming_pairs()  # the documents the co-occurrence sums count
            if not kept.all():
                batch = batch.select(np.flatnonzero(kept))
                stream_times = None if stream_times is None else stream_times[kept]
        if self.tracker is not None:
            self.tracker.update(batch.indptr, batch.indices, batch.counts, batch.keys, stream_times)
        if self.activity is not None:
            self.activity.update(batch.indptr, batch.indices, stream_times)

    def merge(self, other: "Statistics") -> None:
        """Add another model's statistics (a disjoint sub-stream over the same vocabulary);
        ValueError when they are not of the same kinds."""
        if self.window is not None or other.window is not None:
            raise ValueError("models with a sliding window cannot be merged (the windows would overlap in time)")
        mine, theirs = self.tracker, other.tracker
        if (mine is None) != (theirs is None) or (mine is not None and (
                (mine.seed, mine.n_projections) != (theirs.seed, theirs.n_projections))):
            raise ValueError("models can only be merged when both keep the same tracker (anchor_method, "
                             "n_projections, seed) or neither does")
        if type(self.sums) is not type(other.sums):
            raise ValueError("models can only be merged when both keep the same kind of statistics "
                             "(cooccurrence='exact' or 'sketch')")
        self.sums.merge(other.sums)
        if self.activity is not None:
            self.activity.merge(other.activity)
        if mine is not None:
            mine.merge(theirs)

    def grow(self, n_words: int) -> None:
        """Room for words admitted to an open vocabulary (zero rows)."""
        for part in (self.sums, self.tracker, self.activity):
            if part is not None:
                part.grow(n_words)

    def clear_word(self, slot: int) -> None:
        """Forget a retired word, whose slot another word takes."""
        self.sums.clear_word(slot)
        if self.activity is not None:
            self.activity.clear(slot)
        if self.tracker is not None:
            self.tracker.clear_word(slot)

    def refresh_view(self, config: ModelConfig):
        """The view of the sums a refresh reads. With forgetting, words not recently active (see
        ``activity_half_life``) get document frequency zero, so they cannot be anchor candidates;
        with a sliding window, ``n_docs`` is the documents in the window."""
        view = self.sums.view()
        if self.window is not None:
            out = copy.copy(view)  # the same kind of view (exact sums or a sketch's), shallow
            out.n_docs = len(self.window)
            return out
        if self.activity is None:
            return view
        scale = config.activity_half_life / config.half_life
        recent, df = self.activity.values(), np.asarray(view.document_frequency)
        threshold = config.min_document_frequency(view.n_docs) * scale
        # active: recent frequency passes the (rescaled) threshold and is at least a quarter of
        # the word's long-run frequency (a fading word is out ~2 activity half-lives after it stops)
        active = (recent >= threshold) & (recent >= FADING_RATIO * scale * df)
        out = copy.copy(view)
        out.document_frequency = np.where(active, df, 0.0)
        return out

    def frozen_copy(self) -> "Statistics":
        """A copy a background refresh reads while ingestion goes on (the window is not read)."""
        def copied(part):
            return None if part is None else type(part).from_state_dict(
                {k: np.array(v, copy=True) for k, v in part.state_dict().items()})

        return Statistics(self.sums.copy(), copied(self.tracker), copied(self.activity), self.window)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every part's arrays under its prefix (:data:`PREFIXES`)."""
        arrays = {}
        for name, prefix in PREFIXES.items():
            part = getattr(self, name)
            if part is not None:  # the sums' values as they are (their kind is text)
                arrays.update({f"{prefix}.{k}": v if name == "sums" else np.asarray(v)
                               for k, v in part.state_dict().items()})
        return arrays

    @classmethod
    def from_state_dict(cls, arrays: dict, config: ModelConfig) -> "Statistics":
        """The statistics :meth:`state_dict` wrote; ValueError when a part ``config`` needs is missing."""
        def part(prefix: str) -> dict:
            return {k[len(prefix) + 1:]: v for k, v in arrays.items() if k.startswith(prefix + ".")}

        kind = SketchedCooccurrence if "stats.kind" in arrays else CooccurrenceStats  # exact files have no kind
        tracker = activity = window = None
        if config.anchor_method != "fastanchors":
            if not part("tracker"):
                raise ValueError(f"no tracker saved for anchor_method {config.anchor_method!r}")
            tracker = RandomProjectionTracker.from_state_dict(part("tracker"))
        if part("activity"):
            activity = DecayedCounter.from_state_dict(part("activity"))
        if part("window"):
            window = DocumentWindow.from_state_dict(part("window"))
        return cls(kind.from_state_dict(part("stats")), tracker, activity, window)
