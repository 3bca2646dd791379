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
lines     plain text, one document per line (any other file; JSON Lines there is an error)
dir       a directory of text files, one document per file, in sorted path order
uci       UCI bag of words: ``docword.NAME.txt`` with ``vocab.NAME.txt`` beside it
ldac      LDA-C: ``N id:count ...`` lines (``.ldac``, or any file whose lines all are), with its
          word list beside it (``NAME.vocab``, ``NAME.tokens``, ``vocab.txt``, ...) or ``vocabulary``
kafka     ``kafka://HOST:PORT/TOPIC``, from the beginning, an offset or a timestamp
builtin   ``builtin``: the Python standard library's docstrings (:mod:`consumers.builtin_corpus`)
========  ==========================================================================

Files may be compressed with gzip (``.gz``) or Zstandard (``.zst``); a truncated archive is
reported as malformed at the line where it ends.

One module per format: :mod:`~consumers.sources.lines` (jsonl, lines),
:mod:`~consumers.sources.delimited` (csv, tsv), :mod:`~consumers.sources.directory`,
:mod:`~consumers.sources.uci`, :mod:`~consumers.sources.ldac`, :mod:`~consumers.sources.kafka_topic`; what they share:
:mod:`~consumers.sources.archive_file` (decompression) and :mod:`~consumers.sources.fields`.
"""

from __future__ import annotations

from pathlib import Path

from ..records import Malformed, Record, Source, SourceError
from .archive_file import ArchiveError, stem
from .delimited import CsvSource
from .directory import DirectorySource
from .fields import Fields
from .kafka_topic import KafkaSource, parse_kafka_url
from .ldac import LdacSource, looks_like_ldac
from .lines import JsonLinesSource, TextLinesSource, looks_like_json_lines
from .uci import UciSource

__all__ = [
    "FORMATS", "ArchiveError", "CsvSource", "DirectorySource", "Fields", "JsonLinesSource", "KafkaSource",
    "LdacSource", "Malformed", "Record", "Source", "SourceError", "TextLinesSource", "UciSource", "detect_format",
    "open_source", "parse_kafka_url",
]

FORMATS = ("auto", "jsonl", "csv", "tsv", "lines", "dir", "uci", "ldac", "kafka", "builtin")


def detect_format(path: str) -> str:
    """The format ``auto`` stands for.

    >>> [detect_format(p) for p in ["a.jsonl.gz", "b.tsv", "notes.txt.zst", "c.ldac.gz", "kafka://h:9092/t"]]
    ['jsonl', 'tsv', 'lines', 'ldac', 'kafka']
    """
    if path.startswith("kafka://"):
        return "kafka"
    p = Path(path)
    if path == "builtin" and not p.exists():
        return "builtin"
    if p.is_dir():
        return "uci" if len(list(p.glob("docword.*"))) == 1 else "dir"
    name = stem(p)
    if name.startswith("docword."):
        return "uci"
    suffix = Path(name).suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv",
            ".ldac": "ldac"}.get(suffix, "lines")


def open_source(path: str, format: str = "auto", *, text_fields=None, id_field: str | None = "id",
                time_field: str | None = None, time_format: str | None = None,
                kafka_start="beginning", vocabulary: str | None = None, start=0) -> Source:
    """Open an archive (a path or ``kafka://HOST:PORT/TOPIC``) as a :class:`Source`.

    ``vocabulary``: an LDA-C corpus's word list (default: found beside it). ``start`` is a
    position saved from an earlier read of the same source. Raises :class:`SourceError` for a
    missing path, an unknown format, a bad field name or a vocabulary given to another format.
    """
    path = str(path)
    if format not in FORMATS:
        raise SourceError(f"unknown format {format!r} (one of: {', '.join(FORMATS)})")
    if format == "auto":
        if not path.startswith("kafka://") and path != "builtin" and not Path(path).exists():
            raise SourceError(f"no such file or directory: {path}")
        format = detect_format(path)
        if format == "lines" and looks_like_ldac(Path(path)):
            format = "ldac"
        if format == "lines" and looks_like_json_lines(Path(path)):
            raise SourceError(f"{path}: the lines are JSON objects, not text: read it with --format jsonl "
                              "(and --text-field NAME if the text is not in 'text')")
    if vocabulary is not None and format != "ldac":
        raise SourceError(f"a vocabulary file is for LDA-C corpora (--format ldac), not {format}")
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
    if format == "ldac":
        return LdacSource(path, vocabulary, start)
    if format == "builtin":
        from ..builtin_corpus import BuiltinCorpus  # imports the library: only when asked for

        return BuiltinCorpus(start)
    kafka_fields = fields if text_fields else None
    return KafkaSource(path, kafka_start, kafka_fields, offsets=start if isinstance(start, dict) else None)
