"""Reading an archive file line by line or block by block, gzip or Zstandard decompressed, with a
truncated or corrupt archive raised as :class:`ArchiveError` at the point where it breaks off."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Iterator

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd  # the same module for older Pythons (1 MB; zstandard is 23 MB)

from ..records import SourceError


class ArchiveError(Exception):
    """The compressed stream ends early or is corrupt: nothing after this point can be read."""


class _ZstdReader(io.RawIOBase):
    """Decompress a Zstandard file frame by frame, raising :class:`ArchiveError` when it
    ends inside a frame (a plain streaming reader would stop there silently)."""

    def __init__(self, raw):
        self._raw = raw
        self._frame = None
        self._buffer, self._offset = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, out) -> int:
        while self._offset == len(self._buffer):
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._frame is not None:
                    raise ArchiveError("compressed file ended before the end of its last frame")
                return 0
            output = []
            while chunk:
                if self._frame is None:
                    self._frame = zstd.ZstdDecompressor()  # one frame each
                try:
                    output.append(self._frame.decompress(chunk))
                except zstd.ZstdError as error:
                    raise ArchiveError(f"corrupt Zstandard data ({error})") from None
                chunk = b""
                if self._frame.eof:
                    chunk, self._frame = self._frame.unused_data, None
            self._buffer, self._offset = b"".join(output), 0
        n = min(len(out), len(self._buffer) - self._offset)
        out[:n] = self._buffer[self._offset:self._offset + n]
        self._offset += n
        return n


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

    def lines(self) -> Iterator[bytes]:
        """Raw lines; :class:`ArchiveError` where the compressed stream breaks off."""
        try:
            yield from self.stream
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


def stem(path: Path) -> str:
    """File name without a compression suffix: ``a.jsonl.gz`` -> ``a.jsonl``."""
    return path.name[: -len(path.suffix)] if path.suffix in (".gz", ".zst") else path.name
