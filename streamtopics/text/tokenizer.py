"""Text to tokens: mail transport stripped, lowercase, a word pattern, a stop-word list and a
minimum length.

The tokenizer is deliberately simple and deterministic so that the same text gives the same
tokens on every machine, which replay and resume rely on.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .mail import strip_mail

DEFAULT_PATTERN = r"[^\W\d_]+"
# Maps every byte that is not a lowercase ASCII letter to a space: within lowercased ASCII text,
# the default pattern matches exactly the runs of a-z, so a translate + split finds the same tokens.
_ASCII_LETTERS = bytes(c if 97 <= c <= 122 else 32 for c in range(256))


@lru_cache(maxsize=None)
def english_stop_words() -> frozenset[str]:
    """The English stop-word list shipped with the package (``streamtopics/data``)."""
    text = resources.files("streamtopics").joinpath("data/stopwords_en.txt").read_text("utf-8")
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def configured_tokenizer(stop_words_file=None, strip_mail: bool = True) -> "Tokenizer | None":
    """The tokenizer a command line or config file asks for: the shipped English list plus the
    words of ``stop_words_file`` (whitespace-separated, any case), and ``strip_mail``; None when
    both are the defaults (the model then builds its own, as without the options)."""
    if stop_words_file is None and strip_mail:
        return None
    extra = Path(stop_words_file).read_text(encoding="utf-8").split() if stop_words_file is not None else []
    return Tokenizer(stop_words=english_stop_words() | {word.lower() for word in extra}, strip_mail=strip_mail)


class Tokenizer:
    """Split text into lowercase word tokens.

    Parameters
    ----------
    pattern
        Regular expression for one token, matched on the lowercased text. The default matches
        runs of letters (any script), so digits and punctuation split words.
    stop_words
        Words to drop: ``"english"`` (the shipped list), an iterable of words, or ``None``.
    min_length
        Tokens shorter than this are dropped.
    strip_mail
        Read the text as :func:`~streamtopics.text.mail.strip_mail` leaves it: a leading mail or news
        header block gives only its subject, and attribution lines ("... writes:"), e-mail
        addresses, URLs and lines of encoded data give no tokens. Streamed raw, 20 Newsgroups
        posts gave 7-10 of 20 topics made of header and address words ("edu nntp host
        posting"), none stripped; see ``git show 8e056d1:BENCHMARKS.md``, "Mail and news text".
        Text without these is tokenized as before.

    Examples
    --------
    >>> Tokenizer().tokenize("The Quick brown fox -- jumps over the lazy dog, 3 times!")
    ['quick', 'brown', 'fox', 'jumps', 'lazy', 'dog', 'times']
    >>> Tokenizer().count("spam spam eggs")
    {'spam': 2, 'eggs': 1}
    >>> Tokenizer().tokenize("From: ann@cs.cmu.edu\\nSubject: Re: spam eggs\\n\\nbob@ibm.com writes:\\nham")
    ['spam', 'eggs', 'ham']
    """

    def __init__(self, pattern: str = DEFAULT_PATTERN, stop_words="english", min_length: int = 3,
                 strip_mail: bool = True):
        self.pattern = pattern
        self.min_length = int(min_length)
        self.strip_mail = bool(strip_mail)
        if stop_words == "english":
            self.stop_words = english_stop_words()
        else:
            self.stop_words = frozenset(stop_words or ())
        self._regex = re.compile(pattern)

    def tokenize(self, text: str) -> list[str]:
        """The tokens of ``text`` in order. ASCII text under the default pattern skips the regex
        engine (same tokens, ~2.4x faster: tokenizing was half of a raw-text replay's time)."""
        lowered = (strip_mail(text) if self.strip_mail else text).lower()
        if self.pattern == DEFAULT_PATTERN and lowered.isascii():
            words = lowered.encode("ascii").translate(_ASCII_LETTERS).decode("ascii").split()
        else:
            words = self._regex.findall(lowered)
        stop, min_length = self.stop_words, self.min_length
        return [word for word in words if len(word) >= min_length and word not in stop]

    def count(self, text: str) -> dict[str, int]:
        """Token counts of ``text`` (a bag of words)."""
        return dict(Counter(self.tokenize(text)))

    def get_config(self) -> dict:
        """Settings that recreate this tokenizer (stop words listed explicitly)."""
        return {
            "pattern": self.pattern,
            "stop_words": sorted(self.stop_words),
            "min_length": self.min_length,
            "strip_mail": self.strip_mail,
        }

    @classmethod
    def from_config(cls, config: dict) -> "Tokenizer":
        """The tokenizer :meth:`get_config` describes; a configuration saved before ``strip_mail``
        existed tokenized without it, and resumes so."""
        return cls(config["pattern"], config["stop_words"], config["min_length"], config.get("strip_mail", False))

    def __repr__(self) -> str:
        return (f"Tokenizer(pattern={self.pattern!r}, stop_words={len(self.stop_words)}, "
                f"min_length={self.min_length}, strip_mail={self.strip_mail})")
