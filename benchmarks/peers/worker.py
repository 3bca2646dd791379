"""Fit one system on one prepared stream, in this (fresh) process, and print a JSON result.

    python -m benchmarks.peers.worker SPEC_JSON

The spec names the system, the stream file, K, the chunk size, the checkpoints (documents seen
at which topics are read and compared with the truth; excluded from the timing), a time budget
in seconds (the stream is cut after the first chunk that ends past it, and the documents learned
are reported) and whether to evaluate. Timing covers ``learn`` over every chunk plus ``finish``;
a warm-up fit of a throwaway model on the first 50 documents runs before it (imports, JIT
compilation), for every system alike. Memory: peak resident set size of this process
(``VmHWM``) right after the fit, and the resident size before it (data loaded, warm-up done).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def rss_mb(field: str = "VmRSS") -> float:
    """Resident size (``VmRSS``) or its high-water mark (``VmHWM``) of this process, in MB.

    ``VmHWM`` restarts at exec, unlike ``ru_maxrss``, which Linux carries over from the parent
    that forked this process (so it would report the parent's peak)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(spec: dict) -> dict:
    import numpy as np

    from benchmarks.peers.data import load
    from benchmarks.peers.registry import adapter
    from streamtopics.evaluation import coherence_npmi, heldout_log_likelihood, matched_l1, topic_uniqueness

    stream = load(Path(spec["stream"]))
    train, truth, words = stream["train"], stream["truth"], stream["vocabulary"]
    n_docs = train.shape[0]
    cls = adapter(spec["system"])
    extra = {"iterations": spec["iterations"]} if spec["system"] == "tomotopy" and spec.get("iterations") else {}

    warm = cls(spec["n_topics"], words, n_docs, seed=1, **extra)
    if spec["system"] == "tomotopy":
        warm.iterations = 10
    warm.learn(train[:50])
    warm.finish()
    del warm

    rss_before = rss_mb()
    model, fit = _fit(cls, spec, train, truth, words, extra, spec.get("checkpoints", []))
    peak = rss_mb("VmHWM")
    seen = fit["docs"]
    curve = fit.pop("curve")
    result = {"system": spec["system"], "name": cls.name, "version": cls.version(), **fit,
              "stream_docs": n_docs, "rss_before_mb": rss_before, "peak_rss_mb": peak}
    if spec["system"] == "tomotopy":
        result["iterations"] = getattr(model, "iterations_done", None)
        result["tokens"] = float(train[:seen].sum())
    if spec.get("evaluate"):
        topic_word = model.topic_word()
        if truth is not None:
            result["l1"] = matched_l1(truth, topic_word)
            curve.append([seen, result["l1"]])
            result["curve"] = curve
        t0 = time.perf_counter()
        result["heldout_ll"] = heldout_log_likelihood(topic_word, stream["heldout"], model.infer, seed=0)
        result["infer_s"] = time.perf_counter() - t0
        result["npmi"] = float(np.mean(coherence_npmi(topic_word, train)))
        result["uniqueness"] = topic_uniqueness(topic_word)
    # timing repeats, in this process on fresh models (memory was read above, from the first fit)
    runs = [result["docs_per_s"]]
    if result["fit_s"] < spec.get("repeat_if_under_s", 0) and not result["stopped_early"]:
        del model
        for _ in range(2):
            _, again = _fit(cls, spec, train, truth, words, extra, [])
            runs.append(again["docs_per_s"])
    result["runs"] = runs
    return result


def _fit(cls, spec, train, truth, words, extra, checkpoints):
    """One timed pass over the stream; returns the model and the timing facts."""
    from streamtopics.evaluation import matched_l1

    n_docs = train.shape[0]
    model = cls(spec["n_topics"], words, n_docs, seed=spec.get("seed", 0), **extra)
    chunk = spec["chunk"]
    checkpoints = sorted(c for c in checkpoints if c < n_docs)
    budget = spec.get("budget_s") or float("inf")
    fit_s, seen, curve, stopped = 0.0, 0, [], False
    start_all = time.perf_counter()
    while seen < n_docs:
        end = min(n_docs, seen + chunk)
        if checkpoints and checkpoints[0] > seen:
            end = min(end, checkpoints[0])
        t0 = time.perf_counter()
        model.learn(train[seen:end])
        fit_s += time.perf_counter() - t0
        seen = end
        if checkpoints and seen == checkpoints[0]:
            checkpoints.pop(0)
            if truth is not None and model.online:
                model.finish()
                curve.append([seen, matched_l1(truth, model.topic_word())])
        if fit_s > budget and seen < n_docs:
            stopped = True
            break
    if spec["system"] == "tomotopy":
        model.deadline = time.perf_counter() + max(budget - fit_s, 0.0)
    learn_s = fit_s
    t0 = time.perf_counter()
    model.finish()
    fit_s += time.perf_counter() - t0
    return model, {"docs": seen, "stopped_early": stopped, "fit_s": fit_s, "docs_per_s": seen / fit_s,
                   "learn_s": learn_s, "finish_s": fit_s - learn_s, "curve": curve,
                   "wall_s": time.perf_counter() - start_all}


if __name__ == "__main__":
    out = main(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(out))
