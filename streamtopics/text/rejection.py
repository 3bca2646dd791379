"""Why a document was not absorbed: the model's reasons and the :class:`Rejection` carrying one.

Apart from :mod:`~streamtopics.text.documents` (numpy, the tokenizer's numba kernels) so that the
readers of archives and Kafka messages, and the command line with them, can name a rejection
without loading the model's numerical code.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Reasons a document is not absorbed (the keys of the model's rejection counters).
REJECTION_REASONS = (
    "empty",  # no tokens at all
    "too_short",  # fewer than MIN_TOKENS known tokens: contributes no word pair
    "no_known_words",  # every token is outside the vocabulary
    "undecodable",  # bytes that are not UTF-8
    "non_string_token",  # a token list holding something other than str
    "invalid_count",  # a count that is NaN, infinite, negative, above MAX_COUNT or not a number
    "invalid_word_id",  # a pre-indexed id outside the vocabulary
    "unsupported_type",  # not text, bytes, a token list, a mapping or a sparse row
)


@dataclass(frozen=True)
class Rejection:
    """Why a document was not absorbed."""

    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason
