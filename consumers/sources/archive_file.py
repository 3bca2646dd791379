"""Reading an archive file line by line or block by block, gzip or Zstandard decompressed, with a
truncated or corrupt archive raised as :class:`ArchiveError` at the point where it breaks off."""

from __future__ import annotations

import gzip
import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd  # the same module for older Pythons (1 MB; zstandard is 23 MB)

from ..records import MAX_RECORD_BYTES, SourceError


class ArchiveError(Exception):
    """The compressed stream ends early or is corrupt: nothing after this point can be read."""


class _ZstdReader(io.RawIOBase):
    """Decompress a Zstandard file frame by frame, at most :data:`_PIECE` bytes of output at a time
    (a line of highly compressible text is never held whole), raising :class:`ArchiveError` when
    it ends inside a frame (a plain streaming reader would stop there silently)."""

    def __init__(self, raw):
        self._raw = raw
        self._frame = None
        self._input = b""  # read but not yet given to a frame (what follows a frame's end)
        self._buffer, self._offset = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, out) -> int:
        if self._offset == len(self._buffer):
            self._buffer, self._offset = self._next_piece(), 0
            if not self._buffer:
                return 0
        n = min(len(out), len(self._buffer) - self._offset)
        out[:n] = self._buffer[self._offset:self._offset + n]
        self._offset += n
        return n

    def _next_piece(self) -> bytes:
        """The next decompressed bytes (b"" at the end of the file)."""
        while True:
            if self._frame is not None and not self._frame.needs_input:
                data = b""  # output still pending from the input given
            else:
                data, self._input = self._input or self._raw.read(_PIECE), b""
                if not data:
                    if self._frame is not None:
                        raise ArchiveError("compressed file ended before the end of its last frame")
                    return b""
                if self._frame is None:
                    self._frame = zstd.ZstdDecompressor()  # one frame each
            try:
                piece = self._frame.decompress(data, max_length=_PIECE)
            except zstd.ZstdError as error:
                raise ArchiveError(f"corrupt Zstandard data ({error})") from None
            if self._frame.eof:
                self._input, self._frame = self._frame.unused_data, None
            if piece:
                return piece


_PIECE = 1 << 16


@dataclass(frozen=True)
class OverLongLine:
    """A line longer than the limit :meth:`ArchiveFile.lines` was given, read past: its bytes."""

    length: int


class ArchiveFile:
    """A possibly compressed file opened for binary reading, with progress in raw bytes."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.raw = open(path, "rb")
        except OSError as error:
            raise SourceError(f"cannot open {path}: {error.strerror}") from None
        self.size = path.stat().st_size
        if path.suffix == ".gz":
            self.stream = gzip.GzipFile(fileobj=self.raw, mode="rb")
        elif path.suffix == ".zst":
            self.stream = io.BufferedReader(_ZstdReader(self.raw), 1 << 16)
        else:
            self.stream = self.raw

    def lines(self, max_bytes: int | None = None) -> Iterator[bytes | OverLongLine]:
        """Raw lines; :class:`ArchiveError` where the compressed stream breaks off. With
        ``max_bytes``, a longer line is read past in pieces of that size and given as an
        :class:`OverLongLine` (its length), so memory stays bounded by the limit."""
        try:
            if max_bytes is None:
                yield from self.stream
                return
            while line := self.stream.readline(max_bytes + 1):
                if line.endswith(b"\n") or len(line) <= max_bytes:  # at most max_bytes before the newline
                    yield line
                    continue
                length = len(line)
                while not line.endswith(b"\n") and (line := self.stream.readline(max_bytes)):
                    length += len(line)
                yield OverLongLine(length)
        except (EOFError, OSError, zlib.error) as error:
            raise ArchiveError(str(error)) from None

    def blocks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """Chunks of whole lines (a last line without its newline gets one); where the
        compressed stream breaks off, the whole lines before it, then :class:`ArchiveError`."""
        chunks, held = [], 0
        try:
            while chunk := self.stream.read1(1 << 16):
                chunks.append(chunk)
                held += len(chunk)
                if held >= size:
                    data = b"".join(chunks)
                    cut = data.rfind(b"\n") + 1
                    chunks, held = [data[cut:]], len(data) - cut
                    if cut:
                        yield data[:cut]
        except (EOFError, OSError, zlib.error) as error:
            data = b"".join(chunks)
            if data.rfind(b"\n") >= 0:
                yield data[: data.rfind(b"\n") + 1]
            raise ArchiveError(str(error)) from None
        data = b"".join(chunks)
        if data:
            yield data if data.endswith(b"\n") else data + b"\n"

    @property
    def done(self) -> int:
        return self.raw.tell() if not self.raw.closed else self.size

    def close(self) -> None:
        self.stream.close()
        self.raw.close()


def read_word_list(path: Path) -> list[str]:
    """The words of a bag-of-words archive's vocabulary file, one a line (line *i* = word *i*),
    possibly compressed; :class:`SourceError` if it cannot be read."""
    file = ArchiveFile(path)
    try:
        return [line.decode("utf-8").strip() for line in file.lines()]
    except (ArchiveError, UnicodeDecodeError) as error:
        raise SourceError(f"{path}: unreadable vocabulary ({error})") from None
    finally:
        file.close()


SNIFFED_LINES = 20  # non-blank lines looked at to tell a format from plain text


def first_lines_are(path: Path, accept: Callable[[bytes], bool]) -> bool:
    """Whether the first :data:`SNIFFED_LINES` non-blank lines of a (possibly compressed) file,
    and at least one, are all ``accept``-ed: a format recognised by its content."""
    file = ArchiveFile(path)
    looked = 0
    try:
        for raw in file.lines(MAX_RECORD_BYTES):
            if isinstance(raw, OverLongLine) or not raw.strip():
                continue
            if not accept(raw):
                return False
            looked += 1
            if looked == SNIFFED_LINES:
                break
    except ArchiveError:
        pass
    finally:
        file.close()
    return looked > 0


def counts_document(words: list[str], counts: list) -> dict:
    """A ``{word: count}`` document of parallel lists, the counts of a word listed twice added up."""
    document = dict(zip(words, counts))
    if len(document) < len(words):
        document = {}
        for word, count in zip(words, counts):
            document[word] = document.get(word, 0) + count
    return document


def stem(path: Path) -> str:
    """File name without a compression suffix: ``a.jsonl.gz`` -> ``a.jsonl``."""
    return path.name[: -len(path.suffix)] if path.suffix in (".gz", ".zst") else path.name
