"""LDA-C corpora (Blei's lda-c): one document per line, ``N id:count id:count ...``, ids into a
word list one word a line (line *i* = word id *i*, from 0).

The format the topic-model tools share (lda-c, the ``lda`` package, Mallet and gensim's
``BleiCorpus``) and the word list beside it under one of a few customary names
(:data:`VOCABULARY_NAMES`), or named explicitly.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .. import reasons
from ..records import Malformed, Record, SourceError
from .archive_file import counts_document, first_lines_are, read_word_list, stem
from .lines import _LineSource

#: Where the word list of ``NAME.ldac[.gz]`` (or ``NAME.dat``, ...) is looked for, in this order, each
#: also with ``.gz`` or ``.zst``: ``NAME.vocab`` (gensim), ``NAME.tokens`` (the ``lda`` package),
#: ``vocab.txt`` (lda-c's own example), ...
VOCABULARY_NAMES = ("{name}.vocab", "{name}.tokens", "{name}.vocab.txt", "{name}.vocabulary",
                    "vocab.txt", "vocabulary.txt", "vocab")

#: A line in the usual spelling: parsed at once by numpy. 18 digits keep every number inside int64.
_CANONICAL = re.compile(rb"[ \t]*\d{1,18}(?:[ \t]+\d{1,18}:\d{1,18})*[ \t]*\r?\n?")
_TOO_LARGE = 10 ** 18  # stands for an id of more digits: outside any word list


def find_vocabulary(corpus: Path) -> Path | None:
    """The word list beside ``corpus`` under the first of :data:`VOCABULARY_NAMES` that exists."""
    name = Path(stem(corpus)).stem
    for pattern in VOCABULARY_NAMES:
        for suffix in ("", ".gz", ".zst"):
            candidate = corpus.parent / (pattern.format(name=name) + suffix)
            if candidate.is_file() and candidate != corpus:
                return candidate
    return None


class LdacSource(_LineSource):
    """An LDA-C corpus: documents are ``{word: count}`` mappings keyed by their index (the line
    number from 0, as the ``lda`` package and a corpus's titles file count them); blank lines
    are skipped. ``vocabulary``: the word list (default: :func:`find_vocabulary`).

    A line that is not ``N id:count ...`` (``bad_line``), has a count that is not a whole number
    (``bad_count``), an id outside the word list (``word_id_out_of_range``) or an ``N`` other than
    its number of terms (``term_count_mismatch``) is malformed; an id given twice adds its counts.
    """

    def __init__(self, path, vocabulary=None, start: int = 0):
        super().__init__(path, start)
        found = Path(vocabulary) if vocabulary is not None else find_vocabulary(self.path)
        if found is None:
            names = ", ".join(p.format(name=Path(stem(self.path)).stem) for p in VOCABULARY_NAMES)
            raise SourceError(f"{self.path}: an LDA-C corpus needs its word list: none beside it ({names}); "
                              "name it with --vocabulary FILE")
        if not found.is_file():
            raise SourceError(f"no such vocabulary file: {found}")
        self.vocabulary = found
        self.words = np.array(read_word_list(found), dtype=object)
        self.spec = {"path": str(self.path.resolve()), "format": "ldac", "vocabulary": str(found.resolve())}

    def _parse(self, raw: bytes, line: int):
        if not raw.strip():
            return None
        try:
            declared, ids, counts = _terms(raw) if _CANONICAL.fullmatch(raw) else _diagnose(raw)
        except _Fault as fault:
            return Malformed(f"{self.path}:{line}", *fault.args)
        if declared != ids.size:
            return Malformed(f"{self.path}:{line}", reasons.TERM_COUNT_MISMATCH,
                             f"N is {declared}, the line has {ids.size} id:count terms")
        if ids.size and ids.max() >= len(self.words):
            return Malformed(f"{self.path}:{line}", reasons.WORD_ID_OUT_OF_RANGE,
                             f"{ids.max()} outside 0..{len(self.words) - 1}")
        return Record(counts_document(self.words[ids].tolist(), counts.tolist()), line - 1)


def _terms(raw: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    """``(N, ids, counts)`` of a line that matches :data:`_CANONICAL`."""
    values = np.fromstring(raw.replace(b":", b" "), dtype=np.int64, sep=" ")
    return int(values[0]), values[1::2], values[2::2]


class _Fault(Exception):
    """A line that is not LDA-C: ``args`` are the reason and the detail of its first fault."""


def _diagnose(raw: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    """``(N, ids, counts)`` of a line not in the usual spelling that is still LDA-C (other
    whitespace, ids of more than 18 digits); :class:`_Fault` naming the first fault if not."""
    fields = raw.split()
    if not fields[0].isdigit() or len(fields[0]) > 18:
        raise _Fault(reasons.BAD_LINE, f"expected N, the number of terms, first, not {fields[0][:20]!r}")
    ids, counts = [], []
    for i, term in enumerate(fields[1:], 1):
        word, colon, count = term.partition(b":")
        if not colon or not word.isdigit():
            raise _Fault(reasons.BAD_LINE, f"term {i}, {term[:40]!r}, is not id:count")
        if not count.isdigit():
            raise _Fault(reasons.BAD_COUNT, f"term {i}, {term[:40]!r}: not a whole number")
        if len(count) > 18:
            raise _Fault(reasons.BAD_COUNT, f"term {i}: a count of {len(count)} digits")
        ids.append(int(word) if len(word) <= 18 else _TOO_LARGE)  # out of range, never an overflow
        counts.append(int(count))
    return int(fields[0]), np.array(ids, dtype=np.int64), np.array(counts, dtype=np.int64)


def looks_like_ldac(path: Path) -> bool:
    """Whether the first non-blank lines of a (possibly compressed) file are all LDA-C lines with
    at least one term: a corpus under a name that does not say so (lda-c's own ``ap.dat``)."""
    return first_lines_are(path, lambda raw: bool(_CANONICAL.fullmatch(raw)) and b":" in raw)
