"""Archive sources: read an archived stream back one document at a time.

Every source yields :class:`Record` items (a document with its key and timestamp) and
:class:`Malformed` items (what could not be read, with the file and line it came from); bad
input never stops the stream. Reads are streaming: memory does not grow with the archive.

A source keeps a ``position`` (lines, rows, files or documents consumed; Kafka offsets per
partition) that a replay checkpoints, and ``spec``, the arguments of :func:`open_source` that
reopen it: ``open_source(**source.spec, start=position)`` continues exactly where it stopped.

Formats (``format="auto"`` picks one from the path):

========  ==========================================================================
jsonl     JSON Lines, one object per line (``.jsonl``, ``.ndjson``, ``.json``)
csv/tsv   a header row, then one row per document (``.csv``, ``.tsv``)
lines     plain text, one document per line (any other file)
dir       a directory of text files, one document per file, in sorted path order
uci       UCI bag of words: ``docword.NAME.txt`` with ``vocab.NAME.txt`` beside it
kafka     ``kafka://HOST:PORT/TOPIC``, from the beginning, an offset or a timestamp
builtin   ``builtin``: the Python standard library's docstrings (:mod:`consumers.builtin_corpus`)
========  ==========================================================================

Files may be compressed with gzip (``.gz``) or Zstandard (``.zst``); a truncated archive is
reported as malformed at the line where it ends.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np
import zstandard

from . import reasons
from .records import Malformed, Record, Source, SourceError
from .times import parse_time

FORMATS = ("auto", "jsonl", "csv", "tsv", "lines", "dir", "uci", "kafka", "builtin")


@dataclass(frozen=True)
class Fields:
    """Which fields of a JSON object or CSV row hold the text, key and timestamp.

    Several text fields are joined with a newline (e.g. a title and a body). The key field is
    optional per record; the time field, when named, is required. Timestamps are numbers
    (seconds since the epoch), ISO 8601 strings, or strings in ``time_format`` (``strptime``,
    text after the time ignored); times without a zone are UTC.
    """

    text: tuple[str, ...] = ("text",)
    id: str | None = "id"
    time: str | None = None
    time_format: str | None = None

    def extract(self, row: Mapping, where) -> Record | Malformed:
        parts = []
        for name in self.text:
            value = row.get(name)
            if value is not None and not isinstance(value, str):
                return Malformed(where(), reasons.UNDECODABLE,
                                 f"text field {name!r} is {type(value).__name__}, not a string")
            if value is not None:
                parts.append(value)
        if not parts and not any(name in row for name in self.text):
            return Malformed(where(), reasons.MISSING_FIELD, "text field " + " or ".join(map(repr, self.text)))
        key = row.get(self.id) if self.id else None
        if key == "":
            key = None
        elif key is not None and (isinstance(key, bool) or not isinstance(key, (str, int))):
            key = str(key)
        timestamp = None
        if self.time:
            try:
                timestamp = parse_time(row[self.time], self.time_format)
            except KeyError:
                return Malformed(where(), reasons.MISSING_FIELD, f"time field {self.time!r}")
            except ValueError as error:
                return Malformed(where(), reasons.UNDECODABLE, f"time field {self.time!r}: {error}")
        return Record(parts[0] if len(parts) == 1 else "\n".join(parts), key, timestamp)

    def to_dict(self) -> dict:
        return {"text_fields": list(self.text), "id_field": self.id, "time_field": self.time,
                "time_format": self.time_format}


# ---------------------------------------------------------------------------------- files
class ArchiveError(Exception):
    """The compressed stream ends early or is corrupt: nothing after this point can be read."""


class _ZstdReader(io.RawIOBase):
    """Decompress a Zstandard file frame by frame, raising :class:`ArchiveError` when it
    ends inside a frame (``zstandard.stream_reader`` would stop there silently)."""

    def __init__(self, raw):
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
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
                    self._frame = self._decompressor.decompressobj()
                try:
                    output.append(self._frame.decompress(chunk))
                except zstandard.ZstdError as error:
                    raise ArchiveError(f"corrupt Zstandard data ({error})") from None
                chunk = b""
                if self._frame.eof:
                    chunk, self._frame = self._frame.unused_data, None
            self._buffer, self._offset = b"".join(output), 0
        n = min(len(out), len(self._buffer) - self._offset)
        out[:n] = self._buffer[self._offset:self._offset + n]
        self._offset += n
        return n


class _File:
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


def _stem(path: Path) -> str:
    """File name without a compression suffix: ``a.jsonl.gz`` -> ``a.jsonl``."""
    return path.name[: -len(path.suffix)] if path.suffix in (".gz", ".zst") else path.name


class _LineSource(Source):
    """Sources that read a file line by line: position = lines consumed."""

    def __init__(self, path, start: int = 0):
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"no such file: {self.path}")
        self.position = int(start)
        self._file: _File | None = None

    def _where(self, line: int):
        return lambda: f"{self.path}:{line}"

    def __iter__(self) -> Iterator[Record | Malformed]:
        self._file = _File(self.path)
        line = 0
        try:
            for raw in self._file.lines():
                line += 1
                if line <= self.position:
                    continue
                self.position = line
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
    """One JSON object per line; blank lines are skipped."""

    def __init__(self, path, fields: Fields = Fields(), start: int = 0):
        super().__init__(path, start)
        self.fields = fields
        self.spec = {"path": str(self.path.resolve()), "format": "jsonl", **fields.to_dict()}

    def _parse(self, raw: bytes, line: int):
        text = self._decode(raw, line)
        if isinstance(text, Malformed):
            return text
        if not text.strip():
            return None
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            return Malformed(f"{self.path}:{line}", reasons.MALFORMED_JSON, f"{error.msg} at column {error.colno}")
        if not isinstance(row, dict):
            return Malformed(f"{self.path}:{line}", reasons.UNDECODABLE, f"a JSON {type(row).__name__}, not an object")
        return self.fields.extract(row, self._where(line))


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


class CsvSource(Source):
    """A header row, then one document per row; position = data rows consumed.

    ``where`` is the line on which a row ends (rows may span lines inside quotes).
    """

    def __init__(self, path, fields: Fields = Fields(), delimiter: str = ",", start: int = 0):
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"no such file: {self.path}")
        self.fields, self.delimiter = fields, delimiter
        self.position = int(start)
        self.spec = {"path": str(self.path.resolve()), "format": "tsv" if delimiter == "\t" else "csv", **fields.to_dict()}
        self._file: _File | None = None
        self._check_header()

    def _reader(self):
        self._file = _File(self.path)
        text = io.TextIOWrapper(self._file.stream, encoding="utf-8", errors="surrogateescape", newline="")
        return csv.reader(text, delimiter=self.delimiter)

    def _check_header(self) -> None:
        reader = self._reader()
        try:
            header = next(reader, None)
        except ArchiveError:
            header = None
        finally:
            self._file.close()
        if header is None:
            raise SourceError(f"{self.path}: empty file, expected a header row")
        missing = [f for f in self.fields.text + ((self.fields.time,) if self.fields.time else ()) if f not in header]
        if missing:
            raise SourceError(f"{self.path}: no column {missing[0]!r} (columns: {', '.join(header)})")

    def __iter__(self) -> Iterator[Record | Malformed]:
        csv.field_size_limit(1 << 30)
        reader = self._reader()
        rows = 0
        try:
            header = next(reader)
            for values in reader:
                rows += 1
                if rows <= self.position:
                    continue
                self.position = rows
                where = lambda line=reader.line_num: f"{self.path}:{line}"  # noqa: E731
                if len(values) != len(header):
                    if not any(v.strip() for v in values):
                        continue
                    yield Malformed(where(), reasons.WRONG_FIELD_COUNT, f"{len(values)}, the header has {len(header)}")
                    continue
                row = dict(zip(header, values))
                bad = next((c for c in self.fields.text if not _is_utf8(row[c])), None)
                if bad is not None:
                    yield Malformed(where(), reasons.NOT_UTF8, f"column {bad!r}")
                    continue
                yield self.fields.extract(row, where)
        except csv.Error as error:
            self.position = rows + 1
            yield Malformed(f"{self.path}:{reader.line_num + 1}", reasons.MALFORMED_CSV, str(error))
        except (ArchiveError, EOFError, OSError, zlib.error) as error:
            self.position = rows + 1
            yield Malformed(f"{self.path}:{reader.line_num + 1}", reasons.TRUNCATED_ARCHIVE, str(error))
        finally:
            self._file.close()

    def progress(self):
        return (self._file.done if self._file else 0), self.path.stat().st_size, "B"

    @property
    def name(self) -> str:
        return self.path.name


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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
        self.words = self._read_vocabulary(sorted(vocab)[0])
        self._words = np.array(self.words, dtype=object)
        self.position = int(start)
        self.total: int | None = None
        self._file: _File | None = None
        self.spec = {"path": str(path.resolve()), "format": "uci"}

    @staticmethod
    def _read_vocabulary(path: Path) -> list[str]:
        file = _File(path)
        try:
            return [line.decode("utf-8").strip() for line in file.lines()]
        except (ArchiveError, UnicodeDecodeError) as error:
            raise SourceError(f"{path}: unreadable vocabulary ({error})") from None
        finally:
            file.close()

    def __iter__(self) -> Iterator[Record | Malformed]:
        self._file = _File(self.path)
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
        words = self._words[ids - 1].tolist()
        document = dict(zip(words, counts))
        if len(document) < len(words):  # a word listed twice: add its counts up
            document = {}
            for word, count in zip(words, counts):
                document[word] = document.get(word, 0.0) + count
        return document

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
class KafkaSource(Source):
    """Replay a Kafka topic up to the end offsets it had when the replay started.

    ``start`` is ``"beginning"``, an offset (the same on every partition) or a time (seconds
    since the epoch: each partition from its first message at or after it). Message values are
    UTF-8 text, or JSON objects read with ``fields`` when given; the key is the message key and
    the timestamp the message's. Position = ``{partition: next offset}``. Only a one-partition
    topic replays in a fixed order.
    """

    def __init__(self, url: str, start="beginning", fields: Fields | None = None,
                 offsets: dict | None = None, timeout_s: float = 30.0):
        from kafka import KafkaConsumer, TopicPartition

        servers, topic = parse_kafka_url(url)
        self.topic, self.fields, self.timeout_s = topic, fields, timeout_s
        self.spec = {"path": url, "format": "kafka", "kafka_start": start,
                     **(fields.to_dict() if fields else {"text_fields": None})}
        try:
            self._consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, group_id=None,
                                           request_timeout_ms=int(timeout_s * 1000) + 5000)
        except Exception as error:  # kafka-python raises NoBrokersAvailable and friends
            raise SourceError(f"cannot reach Kafka at {servers}: {error}") from None
        partitions = self._consumer.partitions_for_topic(topic)
        if not partitions:
            self._consumer.close()
            raise SourceError(f"no topic {topic!r} on {servers}")
        self._partitions = [TopicPartition(topic, p) for p in sorted(partitions)]
        self._consumer.assign(self._partitions)
        self._end = self._consumer.end_offsets(self._partitions)
        if offsets is not None:
            begin = {tp: int(offsets[str(tp.partition)]) for tp in self._partitions}
        elif start == "beginning":
            begin = self._consumer.beginning_offsets(self._partitions)
        elif isinstance(start, int):
            begin = {tp: start for tp in self._partitions}
        else:
            found = self._consumer.offsets_for_times({tp: int(float(start) * 1000) for tp in self._partitions})
            begin = {tp: self._end[tp] if found[tp] is None else found[tp].offset for tp in self._partitions}
        self._next = {tp: min(begin[tp], self._end[tp]) for tp in self._partitions}
        for tp in self._partitions:
            self._consumer.seek(tp, self._next[tp])

    @property
    def position(self) -> dict:
        return {str(tp.partition): offset for tp, offset in self._next.items()}

    def __iter__(self) -> Iterator[Record | Malformed]:
        import time

        deadline = time.monotonic() + self.timeout_s
        try:
            while any(self._next[tp] < self._end[tp] for tp in self._partitions):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka topic {self.topic!r}: no message for {self.timeout_s:g} s")
                batches = self._consumer.poll(timeout_ms=500)
                if batches:
                    deadline = time.monotonic() + self.timeout_s
                for tp in sorted(batches, key=lambda tp: tp.partition):
                    for message in batches[tp]:
                        if message.offset >= self._end[tp]:
                            continue
                        self._next[tp] = message.offset + 1
                        yield self._decode(message)
        finally:
            self._consumer.close()

    def _decode(self, message) -> Record | Malformed:
        where = f"{self.topic}[{message.partition}]@{message.offset}"
        try:
            text = (message.value or b"").decode("utf-8")
        except UnicodeDecodeError as error:
            return Malformed(where, reasons.NOT_UTF8, f"byte {error.start + 1}")
        key = None
        if message.key is not None:
            key = message.key.decode("utf-8", "backslashreplace")
        timestamp = message.timestamp / 1000 if message.timestamp is not None and message.timestamp >= 0 else None
        if self.fields is None:
            return Record(text, key, timestamp)
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            return Malformed(where, reasons.MALFORMED_JSON, f"{error.msg} at column {error.colno}")
        if not isinstance(row, dict):
            return Malformed(where, reasons.UNDECODABLE, f"a JSON {type(row).__name__}, not an object")
        record = self.fields.extract(row, lambda: where)
        if isinstance(record, Record) and (record.key is None or record.timestamp is None):
            record = Record(record.document, record.key if record.key is not None else key,
                            record.timestamp if record.timestamp is not None else timestamp)
        return record

    def progress(self):
        done = sum(self._next.values())
        total = sum(self._end.values())
        return done, total, "msgs"

    @property
    def name(self) -> str:
        return self.topic


def parse_kafka_url(url: str) -> tuple[str, str]:
    """``kafka://host:port[,host:port]/topic`` -> (servers, topic)."""
    if not url.startswith("kafka://") or "/" not in url[len("kafka://"):]:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    servers, topic = url[len("kafka://"):].split("/", 1)
    if not servers or not topic:
        raise SourceError(f"{url!r}: a Kafka source is kafka://HOST:PORT/TOPIC")
    return servers, topic


# ---------------------------------------------------------------------------------- factory
def detect_format(path: str) -> str:
    """The format ``auto`` stands for.

    >>> [detect_format(p) for p in ["a.jsonl.gz", "b.tsv", "notes.txt.zst", "kafka://h:9092/t"]]
    ['jsonl', 'tsv', 'lines', 'kafka']
    """
    if path.startswith("kafka://"):
        return "kafka"
    p = Path(path)
    if path == "builtin" and not p.exists():
        return "builtin"
    if p.is_dir():
        return "uci" if len(list(p.glob("docword.*"))) == 1 else "dir"
    stem = _stem(p)
    if stem.startswith("docword."):
        return "uci"
    suffix = Path(stem).suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv"}.get(suffix, "lines")


def open_source(path: str, format: str = "auto", *, text_fields=None, id_field: str | None = "id",
                time_field: str | None = None, time_format: str | None = None,
                kafka_start="beginning", start=0) -> Source:
    """Open an archive (a path or ``kafka://HOST:PORT/TOPIC``) as a :class:`Source`.

    ``start`` is a position saved from an earlier read of the same source. Raises
    :class:`SourceError` for a missing path, an unknown format or a bad field name.
    """
    path = str(path)
    if format not in FORMATS:
        raise SourceError(f"unknown format {format!r} (one of: {', '.join(FORMATS)})")
    if format == "auto":
        if not path.startswith("kafka://") and path != "builtin" and not Path(path).exists():
            raise SourceError(f"no such file or directory: {path}")
        format = detect_format(path)
    fields = Fields(tuple(text_fields or ("text",)), id_field, time_field, time_format)
    if format == "jsonl":
        return JsonLinesSource(path, fields, start)
    if format in ("csv", "tsv"):
        return CsvSource(path, fields, "\t" if format == "tsv" else ",", start)
    if format == "lines":
        return TextLinesSource(path, start)
    if format == "dir":
        return DirectorySource(path, start)
    if format == "uci":
        return UciSource(path, start)
    if format == "builtin":
        from .builtin_corpus import BuiltinCorpus  # imports the library: only when asked for

        return BuiltinCorpus(start)
    kafka_fields = fields if text_fields else None
    return KafkaSource(path, kafka_start, kafka_fields, offsets=start if isinstance(start, dict) else None)
