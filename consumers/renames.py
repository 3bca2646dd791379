"""Old spellings of settings that are still accepted, each with a one-line deprecation message.

A setting has one name: a model setting is spelled as its :class:`~streamtopics.config.ModelConfig`
field (``--n-topics``, ``n_topics``), a consumer setting as its
:class:`~consumers.consumer_config.ConsumerConfig` field. Names that were spelled differently
keep working for now; each use says on stderr which name to use instead.
"""

from __future__ import annotations

import sys


def deprecated(old: str, new: str) -> None:
    """Say on stderr, in one line, that ``old`` still works but ``new`` is the name to use."""
    print(f"{old} is deprecated; use {new}", file=sys.stderr)
