"""UCI bag-of-words archives: ``docword.NAME.txt`` with ``vocab.NAME.txt`` beside it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

import numpy as np

from .. import reasons
from ..records import Malformed, Record, Source, SourceError
from .archive_file import ArchiveError, ArchiveFile, counts_document, read_word_list


class UciSource(Source):
    """UCI bag of words: ``docword.NAME.txt`` (``D``, ``W``, ``NNZ``, then ``docID wordID
    count`` lines sorted by document) and ``vocab.NAME.txt`` (word *i* on line *i*).

    Documents are ``{word: count}`` mappings keyed by docID; position = lines consumed.
    ``path`` is the docword file or a directory holding exactly one.
    """

    def __init__(self, path, start: int = 0):
        path = Path(path)
        if path.is_dir():
            found = sorted(path.glob("docword.*"))
            if len(found) != 1:
                raise SourceError(f"{path}: expected one docword.* file, found {len(found)}")
            path = found[0]
        if not path.is_file():
            raise SourceError(f"no such file: {path}")
        if not path.name.startswith("docword."):
            raise SourceError(f"{path}: a UCI archive is named docword.NAME.txt[.gz]")
        vocab = [p for p in path.parent.glob("vocab." + path.name[len("docword."):].split(".txt")[0] + ".txt*")]
        if not vocab:
            raise SourceError(f"{path}: no vocab.{path.name[len('docword.'):]} beside it")
        self.path = path
        self.words = read_word_list(sorted(vocab)[0])
        self._words = np.array(self.words, dtype=object)
        self.position = int(start)
        self.total: int | None = None
        self._file: ArchiveFile | None = None
        self.spec = {"path": str(path.resolve()), "format": "uci"}

    def __iter__(self) -> Iterator[Record | Malformed]:
        self._file = ArchiveFile(self.path)
        skip, line, current, parts = self.position, 0, None, []
        try:
            blocks = self._file.blocks()
            head = b""
            for block in blocks:
                head += block
                if head.count(b"\n") >= 3:
                    break
            fields = head.split(b"\n", 3)
            try:
                self.total, declared_words, _ = (int(h) for h in fields[:3])
            except ValueError:
                self.position = 3
                yield Malformed(f"{self.path}:1", reasons.BAD_HEADER, "expected D, W and NNZ on three lines")
                return
            line = 3
            if declared_words != len(self.words) and skip < 2:
                yield Malformed(f"{self.path}:2", reasons.VOCABULARY_MISMATCH,
                                f"header says {declared_words} words, the vocabulary has {len(self.words)}")
            for block in itertools.chain(fields[3:], blocks):
                first, line = line + 1, line + block.count(b"\n")
                if line <= skip:
                    continue
                for run in self._runs(block, first, skip):
                    if isinstance(run, Malformed):
                        yield run
                        continue
                    doc, start = run[0], run[3]
                    if doc != current:
                        if current is not None:
                            self.position = start - 1
                            yield Record(self._document(parts), current)
                            if doc < current:
                                yield Malformed(f"{self.path}:{start}", reasons.NOT_SORTED,
                                                f"docID {doc} after {current}")
                        current, parts = doc, []
                    parts.append(run)
            self.position = line
            if current is not None:
                yield Record(self._document(parts), current)
        except ArchiveError as error:
            self.position = line + 1
            dropped = "" if current is None else f"; document {current} dropped"
            yield Malformed(f"{self.path}:{line + 1}", reasons.TRUNCATED_ARCHIVE, f"{error}{dropped}")
        finally:
            self._file.close()

    def _runs(self, block: bytes, first: int, skip: int):
        """``(docID, word ids, counts, first line)`` for each run of one document's lines in a
        block of whole lines, parsed at once when every line is canonical (``d w c``, single
        spaces), line by line (reporting bad lines) otherwise."""
        parsed = _parse_canonical(block, len(self.words))
        if parsed is not None:
            docs, ids, counts = parsed
            bounds = [0, *(np.flatnonzero(np.diff(docs)) + 1).tolist(), docs.size]
            for a, b in zip(bounds[:-1], bounds[1:]):
                if first + a > skip:
                    yield int(docs[a]), ids[a:b], counts[a:b], first + a
            return
        for line, raw in enumerate(block.split(b"\n")[:-1], first):
            fields = raw.split()
            if line <= skip or not fields:
                continue
            try:
                doc, word, count = fields
                doc, word, count = int(doc), int(word), float(count)
            except ValueError:
                yield Malformed(f"{self.path}:{line}", reasons.BAD_LINE, "expected 'docID wordID count'")
                continue
            if not 1 <= word <= len(self.words):
                yield Malformed(f"{self.path}:{line}", reasons.WORD_ID_OUT_OF_RANGE,
                                f"{word} outside 1..{len(self.words)}")
                continue
            yield doc, np.array([word]), np.array([count]), line

    def _document(self, runs) -> dict:
        ids = np.concatenate([run[1] for run in runs])
        counts = np.concatenate([run[2] for run in runs]).tolist()
        return counts_document(self._words[ids - 1].tolist(), counts)

    def progress(self):
        return (self._file.done if self._file else 0), self.path.stat().st_size, "B"

    @property
    def name(self) -> str:
        return self.path.name


def _parse_canonical(block: bytes, n_words: int):
    """``(docs, word ids, counts)`` of a block whose every line is ``d w c`` with single spaces,
    ids in range and documents in order; None if any line is not (it is then read line by line).
    """
    n = block.count(b"\n")
    raw = np.frombuffer(block, np.uint8)
    spaces = np.cumsum(raw == 32)[raw == 10]
    if n == 0 or np.any(np.diff(spaces, prepend=0) != 2) or b"\t" in block:
        return None
    try:
        values = np.fromstring(block, dtype=np.float64, sep=" ").reshape(n, 3)
    except ValueError:
        return None
    docs, ids = values[:, 0].astype(np.int64), values[:, 1].astype(np.int64)
    if (np.any(docs != values[:, 0]) or np.any(ids != values[:, 1]) or ids.min() < 1 or ids.max() > n_words
            or np.any(np.diff(docs) < 0)):
        return None
    return docs, ids, values[:, 2].copy()


# ---------------------------------------------------------------------------------- Kafka
