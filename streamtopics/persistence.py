"""Saving and loading a whole StreamingTopicModel: one checksummed state file (:mod:`~streamtopics.state`).

The file holds the configuration (:meth:`~streamtopics.config.ModelConfig.to_dict`), the
tokenizer, the ingest side (vocabulary, sums, tracker, activity, window, reservoir, warm-up
documents, counters, open vocabulary, text excerpts) and the refresh lineage (snapshot, warm-start
coefficients, next topic id, significant topics, topics within their birth or death grace, departed topics,
the burn-in, the last labels), so a loaded model continues exactly where
the saved one stopped.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from .alignment import MissingTopic
from .cooccurrence import CooccurrenceStats
from .describe import DocumentExcerpts
from .forgetting import DecayedCounter
from .history import TopicHistory
from .open_vocabulary import OpenVocabulary
from .sketch import SketchedCooccurrence
from .snapshot import TopicSnapshot
from .state import CorruptStateError, read_state, write_state
from .text import Tokenizer
from .trackers import RandomProjectionTracker
from .vocabulary import Vocabulary
from .window import DocumentWindow


def save_model(model, path) -> Path:
    """Write ``model``'s whole state atomically to ``path`` (see the module docstring)."""
    model.wait_for_refresh()
    ingest, lineage = model.ingest, model.lineage
    if ingest.vocabulary is not None:
        ingest.flush()
    arrays: dict[str, np.ndarray] = {}
    if ingest.stats is not None:
        arrays.update({f"stats.{k}": v for k, v in ingest.stats.state_dict().items()})
    for name, part in (("tracker", ingest.tracker), ("activity", ingest.activity), ("window", ingest.window)):
        if part is not None:
            arrays.update({f"{name}.{k}": np.asarray(v) for k, v in part.state_dict().items()})
    if ingest.reservoir is not None and len(ingest.reservoir):
        items = ingest.reservoir.items()
        kept = ingest.reservoir.batch()
        arrays.update({"reservoir.indptr": kept.indptr, "reservoir.indices": kept.indices,
                       "reservoir.counts": kept.counts,
                       "reservoir.keys": np.array([k for _, _, k in items], np.uint64)})
    snapshot = lineage.snapshot
    if lineage.coefficients is not None:
        arrays["coefficients"] = lineage.coefficients
    if snapshot is not None:
        arrays["snapshot.topic_word"] = snapshot.topic_word
        if snapshot.background is not None:
            arrays["snapshot.background"] = snapshot.background
    for topic, missing in lineage.missing.items():
        arrays[f"missing.{topic}"] = missing.column
    for topic, departed in lineage.departed.items():
        arrays[f"departed.{topic}"] = departed.column
    meta = {
        "config": model.config.to_dict(),
        "tokenizer": ingest.tokenizer.get_config(),
        "vocabulary": None if ingest.vocabulary is None else ingest.vocabulary.words,
        "warmup": [[counts, _jsonable_key(key), stream_time, text] for counts, key, stream_time, text in ingest.warmup],
        "excerpts": None if ingest.excerpts is None else [[h, key, text] for h, key, text in ingest.excerpts.items()],
        "rejections": dict(ingest.rejections),
        "oov_tokens": ingest.oov_tokens,
        "documents_truncated": ingest.documents_truncated,
        "next_topic_id": lineage.next_topic_id,
        "absorbed_at_refresh": lineage.absorbed_at_refresh,
        "snapshot": None if snapshot is None else _snapshot_meta(snapshot),
        "history": model.history.to_dict(),
        "significant": sorted(lineage.significant),
        "missing": [[t, m.anchor, m.words, m.refreshes] for t, m in lineage.missing.items()],
        "departed": [[t, m.anchor, m.words, m.refreshes] for t, m in lineage.departed.items()],
        "unannounced": [[t, n] for t, n in lineage.unannounced.items()],
        "burn_in_left": lineage.burn_in_left,
        "labels": [[t, label] for t, label in lineage.labels.items()],
        "open_vocabulary": None if ingest.open_vocabulary is None else ingest.open_vocabulary.to_dict(),
        "replaced_slots": sorted(ingest.replaced_slots),
        "admitted_at": [[i, t] for i, t in sorted(ingest.admitted_at.items())],
        "snapshot_vocabulary": (None if snapshot is None or not ingest.replaced_slots
                                else list(snapshot.vocabulary)),
        "stream_time": ingest.stream_time,
    }
    return write_state(path, arrays, meta)


def load_model(cls, path, on_reject=None):
    """A ``cls`` (a :class:`~streamtopics.model.StreamingTopicModel`) restored from ``path``;
    raises :class:`~streamtopics.state.CorruptStateError` if the file is damaged, also when
    the checksums hold but the parts do not fit together (a file written by another version, or
    damage the checksums cannot see): whatever rebuilding the model raises means the same."""
    arrays, meta = read_state(path)
    try:
        return _rebuild(cls, path, arrays, meta, on_reject)
    except CorruptStateError:
        raise
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - any inconsistency is damage to the caller
        raise CorruptStateError(f"{path}: inconsistent state ({type(error).__name__}: {error})") from error


def _rebuild(cls, path, arrays: dict, meta: dict, on_reject):
    model = cls(**meta["config"], tokenizer=Tokenizer.from_config(meta["tokenizer"]), on_reject=on_reject)
    ingest, lineage = model.ingest, model.lineage

    def part(name: str) -> dict:
        return {k[len(name) + 1:]: v for k, v in arrays.items() if k.startswith(name + ".")}

    if meta["vocabulary"] is not None:
        ingest.vocabulary = Vocabulary(meta["vocabulary"])
        kind = SketchedCooccurrence if "stats.kind" in arrays else CooccurrenceStats  # exact files have no kind
        ingest.stats = kind.from_state_dict(part("stats"))
        if model.config.anchor_method != "fastanchors":
            if not part("tracker"):
                raise CorruptStateError(f"{path}: no tracker saved for anchor_method {model.config.anchor_method!r}")
            ingest.tracker = RandomProjectionTracker.from_state_dict(part("tracker"))
        if part("activity"):
            ingest.activity = DecayedCounter.from_state_dict(part("activity"))
        if part("window"):
            ingest.window = DocumentWindow.from_state_dict(part("window"))
    ingest.warmup = [(entry[0], _restore_key(entry[1]), entry[2] if len(entry) > 2 else None,
                      entry[3] if len(entry) > 3 else None) for entry in meta["warmup"]]
    if ingest.excerpts is not None and meta.get("excerpts"):
        ingest.excerpts = DocumentExcerpts.from_items(ingest.excerpts.capacity, ingest.excerpts.kind, meta["excerpts"])
    ingest.rejections = Counter(meta["rejections"])
    ingest.oov_tokens = meta["oov_tokens"]
    ingest.documents_truncated = meta["documents_truncated"]
    lineage.next_topic_id = meta["next_topic_id"]
    lineage.absorbed_at_refresh = meta["absorbed_at_refresh"]
    lineage.coefficients = arrays.get("coefficients")
    if ingest.reservoir is not None and "reservoir.indptr" in arrays:
        indptr = arrays["reservoir.indptr"]
        for d, (a, b) in enumerate(zip(indptr[:-1], indptr[1:])):
            ingest.reservoir.add(arrays["reservoir.indices"][a:b], arrays["reservoir.counts"][a:b],
                                 int(arrays["reservoir.keys"][d]))
    if "history" in meta:
        model.history = TopicHistory.from_dict(meta["history"])
    ingest.stream_time = meta.get("stream_time")
    lineage.significant = set(meta.get("significant", []))
    lineage.missing = {int(t): MissingTopic(arrays[f"missing.{t}"], anchor, list(words), int(refreshes))
                       for t, anchor, words, refreshes in meta.get("missing", [])}
    lineage.departed = {int(t): MissingTopic(arrays[f"departed.{t}"], anchor, list(words), int(refreshes))
                        for t, anchor, words, refreshes in meta.get("departed", [])}
    lineage.unannounced = {int(t): int(n) for t, n in meta.get("unannounced", [])}
    lineage.burn_in_left = meta.get("burn_in_left")
    lineage.labels = {int(t): label for t, label in meta.get("labels", [])}
    ingest.replaced_slots = set(meta.get("replaced_slots", []))
    ingest.admitted_at = {int(i): float(t) for i, t in meta.get("admitted_at", [])}
    if meta.get("open_vocabulary") is not None:
        ingest.open_vocabulary = OpenVocabulary.from_dict(meta["open_vocabulary"])
    if meta["snapshot"] is not None:
        n_rows = arrays["snapshot.topic_word"].shape[0]
        vocabulary = meta.get("snapshot_vocabulary") or ingest.vocabulary.words[:n_rows]
        snapshot = TopicSnapshot(**meta["snapshot"], vocabulary=vocabulary, topic_word=arrays["snapshot.topic_word"],
                                 background=arrays.get("snapshot.background"))
        snapshot.prevalence = np.asarray(snapshot.prevalence)
        snapshot.alpha = np.asarray(snapshot.alpha)
        lineage.snapshot = snapshot
    return model


def _snapshot_meta(snapshot: TopicSnapshot) -> dict:
    return {
        "version": snapshot.version, "documents_seen": snapshot.documents_seen,
        "anchors": snapshot.anchors, "topic_ids": snapshot.topic_ids,
        "prevalence": snapshot.prevalence.tolist(), "alpha": snapshot.alpha.tolist(),
        "events": snapshot.events, "position": snapshot.position, "stream_time": snapshot.stream_time,
        "background_share": snapshot.background_share, "labels": snapshot.labels,
        "coherence": None if snapshot.coherence is None else snapshot.coherence.tolist(),
        "representatives": snapshot.representatives,
    }


def _jsonable_key(key):
    if isinstance(key, (bytes, bytearray)):
        return {"bytes": bytes(key).hex()}
    return key


def _restore_key(key):
    if isinstance(key, dict):
        return bytes.fromhex(key["bytes"])
    return key
