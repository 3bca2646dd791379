"""The systems compared and one pass of a stream through them, with checkpoints.

Our model is :class:`benchmarks.peers.ours.Ours` with a variant's keyword settings; the peers
are the adapters of :mod:`benchmarks.peers` unchanged (their docstrings give their settings).
:func:`one_pass` feeds a CSR stream in chunks of ``CHUNK`` documents (cut at the checkpoints),
and at each checkpoint calls ``finish()`` (our ``refresh()``; a no-op for online peers; the Gibbs
sweeps for tomotopy) and hands the topics to a callback. ``learn_s`` is the time in ``learn``,
``finish_s`` the time in ``finish``; the callback's own time is in neither.
"""

from __future__ import annotations

import time
import traceback

from benchmarks.peers.ours import Ours
from benchmarks.peers.registry import adapter

CHUNK = 2000
PEERS = ("gensim", "sklearn", "tomotopy")


class OursVariant(Ours):
    """Our model built with ``settings`` (keyword arguments of ``StreamingTopicModel``)."""

    def __init__(self, n_topics, vocabulary, n_documents, seed=0, settings: dict | None = None):
        from streamtopics import StreamingTopicModel

        self.n_topics, self.vocabulary, self.n_documents, self.seed = n_topics, list(vocabulary), n_documents, seed
        self.model = StreamingTopicModel(n_topics, vocabulary=self.vocabulary, seed=seed, **(settings or {}))

    def with_background(self):
        """(columns, infer) of the whole mixture, background column included when there is one:
        what our model itself predicts a document's words with."""
        from streamtopics.text.documents import DocumentBatch
        from streamtopics.inference import infer_mixtures

        columns, prior = self.model.snapshot.mixture_components()
        return columns, lambda documents: infer_mixtures(DocumentBatch.from_csr(documents), columns, prior)

    def diagnostics(self) -> dict:
        """The last refresh's time and the refinement iterate it kept (0: the anchor seed)."""
        last = self.model.last_refresh
        return {"refresh_s": last.get("total_s"), "refine_kept_iteration": last.get("refinement_kept_iteration")}


def build(system: str, n_topics: int, vocabulary: list[str], n_documents: int, variants: dict,
          tomotopy_iterations: int = 100, seed: int = 0):
    """A fresh model: ``system`` is a peer name (:data:`PEERS`) or a key of ``variants``."""
    if system in variants:
        return OursVariant(n_topics, vocabulary, n_documents, seed, variants[system])
    if system == "tomotopy":
        return adapter("tomotopy")(n_topics, vocabulary, n_documents, seed, iterations=tomotopy_iterations)
    return adapter(system)(n_topics, vocabulary, n_documents, seed)


def one_pass(model, stream, checkpoints, on_checkpoint) -> dict:
    """Learn ``stream`` once up to the last checkpoint; ``on_checkpoint(seen, model)`` at each.
    A checkpoint whose ``finish()`` raises is skipped and its traceback kept (``checkpoint_errors``)."""
    checkpoints = sorted(c for c in checkpoints if c <= stream.shape[0])
    bounds = sorted(set(range(0, checkpoints[-1], CHUNK)) | set(checkpoints))
    learn_s = finish_s = 0.0
    times, failed = [], {}
    for start, stop in zip(bounds[:-1], bounds[1:]):
        t0 = time.perf_counter()
        model.learn(stream[start:stop])
        learn_s += time.perf_counter() - t0
        if stop in checkpoints:
            t0 = time.perf_counter()
            try:  # a refresh that fails early (too few candidates, say) leaves the stream going
                model.finish()
            except Exception:
                failed[stop] = traceback.format_exc()
                continue
            finally:
                finish_s += time.perf_counter() - t0
            times.append({"docs": stop, "learn_s": learn_s, "finish_s": finish_s,
                          **(model.diagnostics() if hasattr(model, "diagnostics") else {})})
            on_checkpoint(stop, model)
    return {"learn_s": learn_s, "finish_s": finish_s, "checkpoint_times": times, "checkpoint_errors": failed}


def warm_up(vocabulary: list[str], stream) -> None:
    """Fit a throwaway model of ours on 500 documents so JIT compilation is outside the timings."""
    model = OursVariant(5, vocabulary, 500, seed=1, settings={})
    model.learn(stream[:500])
    model.finish()


def describe_peer(system: str) -> str:
    return adapter(system).name


def measure(systems, record_for, work, report=None) -> list[dict]:
    """``record_for(system)`` (None: skip the system), then ``work(system, record)`` fills it in;
    a failure is a result too: its traceback goes into the record. ``report(records)`` runs
    after each system, so results are written as they come."""
    records = []
    for system in systems:
        record = record_for(system)
        if record is None:
            continue
        try:
            work(system, record)
        except Exception:
            record["error"] = traceback.format_exc()
        records.append(record)
        if report:
            report(records)
    return records
