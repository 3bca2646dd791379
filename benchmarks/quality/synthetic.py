"""Matched L1 on Gibbs-truth semi-synthetic streams, per system and checkpoint.

Online systems (our variants, gensim, scikit-learn) learn the stream once and are read at every
checkpoint; tomotopy's batch Gibbs, a multi-pass reference, is fitted once on the first
``batch_at`` documents (when the stream reaches them).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtopics.evaluation import matched_l1

from . import streams, truths
from .systems import build, measure, one_pass, warm_up


@dataclass(frozen=True)
class Setting:
    corpus: str
    n_topics: int
    alpha: float
    checkpoints: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.corpus} K={self.n_topics} alpha={self.alpha}"


def run(setting: Setting, systems: list[str], variants: dict, cache, truth_iterations: int,
        batch_at: int = 100_000, tomotopy_iterations: int = 100, report=None) -> list[dict]:
    """One record per system: L1 per checkpoint, times, or the traceback of a failure.
    ``report(records)`` is called after each system (results written as they come)."""
    truth = truths.load(setting.corpus, setting.n_topics, truth_iterations, cache=cache)
    batch_at = min(batch_at, max(setting.checkpoints))  # a stream shorter than batch_at: tomotopy on all of it
    stream = streams.draw(truth, max(setting.checkpoints), setting.alpha)
    warm_up(truth.vocabulary, stream)

    def record_for(system):
        if system == "tomotopy" and batch_at > max(setting.checkpoints):
            return None
        return {"setting": setting.key, "system": system, "truth": truth.note, "l1": {}}

    def work(system, record):
        checkpoints = (batch_at,) if system == "tomotopy" else setting.checkpoints
        model = build(system, setting.n_topics, truth.vocabulary, stream.shape[0], variants, tomotopy_iterations)
        record.update(one_pass(model, stream, checkpoints,
                               lambda seen, m: record["l1"].__setitem__(seen, matched_l1(truth.topic_word, m.topic_word()))))

    return measure(systems, record_for, work, report)
