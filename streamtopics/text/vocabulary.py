"""The word <-> index map the statistics are indexed by.

A vocabulary is either given (a list of words or a file with one word per line) or learned from a
warm-up prefix of the stream: the ``size`` words with the highest document frequency. Once the
model has absorbed a document the vocabulary is frozen, because every statistic is indexed by it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable


class Vocabulary:
    """An ordered list of distinct words with a word -> index map.

    Examples
    --------
    >>> vocab = Vocabulary(["apple", "pear", "plum"])
    >>> vocab["pear"], vocab.words[2], len(vocab)
    (1, 'plum', 3)
    >>> "kiwi" in vocab
    False
    """

    def __init__(self, words: Iterable[str]):
        self.words: list[str] = list(words)
        self.index: dict[str, int] = {word: i for i, word in enumerate(self.words)}
        if len(self.index) != len(self.words):
            duplicates = [w for w, n in Counter(self.words).items() if n > 1][:5]
            raise ValueError(f"vocabulary has duplicate words, e.g. {duplicates}")
        for word in self.words:
            if not isinstance(word, str) or not word:
                raise ValueError(f"vocabulary words must be non-empty strings, got {word!r}")

    @classmethod
    def from_file(cls, path) -> "Vocabulary":
        """One word per line (UTF-8); blank lines are ignored."""
        text = Path(path).read_text(encoding="utf-8")
        return cls(line.strip() for line in text.splitlines() if line.strip())

    @classmethod
    def from_document_counts(
        cls, documents: Iterable[dict[str, float]], size: int, min_df: int = 2
    ) -> "Vocabulary":
        """The ``size`` words of highest document frequency (ties broken alphabetically) that
        occur in at least ``min_df`` documents."""
        df: Counter = Counter()
        for counts in documents:
            df.update(counts.keys())
        ranked = sorted((w for w, n in df.items() if n >= min_df), key=lambda w: (-df[w], w))
        return cls(ranked[:size])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word) -> bool:
        return word in self.index

    def __getitem__(self, word: str) -> int:
        return self.index[word]

    def __iter__(self):
        return iter(self.words)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.words == other.words

    def __repr__(self) -> str:
        head = ", ".join(self.words[:5])
        return f"Vocabulary({len(self)} words: {head}{', ...' if len(self) > 5 else ''})"
