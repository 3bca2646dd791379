"""What a refresh says about its topics from the documents the model keeps: their shares, their
coherence and their representative documents.

All are computed at refresh time over the refinement reservoir (a bounded sample of the stream,
:class:`~streamtopics.refresh.reservoir.Reservoir`: a uniform one of every document seen, or the most recent
ones when the model forgets) and never on the ingest path: ingest computes no topic mixtures (the
drift monitor aside, which is off by default), and inferring every document's mixture there would
cost more than the co-occurrence update itself. The refresh already holds the reservoir; one
inference pass over a pool of ``POOL`` of its documents (``MIXTURE_UPDATES`` multiplicative
updates each) gives both the shares and the representatives.

* :func:`topic_shares`: each topic's mean weight in the pool's mixtures, published as its
  prevalence. ``POOL`` sets its sampling error: 20 Newsgroups, K = 20 and 50, a pool of 4,613 of
  13,838 kept posts gave shares a median 2.5 % (at most 16 %, a small topic) from the mean over all
  of them, and 5-6.5 % from the mean mixture of the stream's next 5,000 posts (the recovery's
  share of the tokens, published before: 40 % and 41 %).
* :func:`topic_coherence`: NPMI of each topic's 10 most probable words
  (:func:`~streamtopics.evaluation.coherence_npmi`) with the reservoir as reference corpus.
* :func:`representative_documents`: per topic the ``per_topic`` documents of largest mixture
  weight on it in the pool, with their words and, where the model saw text, the document's key and
  the beginning of its text from :class:`DocumentExcerpts`.
* :class:`DocumentExcerpts`: the key and first ``EXCERPT_CHARS`` characters of the documents the
  reservoir keeps. Same capacity and same rule as the reservoir (the smallest key hashes, or the
  most recent documents), so its documents are the reservoir's: at most ``reservoir_size``
  excerpts (about 8 MB at the default 16,000). Ingest pays one comparison per document, and a
  heap push and a string slice for the documents it keeps; a batch of raw text compares all its
  key hashes with :meth:`DocumentExcerpts.bound` at once.
"""

from __future__ import annotations

import heapq

import numpy as np
import scipy.sparse as sp

from ..text.documents import DocumentBatch
from ..evaluation import coherence_npmi
from ..inference import infer_mixtures
from ..snapshot import mixture_components, topic_part
from .emerging import recent_documents

EXCERPT_CHARS = 200  # characters of a document's text kept to show it
COHERENCE_WORDS = 10  # top words whose pairs the NPMI averages
REPRESENTATIVES = 3  # documents shown per topic
DOCUMENT_WORDS = 10  # words shown of a representative document (its most frequent)
MIXTURE_UPDATES = 20  # multiplicative updates per document: enough to rank them (a topic's best documents are mostly
# it), and their mean is that of 200 float64 updates to within 1.3 % (20 Newsgroups, K = 20 and 50)
POOL = 5000  # kept documents (evenly spaced over the reservoir) whose mixtures give the shares and representatives
EDGE = 1 / 8  # older_share / newer_share: the oldest (newest) part of the pool a subject must be in to be an old (a
# living) one (a forgetting model's pool spans 8 half-lives: a subject that came in the last 7 is new to it)
RECENT_POOL = 2000  # recent_shares: at most this many recent documents inferred (about 0.02 s at K = 100)
HALF_LIVES_POOLED = 8  # a forgetting model pools its newest documents back this many half-lives (older: < 0.4 %)
SINGLE = True  # those updates in float32 (infer_mixtures(single=True)): half the time; the weights shown are rounded
# to 4 decimals, and the representatives of the V = 15,000, K = 100 warm refresh were those of float64 (`git show
# 8e056d1:BENCHMARKS.md`, "A faster warm refresh")


def excerpt_of(document) -> str | None:
    """The beginning of a document's text, whitespace collapsed (None for a document given as
    tokens or counts: there is no text to show)."""
    if isinstance(document, (bytes, bytearray, memoryview)):
        document = bytes(document[: 4 * EXCERPT_CHARS]).decode("utf-8", "replace")
    if not isinstance(document, str):
        return None
    return " ".join(document[: 2 * EXCERPT_CHARS].split())[:EXCERPT_CHARS].rstrip()  # idempotent


def _shown_key(key):
    if key is None or isinstance(key, (int, str)):
        return key
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).decode("utf-8", "replace")
    return str(key)


class DocumentExcerpts:
    """Key and text excerpt of the documents a :class:`~streamtopics.refresh.reservoir.Reservoir` of the
    same ``capacity`` and ``kind`` keeps, by key hash (see the module docstring).

    >>> excerpts = DocumentExcerpts(capacity=2, kind="uniform")
    >>> for key_hash, text in [(30, "third"), (10, "first"), (20, "second")]:
    ...     excerpts.add(key_hash, f"doc-{key_hash}", text)
    >>> sorted(excerpts.items())
    [(10, 'doc-10', 'first'), (20, 'doc-20', 'second')]
    """

    def __init__(self, capacity: int, kind: str = "recent"):
        if kind not in ("recent", "uniform"):
            raise ValueError("excerpts follow a 'recent' or 'uniform' reservoir")
        self.capacity = int(capacity)
        self.kind = kind
        self.kept: dict[int, tuple] = {}  # key hash -> (key, beginning of the text, its excerpt once made); recent: oldest first
        self.largest: list[int] = []  # uniform: negated kept hashes, largest kept hash on top

    def __len__(self) -> int:
        return len(self.kept)

    def add(self, key_hash: int, key, document) -> None:
        """Offer a document (raw text, bytes or any other form; only text is kept). Kept as given
        (a prefix of it): the excerpt is made when it is first read and kept, so ingest only
        slices and a checkpoint makes only the new documents' excerpts."""
        if self.kind == "recent":
            self.kept.pop(key_hash, None)
        elif key_hash in self.kept or (len(self.kept) >= self.capacity and key_hash >= -self.largest[0]):
            return
        if isinstance(document, str):
            prefix = document[: 2 * EXCERPT_CHARS]
        elif isinstance(document, (bytes, bytearray, memoryview)):
            prefix = bytes(document[: 4 * EXCERPT_CHARS])
        else:
            return
        self.kept[key_hash] = (key, prefix, None)
        if self.kind == "recent":
            if len(self.kept) > self.capacity:
                del self.kept[next(iter(self.kept))]
            return
        heapq.heappush(self.largest, -key_hash)
        if len(self.kept) > self.capacity:
            del self.kept[-heapq.heappop(self.largest)]

    def bound(self) -> int | None:
        """Uniform and full: the largest kept key hash (a document with this hash or a larger one
        is not kept); None when any document may be kept (not full, or recent)."""
        if self.kind == "uniform" and len(self.kept) >= self.capacity:
            return -self.largest[0]
        return None

    def get(self, key_hash: int) -> tuple | None:
        """``(key, excerpt)`` of a kept document, or None."""
        key_hash = int(key_hash)
        kept = self.kept.get(key_hash)
        return None if kept is None else (_shown_key(kept[0]), self._excerpt(key_hash, kept))

    def items(self) -> list[tuple]:
        """``(key_hash, key, excerpt)`` of every kept document (recent: oldest first)."""
        return [(h, _shown_key(kept[0]), self._excerpt(h, kept)) for h, kept in self.kept.items()]

    def _excerpt(self, key_hash: int, kept: tuple) -> str:
        """The excerpt of a kept document, made from its prefix the first time (the prefix is then dropped)."""
        key, prefix, excerpt = kept
        if excerpt is None:
            excerpt = excerpt_of(prefix)
            self.kept[key_hash] = (key, None, excerpt)
        return excerpt

    def merge(self, other: "DocumentExcerpts") -> "DocumentExcerpts":
        """Add another sub-stream's excerpts (as :meth:`Reservoir.merge` adds its documents)."""
        for key_hash, key, text in other.items():
            self.add(key_hash, key, text)
        return self

    @classmethod
    def from_items(cls, capacity: int, kind: str, items) -> "DocumentExcerpts":
        excerpts = cls(capacity, kind)
        for key_hash, key, text in items:
            excerpts.add(int(key_hash), key, text)
        return excerpts

    def to_state(self, reservoir_keys) -> list | dict:
        """What a state file keeps (JSON): when the excerpts are of the very documents the
        reservoir keeps (``reservoir_keys``, its key hashes in its order; the usual case), their
        keys and texts in that order, as ``{"in_reservoir_order": [[key, text], ...]}``, for the
        hashes are in the reservoir's array already (Reuters-21578: 0.31 of the metadata's 1.77 MB
        compressed); otherwise ``[key_hash, key, text]`` of each (recent: oldest first). Read in
        place: 18,763 excerpts (20 Newsgroups) in 0.007 s, where building every item and a dict
        by hash first took 0.05 s of a save."""
        kept = self.kept
        for key_hash in [key_hash for key_hash, (_, _, excerpt) in kept.items() if excerpt is None]:
            self._excerpt(key_hash, kept[key_hash])
        hashes = np.asarray(reservoir_keys, np.uint64).tolist()
        same = list(kept) == hashes if self.kind == "recent" else (
            len(hashes) == len(kept) and kept.keys() == set(hashes))
        if same:
            return {"in_reservoir_order": [[_shown_key(kept[key_hash][0]), kept[key_hash][2]] for key_hash in hashes]}
        return [[key_hash, key, text] for key_hash, key, text in self.items()]

    @classmethod
    def from_state(cls, capacity: int, kind: str, state: list | dict, reservoir_keys) -> "DocumentExcerpts":
        """The excerpts :meth:`to_state` wrote, with the reservoir's key hashes it was given."""
        if isinstance(state, dict):
            state = [(key_hash, key, text) for key_hash, (key, text) in zip(reservoir_keys, state["in_reservoir_order"])]
        return cls.from_items(capacity, kind, state)


def _known(batch: DocumentBatch, n_words: int) -> DocumentBatch:
    """The batch without the words the snapshot has no row for (admitted after it)."""
    if not batch.indices.size or batch.indices.max() < n_words:
        return batch
    return batch.keep_entries(batch.indices < n_words)


def topic_coherence(snapshot, batch: DocumentBatch) -> np.ndarray:
    """NPMI of each topic's ``COHERENCE_WORDS`` most probable words over ``batch`` (K, in
    column order; in [-1, 1], higher is more coherent)."""
    n_words = snapshot.topic_word.shape[0]
    batch = _known(batch, n_words)
    reference = sp.csr_matrix((batch.counts, batch.indices, batch.indptr), shape=(len(batch), n_words))
    npmi = coherence_npmi(snapshot.topic_word, reference, min(COHERENCE_WORDS, n_words))
    return np.nan_to_num(npmi, nan=0.0)


def document_pool(batch: DocumentBatch, n_words: int, pool: int = POOL,
                  half_life: float | None = None) -> tuple[DocumentBatch, np.ndarray | None]:
    """Up to ``pool`` documents of ``batch`` evenly spaced over it (all when it holds no more),
    without the words past the first ``n_words`` (admitted after the topics were recovered), and
    their weights in the shares: None (equal) for a uniform sample of the stream. A forgetting
    model's reservoir holds its newest documents, oldest first; with its ``half_life`` in
    documents only the newest ``HALF_LIVES_POOLED`` half-lives are pooled, and a document's weight
    halves with every ``half_life`` documents after it, as its weight in the sums does."""
    rows = pooled_rows(len(batch), pool, half_life)
    weights = None if half_life is None else 0.5 ** ((len(batch) - 1 - rows) / half_life)
    return _known(batch.select(rows), n_words), weights


def pooled_rows(n_documents: int, pool: int = POOL, half_life: float | None = None) -> np.ndarray:
    """The positions in the reservoir's batch of :func:`document_pool`'s documents."""
    rows = np.arange(n_documents)
    if half_life is not None:
        rows = rows[max(0, n_documents - int(np.ceil(HALF_LIVES_POOLED * half_life))):]
    if rows.size > pool:
        rows = rows[::-(-rows.size // pool)]
    return rows


def older_share(mixtures: np.ndarray, stamps: np.ndarray, part: float = EDGE) -> np.ndarray | None:
    """Each topic's mean weight in the oldest ``part`` of the pooled documents (by their
    reservoir stamps, :meth:`~streamtopics.refresh.reservoir.Reservoir.stamped_batch`; ties in pool
    order) over its mean weight in the newer half: about 1 for a subject present from the start
    of what the reservoir remembers, near 0 for one that came since. NaN for a topic with no
    weight in the newer half; None when the stamps cannot tell older from newer (all alike: a
    young stream, or a state written before stamps)."""
    return _edge_over_half(mixtures, stamps, part, newest=False)


def newer_share(mixtures: np.ndarray, stamps: np.ndarray, part: float = EDGE) -> np.ndarray | None:
    """Each topic's mean weight in the newest ``part`` of the pooled documents over its mean
    weight in the older half: about 1 for a subject still as present lately, near 0 for one that
    stopped (see :func:`older_share`)."""
    return _edge_over_half(mixtures, stamps, part, newest=True)


def recent_shares(topics, reservoir: DocumentBatch, stamps: np.ndarray, n_words: int, mixtures: np.ndarray,
                  pool_stamps: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each topic's mean weight in the ``reservoir``'s recent documents (those since the last
    refresh, or since earlier ones until there are ``MIN_RECENT``:
    :func:`~streamtopics.refresh.emerging.recent_documents`; ``RECENT_POOL`` of them, evenly
    spaced, inferred over ``topics``' first ``n_words`` words) over its mean weight in the pooled
    documents older than them (``mixtures`` and ``pool_stamps``: the share step's), and the
    weight the recent documents would hold at that older weight: how many documents' worth the
    ratio had to see. The window is the last refresh's, however long the stream (the pool's newest
    eighth is an eighth of the stream so far). None when the stamps cannot tell."""
    recent = recent_documents(stamps)
    if recent is None:
        return None
    older = np.asarray(pool_stamps) < np.asarray(stamps)[recent].min()
    if not older.any():
        return None
    rows = np.flatnonzero(recent)
    rows = rows[::-(-rows.size // RECENT_POOL)]
    before = mixtures[older].mean(axis=0)
    lately = pool_mixtures(topics, _known(reservoir.select(rows), n_words)).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(before > 0, lately / np.where(before > 0, before, 1.0), np.nan), before * rows.size


def gone_topic_lately(topics, pool: DocumentBatch, stamps: np.ndarray,
                      column: np.ndarray) -> tuple[float, float] | tuple[None, None]:
    """A topic the model no longer holds: its :func:`newer_share` and its mean weight in the newest
    ``EDGE`` of the ``pool``'s documents, their mixtures taken over the components of ``topics`` (a
    refresh's Recovery or a snapshot) and the gone topic's last ``column`` (its prior the topics'
    mean); (None, None) when the stamps cannot tell or it has no weight."""
    columns, prior = mixture_components(topics)
    extra = np.zeros(columns.shape[0])
    extra[: min(column.size, extra.size)] = column[: extra.size]
    if extra.sum() <= 0:
        return None, None
    n_topics = np.shape(topics.topic_word)[1]
    mixtures = infer_mixtures(pool, np.column_stack([columns, extra / extra.sum()]),
                              np.append(prior, prior[:n_topics].mean()), max_iter=MIXTURE_UPDATES, single=SINGLE)
    share = newer_share(mixtures, stamps)
    if share is None or np.isnan(share[-1]):
        return None, None
    newest, _ = _edge_and_half(np.asarray(stamps), EDGE, newest=True)
    return float(share[-1]), float(mixtures[newest, -1].mean())


def _edge_and_half(stamps: np.ndarray, part: float, newest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The oldest (``newest``: the newest) ``part`` of the documents by stamp (ties in pool order),
    and the other half."""
    order = np.argsort(stamps, kind="stable")
    if newest:
        order = order[::-1]
    return order[: max(1, int(stamps.size * part))], order[stamps.size // 2:]


def _edge_over_half(mixtures: np.ndarray, stamps: np.ndarray, part: float, newest: bool) -> np.ndarray | None:
    """Mean weights in the oldest (``newest``: the newest) ``part`` of the documents by stamp over
    those in the other half."""
    stamps = np.asarray(stamps)
    if stamps.size < 2 or stamps.min() == stamps.max():
        return None
    edge, half = _edge_and_half(stamps, part, newest)
    at_edge, other = mixtures[edge].mean(axis=0), mixtures[half].mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(other > 0, at_edge / np.where(other > 0, other, 1.0), np.nan)


def pool_mixtures(topics, pool: DocumentBatch) -> np.ndarray:
    """The topic mixtures of the ``pool``'s documents (``MIXTURE_UPDATES`` updates each), over the
    topics alone; ``topics`` is a snapshot or a refresh's Recovery
    (:func:`~streamtopics.snapshot.mixture_components`)."""
    columns, prior = mixture_components(topics)
    return topic_part(topics, infer_mixtures(pool, columns, prior, max_iter=MIXTURE_UPDATES, single=SINGLE))


def topic_shares(pool: DocumentBatch, mixtures: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | None:
    """Each topic's share of the stream: the mean (``weights``: the weighted mean) of its weight
    in the ``mixtures`` of the ``pool``'s documents that have a known word (None when none has).
    This is what a snapshot publishes as a topic's prevalence, so it is what ``transform`` says
    of such documents on average, not the recovery's share of the tokens (see the module
    docstring)."""
    known = pool.token_counts() > 0
    if not known.any():
        return None
    shares = np.average(mixtures[known], axis=0, weights=None if weights is None else weights[known])
    return shares / shares.sum()


def representative_documents(snapshot, pool: DocumentBatch, mixtures: np.ndarray,
                             excerpts: DocumentExcerpts | None = None,
                             per_topic: int = REPRESENTATIVES) -> dict[int, list[dict]]:
    """By topic id, the ``per_topic`` documents of the ``pool`` (:func:`document_pool`) with the
    largest weight on the topic in their ``mixtures`` (ties: the longer first), each ``{"key",
    "weight", "words"}`` plus ``"text"`` when ``excerpts`` holds the document's text (``"key"``
    is then its key, else None)."""
    lengths = pool.token_counts()
    vocabulary = snapshot.vocabulary
    out = {}
    for k, topic in enumerate(snapshot.topic_ids):
        order = np.lexsort((-lengths, -np.round(mixtures[:, k], 4)))[:per_topic]
        chosen = []
        for d in order.tolist():
            ids, counts = pool.indices[pool.indptr[d]:pool.indptr[d + 1]], pool.counts[pool.indptr[d]:pool.indptr[d + 1]]
            frequent = ids[np.lexsort((ids, -counts))[:DOCUMENT_WORDS]]
            seen = None if excerpts is None else excerpts.get(pool.keys[d])
            entry = {"key": None if seen is None else seen[0], "weight": round(float(mixtures[d, k]), 4),
                     "words": [vocabulary[i] for i in frequent.tolist()]}
            if seen is not None:
                entry["text"] = seen[1]
            chosen.append(entry)
        out[int(topic)] = chosen
    return out
