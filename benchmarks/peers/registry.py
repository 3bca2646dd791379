"""System name -> adapter class."""

from __future__ import annotations

import importlib

ADAPTERS = {
    "ours": ("benchmarks.peers.ours", "Ours"),
    "gensim": ("benchmarks.peers.gensim_lda", "Gensim"),
    "sklearn": ("benchmarks.peers.sklearn_lda", "Sklearn"),
    "river": ("benchmarks.peers.river_lda", "River"),
    "tomotopy": ("benchmarks.peers.tomotopy_lda", "Tomotopy"),
}


def adapter(system: str):
    module, name = ADAPTERS[system]
    return getattr(importlib.import_module(module), name)
