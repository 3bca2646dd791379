"""ModelConfig: every setting of a StreamingTopicModel, its default, its check and its doc.

The one place model defaults live: the model, the Kafka consumer's config, the command line's
model options and river's :class:`~streamtopics.integrations.river.AnchorTopics` all read them from here
(:func:`default`, :func:`doc`). A model's :meth:`~streamtopics.model.StreamingTopicModel.get_config` is
:meth:`ModelConfig.to_dict`, which is also what a state file stores.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .refresh.device import DEVICE_MAX_COLUMNS
from .statistics.forgetting import HALF_LIFE_UNITS
from .stream_clock import DEFAULT_MAX_SKEW

#: The selectors of :data:`~streamtopics.refresh.anchor_selection.ANCHOR_SELECTORS`, named here so
#: that the settings (and the command line's --help) do not import the anchor search.
ANCHOR_METHODS = ("fastanchors", "rp", "hybrid")
#: Default relative support of the tracker-based selectors: a word is eligible when it occurs in at
#: least this fraction of the documents seen (the tracker's ranking needs a threshold that grows
#: with M, see :mod:`~streamtopics.statistics.trackers`), and in at least ``min_df`` documents.
DEFAULT_RP_MIN_SUPPORT = 0.005
STATISTICS = ("exact", "sketch", "auto")
#: ``cooccurrence="auto"`` keeps exact sums up to this many words (V(V+1)/2 float64: 1.6 GB at
#: 20,000 words) and sketches above it (BENCHMARKS.md, "Large vocabularies").
SKETCH_ABOVE_WORDS = 20_000
REFINE_DEVICES = ("cpu", "cuda", "auto")
#: ``reservoir_size="auto"``: the refinement's cost grows with its documents times the topics, so
#: the reservoir is a fixed budget of topic-documents (16,000 documents at K = 100, the cost the
#: defaults were measured with), between 16,000 and 50,000 documents: 50,000 for K <= 32, 32,000 at
#: K = 50. On the standard grid of Gibbs-truth streams it lowered L1 at 100k documents in all 12
#: settings (20 Newsgroups K = 50, alpha 0.03: 0.209 -> 0.167; Reuters K = 20, alpha 0.03: 0.122 ->
#: 0.094) and changed no real-text figure (`git show 8e056d1:BENCHMARKS.md`, "A reservoir sized by the
#: topics").
RESERVOIR_TOPIC_DOCUMENTS = 1_600_000
RESERVOIR_RANGE = (16_000, 50_000)


def default_reservoir_size(n_topics: int) -> int:
    """Documents the refinement's reservoir keeps for ``n_topics`` topics (``reservoir_size="auto"``)."""
    low, high = RESERVOIR_RANGE
    return min(high, max(low, RESERVOIR_TOPIC_DOCUMENTS // max(int(n_topics), 1)))


def _setting(default, doc: str):
    return field(default=default, metadata={"doc": doc})


@dataclass
class ModelConfig:
    """The settings of a :class:`~streamtopics.model.StreamingTopicModel` (docs/configuration.md,
    "Settings at length", explains each). Checked and normalised on construction: a bad value
    raises ValueError."""

    n_topics: int = _setting(20, "Number of topics K.")
    vocabulary_size: int = _setting(10_000, "Words kept when the vocabulary is learned.")
    warmup_documents: int = _setting(1000, "Documents the vocabulary is learned from.")
    anchor_min_df: int | str = _setting(
        "auto", "Documents a candidate anchor word must occur in ('auto' or a number).")
    max_anchor_candidates: int | str | None = _setting(
        "auto", "At most this many (most frequent) candidate anchors; 'auto': max(1000, 20 per topic), or twice that where the sums fit the deeper set's anchors better.")
    projection_dim: int | None = _setting(1000, "Candidate rows are projected to this many dimensions (None: never).")
    anchor_cleanup: bool = _setting(True, "Run FastAnchorWords' re-selection pass over the greedy anchors.")
    anchor_method: str = _setting("fastanchors", f"How anchors are selected: one of {ANCHOR_METHODS}.")
    anchor_stickiness: float | None = _setting(
        None, "A previous anchor is replaced only by a word this much farther out (None: anchors chosen afresh).")
    emerging_anchors: bool = _setting(
        True, "After the burn-in, exact sums: an anchor for each subject whose words' rate jumped since the last "
        "refresh that the anchors miss; such a refresh refines from the anchor seed again.")
    anchor_rectification: int = _setting(
        5, "Alternating-projection steps rectifying the candidates' co-occurrences before anchor search (0: none).")
    n_projections: int | None = _setting(None, "Random directions of the tracker (None: from n_topics).")
    rp_min_support: float = _setting(DEFAULT_RP_MIN_SUPPORT, "Fraction of documents a tracker candidate occurs in.")
    recovery: str = _setting("l2", "Topic recovery: 'l2' or 'kl'.")
    recovery_tol: float = _setting(1e-5, "Convergence tolerance of the recovery solver.")
    recovery_max_iter: int = _setting(500, "Most solver iterations per word.")
    warm_start: bool = _setting(True, "Start every word's solve from the previous refresh's solution.")
    match_threshold: float = _setting(0.5, "A topic keeps its id below this fraction of the median topic distance.")
    change_threshold: float = _setting(0.5, "A kept topic that moved at least this much (L1) is a change.")
    refresh_every: int | None = _setting(None, "Refresh after every this many absorbed documents (None: on demand).")
    batch_size: int = _setting(2048, "Documents buffered before the ingest kernel runs.")
    max_text_chars: int = _setting(1_000_000, "Longer texts are truncated to this many characters.")
    seed: int = _setting(0, "Random seed of the model.")
    refresh_every_stream_seconds: float | None = _setting(
        None, "Also refresh after this many seconds of stream time (the documents' own dates).")
    refresh_every_wall_seconds: float | None = _setting(None, "Also refresh after this many seconds of wall time.")
    drift_threshold: float | None = _setting(None, "Also refresh when held-out fit drops this many nats per token.")
    refresh_in_background: bool = _setting(False, "Automatic refreshes run in a background thread.")
    half_life: float | None = _setting(None, "Forgetting: a document's weight halves after this long (None: exact).")
    activity_half_life: float | None = _setting(
        None, "Half-life of the activity that keeps faded words out of the anchors (None: half_life / 8).")
    half_life_unit: str = _setting("documents", f"The unit of half_life: one of {HALF_LIFE_UNITS}.")
    max_time_skew: float | None = _setting(
        DEFAULT_MAX_SKEW, "A document dated more seconds than this after the stream clock counts as dated this far "
        "after it (None: no bound).")
    history_size: int = _setting(512, "Records kept by the topic history.")
    min_prevalence: float = _setting(0.0, "Prevalence floor of a significant topic (0: every topic counts).")
    refine_iterations: int = _setting(30, "Most seeded-refinement iterations per refresh (0: off).")
    reservoir_size: int | str = _setting(
        "auto",
        "Documents kept for refinement ('auto': 1,600,000 / n_topics, between 16,000 and 50,000, at most the window).")
    refine_smoothing: float = _setting(0.01, "Pseudo-count per word and topic in the refinement's M-step.")
    refine_sweeps: int = _setting(5, "CVB0 sweeps after KL-tEM in each refinement (0: KL-tEM alone).")
    refine_carry: bool = _setting(
        True, "Once the burn-in is over (with half_life: once the reservoir is full), keep the refinement's CVB0 state from "
        "one refresh to the next; the first full reservoir restarts from the anchor seed, and a restart challenges it "
        "whenever the documents seen grew by a quarter (CPU refinement, refine_sweeps > 0).")
    refine_fill_restarts: bool = _setting(
        True, "With refine_carry, while the reservoir fills a restart from the anchor seed challenges the carried "
        "refinement (at the refresh after the burn-in, then whenever the documents seen grew by a quarter) and replaces "
        "it where it fits the reservoir better. False puts topic ids first: the burn-in's last refinement is carried "
        "through the fill unchallenged (restarted only for emerging subjects), at some cost in quality there; from the "
        "first full reservoir on both are the same.")
    refine_device: str = _setting(
        "cpu", f"Where the refinement runs: one of {REFINE_DEVICES} ('auto': a CUDA device where numba finds one).")
    max_vocabulary: int | None = _setting(None, "Open vocabulary: at most this many words (None: fixed).")
    admit_df: int = _setting(20, "Documents an unknown word must occur in to join an open vocabulary.")
    vocabulary_sketch_size: int = _setting(1000, "Counters of the open vocabulary's sketch of unknown words.")
    retire_df: float | None = _setting(
        None, "Decayed document frequency below which a word may be retired (None: admit_df / 4).")
    window: int | None = _setting(None, "Sliding window: the sums cover only the last this many documents.")
    background_topic: bool = _setting(True, "Recover a background distribution next to the K topics.")
    max_df: float | None = _setting(None, "Words in more than this fraction of the documents are background only.")
    death_grace: int = _setting(2, "Refreshes a topic may stay absent before its death is announced.")
    birth_grace: int = _setting(
        1, "Refreshes a new topic must last, holding still (moving less than change_threshold), before its birth "
        "is announced.")
    cooccurrence: str = _setting(
        "auto", f"Co-occurrence statistics: one of {STATISTICS} ('auto': exact up to {SKETCH_ABOVE_WORDS:,} words, "
        "then a sketch whose memory is linear in V).")
    sketch_size: int | None = _setting(None, "Columns s of the sketch (None: max(200, 4 n_topics)).")
    sketch_rank: int | None = _setting(None, "Rank the sketch's low-rank view keeps (None: max(n_topics + 20, s / 4)).")
    burn_in: int = _setting(
        4, "Refreshes after the first that events may wait for a young stream's topics to settle (0: none).")

    def __post_init__(self):
        if self.n_topics < 1:
            raise ValueError("n_topics must be at least 1")
        if not (self.max_anchor_candidates in ("auto", None) or
                (isinstance(self.max_anchor_candidates, int) and self.max_anchor_candidates >= 1)):
            raise ValueError("max_anchor_candidates is 'auto', None (no cap) or a positive number of words")
        if self.anchor_method not in ANCHOR_METHODS:
            raise ValueError(f"unknown anchor_method {self.anchor_method!r}; use one of {ANCHOR_METHODS}")
        if self.window is not None and self.half_life is not None:
            raise ValueError("a sliding window excludes half_life: the window already forgets")
        if self.half_life_unit not in HALF_LIFE_UNITS:
            raise ValueError(f"half_life_unit must be one of {HALF_LIFE_UNITS}")
        if self.max_df is not None and not (0.0 < float(self.max_df) <= 1.0):
            raise ValueError("max_df is a fraction of the documents, in (0, 1]")
        if self.max_df is not None and not self.background_topic:
            raise ValueError("max_df needs background_topic=True: the ceiling's words go to the background")
        if self.death_grace < 0:
            raise ValueError("death_grace is a number of refreshes, at least 0")
        if self.birth_grace < 0:
            raise ValueError("birth_grace is a number of refreshes, at least 0")
        if self.burn_in < 0:
            raise ValueError("burn_in is a number of refreshes, at least 0")
        if int(self.refine_sweeps) < 0:
            raise ValueError("refine_sweeps is a number of CVB0 sweeps, at least 0")
        if self.refine_device not in REFINE_DEVICES:
            raise ValueError(f"refine_device must be one of {REFINE_DEVICES}")
        if self.refine_device == "cuda" and self.n_topics + 1 > DEVICE_MAX_COLUMNS:
            raise ValueError(f"refine_device='cuda' refines at most {DEVICE_MAX_COLUMNS - 1} topics")
        if int(self.anchor_rectification) < 0:
            raise ValueError("anchor_rectification is a number of projection steps, at least 0")
        if self.reservoir_size != "auto":
            try:  # a number, or a number written as text (as the other numeric settings take it)
                size = 0 if isinstance(self.reservoir_size, bool) else int(self.reservoir_size)
            except (TypeError, ValueError):
                size = 0
            if size < 1:
                raise ValueError("reservoir_size is 'auto' or a positive number of documents")
            self.reservoir_size = size
        for name in ("n_topics", "admit_df", "vocabulary_sketch_size", "history_size", "refine_iterations",
                     "refine_sweeps", "death_grace", "birth_grace", "burn_in", "vocabulary_size", "anchor_rectification",
                     "warmup_documents", "batch_size", "max_text_chars", "seed"):
            setattr(self, name, int(getattr(self, name)))
        if self.cooccurrence not in STATISTICS:
            raise ValueError(f"cooccurrence must be one of {STATISTICS}")
        for name in ("window", "n_projections", "sketch_size", "sketch_rank"):
            setattr(self, name, None if getattr(self, name) is None else int(getattr(self, name)))
        for name in ("refresh_in_background", "background_topic", "refine_carry", "refine_fill_restarts"):
            setattr(self, name, bool(getattr(self, name)))
        self.min_prevalence = float(self.min_prevalence)
        self.rp_min_support = float(self.rp_min_support)
        self.refine_smoothing = float(self.refine_smoothing)
        if self.refine_smoothing < 0:
            raise ValueError("refine_smoothing is a pseudo-count, at least 0")
        if self.anchor_stickiness is not None:
            self.anchor_stickiness = float(self.anchor_stickiness)
            if self.anchor_stickiness < 0:
                raise ValueError("anchor_stickiness is a relative margin, at least 0 (or None)")
        if self.sketch_size is not None and self.sketch_size < 2:
            raise ValueError("sketch_size is a number of columns, at least 2")
        if self.sketch_rank is not None and self.sketch_rank < 1:
            raise ValueError("sketch_rank is at least 1")
        for name in ("refresh_every_stream_seconds", "refresh_every_wall_seconds", "max_time_skew"):
            value = getattr(self, name)
            if value is not None and not float(value) > 0:
                raise ValueError(f"{name} is a positive number of seconds (or None)")
            setattr(self, name, None if value is None else float(value))
        self.max_df = None if self.max_df is None else float(self.max_df)
        self.half_life = None if self.half_life is None else float(self.half_life)
        self.activity_half_life = (None if self.half_life is None
                                   else float(self.activity_half_life or self.half_life / 8))

    def to_dict(self) -> dict:
        """``{name: value}`` of every setting (JSON-serialisable; what a state file stores)."""
        return dataclasses.asdict(self)

    @property
    def recovers_background(self) -> bool:
        """Whether refreshes recover a background column (RecoverKL recovers the topics alone)."""
        return self.background_topic and self.recovery == "l2"

    def cooccurrence_kind(self, n_words: int) -> str:
        """``"exact"`` or ``"sketch"`` for a vocabulary of ``n_words`` (an open vocabulary: the
        most it may grow to)."""
        if self.cooccurrence != "auto":
            return self.cooccurrence
        largest = max(int(n_words), self.max_vocabulary or 0)
        return "sketch" if largest > SKETCH_ABOVE_WORDS else "exact"

    def resolved_sketch_size(self) -> int:
        from .statistics.sketch import default_sketch_size

        return self.sketch_size or default_sketch_size(self.n_topics)

    def resolved_sketch_rank(self) -> int:
        from .statistics.sketch import default_sketch_rank

        size = self.resolved_sketch_size()
        return min(size, self.sketch_rank) if self.sketch_rank else default_sketch_rank(self.n_topics, size)

    def resolved_reservoir_size(self) -> int:
        """The refinement reservoir's capacity in documents (``reservoir_size``); "auto" with a
        sliding window holds at most the window's documents, which are all the sums describe."""
        if self.reservoir_size == "auto":
            size = default_reservoir_size(self.n_topics)
            return size if self.window is None else min(size, self.window)
        return self.reservoir_size

    def candidate_limit(self) -> int | None:
        """The cap on candidate anchors in force (``max_anchor_candidates``)."""
        from .refresh.anchors import default_max_candidates

        if self.max_anchor_candidates == "auto":
            return default_max_candidates(self.n_topics)
        return self.max_anchor_candidates

    def min_document_frequency(self, n_docs: float) -> int:
        """The candidate-anchor threshold for ``n_docs`` documents (``anchor_min_df``)."""
        from .refresh.anchors import default_min_document_frequency

        if self.anchor_min_df == "auto":
            return default_min_document_frequency(n_docs)
        return int(self.anchor_min_df)


_FIELDS = {f.name: f for f in dataclasses.fields(ModelConfig)}

#: Settings renamed since, still accepted: ``refresh_every_seconds`` counted the clock that
#: ``refresh_clock`` named; each clock is now a setting of its own.
RENAMED = {"refresh_every_seconds": "refresh_every_stream_seconds or refresh_every_wall_seconds",
           "refresh_clock": "refresh_every_stream_seconds or refresh_every_wall_seconds"}


def current_spelling(settings: dict, warn: bool = True) -> dict:
    """``settings`` with the old spellings (:data:`RENAMED`) turned into today's; with ``warn``,
    one FutureWarning line per old name (a state file written before the rename loads silently)."""
    if not RENAMED.keys() & settings.keys():
        return settings
    settings = dict(settings)
    seconds, clock = settings.pop("refresh_every_seconds", None), settings.pop("refresh_clock", "stream")
    if warn:
        import warnings

        warnings.warn("refresh_every_seconds and refresh_clock are deprecated; use refresh_every_stream_seconds "
                      "or refresh_every_wall_seconds", FutureWarning, stacklevel=3)
    if clock not in ("stream", "wall"):
        raise ValueError(f"unknown refresh_clock {clock!r}; use refresh_every_stream_seconds or "
                         "refresh_every_wall_seconds")
    if seconds is not None:
        settings.setdefault(f"refresh_every_{clock}_seconds", seconds)
    return settings


def default(name: str):
    """The default of setting ``name``."""
    return _FIELDS[name].default


def doc(name: str) -> str:
    """The one-line doc of setting ``name``."""
    return _FIELDS[name].metadata["doc"]
