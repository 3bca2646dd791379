"""Saving and loading a whole StreamingTopicModel: one checksummed state file (:mod:`~streamtopics.state`).

Each part writes and reads its own state (``state_dict`` / ``load_state_dict``): the ingest
side (:class:`~streamtopics.ingest.Ingest`: vocabulary, :class:`~streamtopics.statistics.combined.Statistics`,
reservoir, warm-up documents, counters, open vocabulary, excerpts), the refresh lineage
(:class:`~streamtopics.refresh.lineage.RefreshState`: snapshot, warm start, ids, the events' memory), the
refresh schedule and the topic history. This module only composes them with the configuration and
the tokenizer, and turns anything that does not fit together into
:class:`~streamtopics.state.CorruptStateError`, so a loaded model continues exactly where the saved
one stopped. Files written before a part saved itself use the same keys and still load.
"""

from __future__ import annotations

from pathlib import Path

from .config import current_spelling
from .history import TopicHistory
from .state import CorruptStateError, StateWriter, read_state
from .text.tokenizer import Tokenizer


def save_model(model, path) -> Path:
    """Write ``model``'s whole state atomically to ``path`` (see the module docstring)."""
    model.wait_for_refresh()
    with StateWriter() as writer:
        writer.add(model.ingest.statistics_state())  # the triangle encodes on both cores while the rest is gathered
        arrays, meta = _state_without_statistics(model)
        writer.add(arrays)
        return writer.write(path, meta)


def model_state(model) -> tuple[dict, dict]:
    """``(arrays, meta)``: what :func:`save_model` writes, gathered whole."""
    model.wait_for_refresh()
    statistics = model.ingest.statistics_state()
    arrays, meta = _state_without_statistics(model)
    return statistics | arrays, meta


def _state_without_statistics(model) -> tuple[dict, dict]:
    arrays, meta = model.ingest.state_without_statistics()
    lineage_arrays, lineage_meta = model.lineage.state_dict(model.ingest.vocabulary)
    meta.update(lineage_meta, config=model.config.to_dict(), tokenizer=model.ingest.tokenizer.get_config(),
                history=model.history.to_dict(), schedule=model.schedule.state_dict())
    return arrays | lineage_arrays, meta


def load_model(cls, path, on_reject=None):
    """A ``cls`` (a :class:`~streamtopics.model.StreamingTopicModel`) restored from ``path``;
    raises :class:`~streamtopics.state.CorruptStateError` if the file is damaged, also when
    the checksums hold but the parts do not fit together (a file written by another version, or
    damage the checksums cannot see): whatever rebuilding the model raises means the same."""
    arrays, meta = read_state(path)
    try:
        return _rebuild(cls, arrays, meta, on_reject)
    except CorruptStateError:
        raise
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - any inconsistency is damage to the caller
        raise CorruptStateError(f"{path}: inconsistent state ({type(error).__name__}: {error})") from error


def _rebuild(cls, arrays: dict, meta: dict, on_reject):
    model = cls(**current_spelling(meta["config"], warn=False), tokenizer=Tokenizer.from_config(meta["tokenizer"]),
                on_reject=on_reject)
    model.ingest.load_state_dict(arrays, meta)
    model.lineage.load_state_dict(arrays, meta, model.ingest.vocabulary)
    if "history" in meta:
        model.history = TopicHistory.from_dict(meta["history"])
    model.schedule.load_state_dict(meta.get("schedule") or  # files written before the schedule saved itself
                                   {"documents_mark": meta["absorbed_at_refresh"], "stream_mark": None})
    return model
