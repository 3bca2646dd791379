"""A directory of text files, one document per file, in sorted path order."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from .. import reasons
from ..records import MAX_RECORD_BYTES, Malformed, Record, Source, SourceError


class DirectorySource(Source):
    """Every non-hidden file below a directory is one document, in sorted path order; the
    key is the path relative to the directory. Position = files consumed."""

    def __init__(self, path, start: int = 0):
        self.path = Path(path)
        if not self.path.is_dir():
            raise SourceError(f"no such directory: {self.path}")
        self.files = sorted(
            p for p in self.path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(self.path).parts)
        )
        self.position = int(start)
        self.spec = {"path": str(self.path.resolve()), "format": "dir"}

    def __iter__(self) -> Iterator[Record | Malformed]:
        for index in range(self.position, len(self.files)):
            path = self.files[index]
            self.position = index + 1
            key = path.relative_to(self.path).as_posix()
            try:
                size = path.stat().st_size
                if size > MAX_RECORD_BYTES:
                    yield Malformed(str(path), reasons.OVERSIZED, f"a file of {size:,} bytes > {MAX_RECORD_BYTES:,}")
                    continue
                yield Record(path.read_bytes().decode("utf-8"), key)
            except UnicodeDecodeError as error:
                yield Malformed(str(path), reasons.NOT_UTF8, f"byte {error.start + 1}")
            except OSError as error:
                yield Malformed(str(path), reasons.UNREADABLE_FILE, error.strerror)

    def progress(self):
        return self.position, len(self.files), "files"

    @property
    def name(self) -> str:
        return self.path.name
