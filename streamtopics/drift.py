"""A cheap drift signal: one of the triggers of :class:`~streamtopics.schedule.RefreshSchedule`.

The signal is the held-out fit of recent documents against the current snapshot: every
``sample_every``-th absorbed document (before it is learned, so it is held out) is given its
topic mixture (:func:`~streamtopics.inference.infer_mixtures`, O(document x K) per iteration) and
its log-likelihood per token under ``A gamma`` is folded into an exponential moving average. The
first ``baseline_samples`` samples after each refresh set the baseline; the signal fires when the
average falls more than ``drift_threshold`` nats per token below it (documents the snapshot can no
longer explain: a new topic, new words). The cost is one small inference per sampled document.
"""

from __future__ import annotations

import numpy as np

from .text.documents import DocumentBatch
from .inference import infer_mixtures


def log_likelihood_per_token(batch: DocumentBatch, topic_word: np.ndarray, mixtures: np.ndarray,
                             floor: float = 1e-9) -> np.ndarray:
    """Per-document mean log p(w | A gamma_d) over its tokens (probabilities floored at
    ``floor`` so a word no topic holds costs a finite penalty)."""
    out = np.empty(len(batch))
    for d, (a, b) in enumerate(zip(batch.indptr[:-1], batch.indptr[1:])):
        ids, counts = batch.indices[a:b], batch.counts[a:b]
        if counts.sum() <= 0:
            out[d] = np.nan
            continue
        p = topic_word[ids] @ mixtures[d]
        out[d] = float(counts @ np.log(np.maximum(p, floor)) / counts.sum())
    return out


class DriftMonitor:
    """Exponential moving average of held-out fit per token against the current snapshot."""

    def __init__(self, threshold: float = 0.5, sample_every: int = 10, baseline_samples: int = 20,
                 smoothing: float = 0.1):
        self.threshold = float(threshold)
        self.sample_every = max(1, int(sample_every))
        self.baseline_samples = max(1, int(baseline_samples))
        self.smoothing = float(smoothing)
        self.reset()

    def reset(self) -> None:
        """Forget the baseline (called after every refresh)."""
        self._seen = 0
        self._baseline_sum = 0.0
        self._baseline_n = 0
        self.baseline: float | None = None
        self.average: float | None = None

    def observe(self, ids: np.ndarray, counts: np.ndarray, snapshot) -> None:
        """Score one document (word ids and counts) if it is a sampled one."""
        self._seen += 1
        if snapshot is None or self._seen % self.sample_every or counts.sum() <= 0:
            return
        batch = DocumentBatch(np.array([0, ids.size]), np.asarray(ids, np.int32), np.asarray(counts, np.float64),
                              np.zeros(1, np.uint64))
        columns, prior = snapshot.mixture_components()
        mixtures = infer_mixtures(batch, columns, prior, max_iter=50, tol=1e-4)
        value = float(log_likelihood_per_token(batch, columns, mixtures)[0])
        if self.baseline is None:
            self._baseline_sum += value
            self._baseline_n += 1
            if self._baseline_n >= self.baseline_samples:
                self.baseline = self.average = self._baseline_sum / self._baseline_n
            return
        self.average += self.smoothing * (value - self.average)

    @property
    def fired(self) -> bool:
        return self.baseline is not None and self.average < self.baseline - self.threshold
