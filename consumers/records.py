"""The items every source yields and the base class of sources.

Kept apart from :mod:`consumers.sources` so that sources defined elsewhere (the built-in corpus)
can subclass :class:`Source` without the two modules importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .reasons import MESSAGES


#: The largest record an archive source reads (a line of JSON Lines or text, a file of a directory
#: source): a longer one is skipped as ``oversized`` without being held in memory. A document's text
#: is cut at the model's ``max_text_chars`` (1,000,000 characters) anyway.
MAX_RECORD_BYTES = 16 << 20


class SourceError(ValueError):
    """An archive that cannot be read as asked: bad path, format, field or option."""


@dataclass(frozen=True)
class Record:
    """One archived document: raw text, ``{word: count}`` for bag-of-words archives (or, from a
    Kafka topic, whatever document a message holds: text, a token list or counts)."""

    document: str | list | dict
    key: str | int | None = None
    timestamp: float | None = None  # seconds since the epoch


@dataclass(frozen=True)
class Malformed:
    """A record that could not be read: ``where`` is ``file:line`` (or a Kafka offset),
    ``reason`` a code of :mod:`consumers.reasons` that summaries count by, ``detail`` the particulars."""

    where: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        message = MESSAGES.get(self.reason, self.reason)  # a Source defined elsewhere may bring its own
        return f"{self.where}: {message} ({self.detail})" if self.detail else f"{self.where}: {message}"


class Source:
    """Base class: iterate to get :class:`Record` and :class:`Malformed` items."""

    position = 0
    spec: dict = {}

    def __iter__(self) -> Iterator[Record | Malformed]:
        raise NotImplementedError

    def progress(self) -> tuple[int, int | None, str]:
        """``(done, total, unit)`` for a progress bar; total is None when unknown."""
        return self.position, None, "docs"

    @property
    def name(self) -> str:
        """A short label (file name, topic) that snapshots and reports use."""
        return str(self.spec.get("path", ""))
