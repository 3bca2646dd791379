"""Compile the refinement's numba kernels on a toy problem, so that another process can do it
while a first run is busy elsewhere.

A first run compiles every kernel it meets, one after the other: the text and ingest kernels,
then, at the first refresh, recovery and then the refinement (KL-tEM, held-out scoring, CVB0),
which is about half of the compile time (``git show 8e056d1:BENCHMARKS.md``, "The refinement's
kernels compiled alongside"). numba caches compiled kernels on disk and a process that reaches a
kernel looks in that cache first, so a helper process that compiles the refinement's kernels
while the first run compiles the others halves the wait on two cores
(``consumers.kernel_cache.compile_ahead`` starts it; BENCHMARKS.md, "First run: compiling the
kernels").

The toy call must reach the kernels with the argument types a refresh passes, or it compiles
specialisations nobody uses: it calls :func:`~streamtopics.refresh.refinement.refine_topics` as
:meth:`streamtopics.refresh.lineage.RefreshState.advance` does, with a reservoir batch built like
:meth:`streamtopics.ingest.Ingest.reservoir_batch`'s and the model's default settings.
``tests/test_first_run.py`` checks that a refresh after it compiles none of these kernels.
"""

from __future__ import annotations

import numpy as np

from .config import ModelConfig
from .text.documents import DocumentBatch
from .refresh.refinement import refine_topics

#: The modules whose kernels :func:`compile_refinement_kernels` compiles (a refresh's refinement).
MODULES = ("streamtopics.refresh.refinement", "streamtopics.refresh.collapsed", "streamtopics.inference")


def compile_refinement_kernels(n_topics: int = 3, n_words: int = 40, n_documents: int = 60, seed: int = 0) -> None:
    """Refine random topics (and a background column) over a random reservoir once: every kernel
    of the refinement runs, at the types of a refresh's call (the alpha scale chosen after it
    reuses them)."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n_documents):
        ids = np.sort(rng.choice(n_words, size=8, replace=False)).astype(np.int32)
        pairs.append((ids, rng.integers(1, 4, size=ids.size).astype(np.float64)))
    reservoir = DocumentBatch.from_pairs(pairs, rng.integers(0, 2**63, size=n_documents, dtype=np.uint64))
    config = ModelConfig(n_topics)
    columns = np.column_stack([rng.dirichlet(np.ones(n_words)) for _ in range(n_topics + 1)])  # + background
    refine_topics(columns, reservoir, max(config.refine_iterations, 1), smoothing=config.refine_smoothing,
                  sweeps=max(config.refine_sweeps, 1))
