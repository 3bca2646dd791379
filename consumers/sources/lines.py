"""JSON Lines and plain-text archives: one document per line (position = lines consumed)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from .. import reasons
from ..records import MAX_RECORD_BYTES, Malformed, Record, Source, SourceError
from ..untrusted_json import BadJSON, load_object
from .archive_file import ArchiveError, ArchiveFile, OverLongLine, first_lines_are
from .fields import Fields, FieldCheck


class _LineSource(Source):
    """Sources that read a file line by line: position = lines consumed."""

    def __init__(self, path, start: int = 0):
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"no such file: {self.path}")
        self.position = int(start)
        self._file: ArchiveFile | None = None

    def _where(self, line: int):
        return lambda: f"{self.path}:{line}"

    def __iter__(self) -> Iterator[Record | Malformed]:
        self._file = ArchiveFile(self.path)
        line = 0
        try:
            for raw in self._file.lines(MAX_RECORD_BYTES):
                line += 1
                if line <= self.position:
                    continue
                self.position = line
                if isinstance(raw, OverLongLine):
                    yield Malformed(f"{self.path}:{line}", reasons.OVERSIZED,
                                    f"a line of {raw.length:,} bytes > {MAX_RECORD_BYTES:,}")
                    continue
                item = self._parse(raw, line)
                if item is not None:
                    yield item
        except ArchiveError as error:
            self.position = line + 1
            yield Malformed(f"{self.path}:{line + 1}", reasons.TRUNCATED_ARCHIVE, str(error))
        finally:
            self._file.close()

    def _decode(self, raw: bytes, line: int) -> str | Malformed:
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as error:
            return Malformed(f"{self.path}:{line}", reasons.NOT_UTF8, f"byte {error.start + 1} of the line")

    def progress(self):
        return (self._file.done if self._file else 0), self.path.stat().st_size, "B"

    @property
    def name(self) -> str:
        return self.path.name


class JsonLinesSource(_LineSource):
    """One JSON object per line; blank lines are skipped. A wrong text-field name or time format
    stops the read within the first records (:class:`~consumers.sources.fields.FieldCheck`)."""

    def __init__(self, path, fields: Fields = Fields(), start: int = 0):
        super().__init__(path, start)
        self.fields = fields
        self.spec = {"path": str(self.path.resolve()), "format": "jsonl", **fields.to_dict()}
        self._text_check = FieldCheck(fields, str(self.path))

    def __iter__(self) -> Iterator[Record | Malformed]:
        yield from self._text_check.held_back(super().__iter__())

    def _parse(self, raw: bytes, line: int):
        text = self._decode(raw, line)
        if isinstance(text, Malformed):
            return text
        if not text.strip():
            return None
        try:
            row = load_object(text)
        except BadJSON as error:
            return Malformed(f"{self.path}:{line}", error.reason, error.detail)
        self._text_check.see(row)
        return self.fields.extract(row, self._where(line))


def looks_like_json_lines(path: Path) -> bool:
    """Whether the first non-blank lines of a (possibly compressed) file are all JSON objects."""
    def is_object(raw: bytes) -> bool:
        try:
            load_object(raw.decode("utf-8"))
        except (BadJSON, UnicodeDecodeError):
            return False
        return True
    return first_lines_are(path, is_object)


class TextLinesSource(_LineSource):
    """Plain text, one document per line; blank lines are skipped."""

    def __init__(self, path, start: int = 0):
        super().__init__(path, start)
        self.spec = {"path": str(self.path.resolve()), "format": "lines"}

    def _parse(self, raw: bytes, line: int):
        text = self._decode(raw, line)
        if isinstance(text, Malformed):
            return text
        return Record(text) if text.strip() else None
