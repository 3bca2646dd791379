"""Sliding window of the last W documents, the alternative to exponential forgetting (issue 4).

The sums then cover exactly the last W documents: each document is added when it arrives and
subtracted (the same kernel, weight -1) when it leaves the window, so ingestion stays
O(document). Subtracting a document needs the document itself, so the window keeps the last W
encoded documents (word ids, counts, and the key hash that seeds the random-projection
tracker's direction for it): memory is bounded, O(W x document length; documents are
truncated at ``max_text_chars``), but unlike every other statistic it depends on W and on the
documents' lengths rather than only on V, P and K. The sums equal the window's exact sums up to
float rounding (an added-then-subtracted term leaves at most a few ulps), not bit for bit.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..text.documents import DocumentBatch


class DocumentWindow:
    """The last ``capacity`` documents absorbed (those the co-occurrence sums counted)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("a window holds at least one document")
        self.capacity = int(capacity)
        self.documents: deque = deque()  # (ids, counts, key hash)

    def __len__(self) -> int:
        return len(self.documents)

    def push(self, batch: DocumentBatch) -> DocumentBatch | None:
        """Add a batch's documents; return the documents that left the window (or None)."""
        for d, (a, b) in enumerate(zip(batch.indptr[:-1], batch.indptr[1:])):
            self.documents.append((batch.indices[a:b].copy(), batch.counts[a:b].copy(), batch.keys[d]))
        leaving = []
        while len(self.documents) > self.capacity:
            leaving.append(self.documents.popleft())
        return self._batch(leaving) if leaving else None

    @staticmethod
    def _batch(documents) -> DocumentBatch:
        return DocumentBatch.from_pairs([(ids, counts) for ids, counts, _ in documents],
                                        [key for _, _, key in documents])

    def state_dict(self) -> dict:
        batch = self._batch(list(self.documents))
        return {"capacity": np.int64(self.capacity), "indptr": batch.indptr, "indices": batch.indices,
                "counts": batch.counts, "keys": batch.keys}

    @classmethod
    def from_state_dict(cls, state: dict) -> "DocumentWindow":
        window = cls(int(state["capacity"]))
        indptr = state["indptr"]
        keys = state.get("keys", np.zeros(indptr.size - 1, np.uint64))  # saved before keys were kept
        for d, (a, b) in enumerate(zip(indptr[:-1], indptr[1:])):
            window.documents.append((np.array(state["indices"][a:b], np.int32), np.array(state["counts"][a:b]),
                                     np.uint64(keys[d])))
        return window
