"""Sliding window of the last W documents, the alternative to exponential forgetting (issue 4).

The sums then cover exactly the last W documents: each document is added when it arrives and
subtracted (the same kernel, weight -1) when it leaves the window, so ingestion stays
O(document). Subtracting a document needs the document itself, so the window keeps the last W
encoded documents (word ids and counts): memory is bounded, O(W x document length; documents are
truncated at ``max_text_chars``), but unlike every other statistic it depends on W and on the
documents' lengths rather than only on V, P and K. The sums equal the window's exact sums up to
float rounding (an added-then-subtracted term leaves at most a few ulps), not bit for bit.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .documents import DocumentBatch


class DocumentWindow:
    """The last ``capacity`` documents absorbed (those the co-occurrence sums counted)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("a window holds at least one document")
        self.capacity = int(capacity)
        self.documents: deque = deque()

    def __len__(self) -> int:
        return len(self.documents)

    def push(self, batch: DocumentBatch) -> DocumentBatch | None:
        """Add a batch's documents; return the documents that left the window (or None)."""
        for a, b in zip(batch.indptr[:-1], batch.indptr[1:]):
            self.documents.append((batch.indices[a:b].copy(), batch.counts[a:b].copy()))
        leaving = []
        while len(self.documents) > self.capacity:
            leaving.append(self.documents.popleft())
        return DocumentBatch.from_pairs(leaving) if leaving else None

    def state_dict(self) -> dict:
        batch = DocumentBatch.from_pairs(list(self.documents))
        return {"capacity": np.int64(self.capacity), "indptr": batch.indptr, "indices": batch.indices,
                "counts": batch.counts}

    @classmethod
    def from_state_dict(cls, state: dict) -> "DocumentWindow":
        window = cls(int(state["capacity"]))
        indptr = state["indptr"]
        for a, b in zip(indptr[:-1], indptr[1:]):
            window.documents.append((np.array(state["indices"][a:b], np.int32), np.array(state["counts"][a:b])))
        return window
