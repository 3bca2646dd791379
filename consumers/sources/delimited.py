"""CSV and TSV archives: a header row, then one row per document (position = rows consumed)."""

from __future__ import annotations

import csv
import io
import zlib
from pathlib import Path
from typing import Iterator

from .. import reasons
from ..records import MAX_RECORD_BYTES, Malformed, Record, Source, SourceError
from .archive_file import ArchiveError, ArchiveFile
from .fields import Fields


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
        self._file: ArchiveFile | None = None
        self._check_header()

    def _reader(self):
        self._file = ArchiveFile(self.path)
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
        if missing and _looks_like_data(header):
            raise SourceError(f"{self.path}: the first row looks like data, not a header row (a "
                              f"{self.spec['format'].upper()} file starts with its column names, e.g. id,text)")
        if missing:
            raise SourceError(f"{self.path}: no column {missing[0]!r} (columns: {', '.join(header)})")

    def __iter__(self) -> Iterator[Record | Malformed]:
        csv.field_size_limit(MAX_RECORD_BYTES)
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


def _looks_like_data(row: list[str]) -> bool:
    """Whether a first row is a record rather than column names: a cell that is a number, or
    one of more than four words (a name is neither; csv.Sniffer.has_header guesses the
    delimiter again and misjudges a TSV whose text holds commas)."""
    for cell in row:
        if len(cell.split()) > 4:
            return True
        try:
            float(cell)
            return True
        except ValueError:
            pass
    return False
