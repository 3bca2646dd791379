"""Accepted documents waiting for the ingest kernel (:class:`PendingDocuments`): the kernel runs
over a full buffer at once, and a refresh first flushes what waits."""

from __future__ import annotations

import numpy as np

from .text.documents import DocumentBatch, EncodedDocument


class PendingDocuments:
    """Accepted documents waiting for the ingest kernel, in arrival order: single documents
    (:meth:`append`) and blocks of them (:meth:`extend`), each with its key hash and, when
    ``dated`` (a half-life in stream time), its stream time (NaN: none)."""

    def __init__(self, dated: bool):
        self.dated = dated
        self.blocks: list[DocumentBatch] = []
        self.singles: list[tuple[np.ndarray, np.ndarray]] = []  # appended since the last block
        self.single_keys: list[int] = []
        self.times: list[float] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, encoded: EncodedDocument, key_hash: int, stream_time) -> None:
        self.singles.append((encoded.ids, encoded.counts))
        self.single_keys.append(key_hash)
        self._date([stream_time])
        self.count += 1

    def extend(self, block: DocumentBatch, stream_times: list) -> None:
        self._seal()
        self.blocks.append(block)
        self._date(stream_times)
        self.count += len(block)

    def take(self) -> tuple[DocumentBatch, np.ndarray | None]:
        """Every pending document as one batch, with their stream times (None when not dated)."""
        self._seal()
        batch = self.blocks[0] if len(self.blocks) == 1 else DocumentBatch.concatenate(self.blocks)
        times = np.array(self.times) if self.dated else None
        self.blocks, self.times, self.count = [], [], 0
        return batch, times

    def _seal(self) -> None:
        if self.singles:
            self.blocks.append(DocumentBatch.from_pairs(self.singles, self.single_keys))
            self.singles, self.single_keys = [], []

    def _date(self, stream_times) -> None:
        if self.dated:
            self.times.extend(np.nan if t is None else float(t) for t in stream_times)
