"""Which JSON/CSV fields hold a document's text, key and time (:class:`Fields`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from .. import reasons
from ..records import Malformed, Record, SourceError
from ..times import ImplausibleTime, parse_time
from ..untrusted_json import BadJSON, check_text


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
            except ImplausibleTime as error:
                return Malformed(where(), reasons.IMPLAUSIBLE_TIME, f"time field {self.time!r}: {error}")
            except ValueError as error:
                return Malformed(where(), reasons.UNDECODABLE, f"time field {self.time!r}: {error}")
        try:
            check_text(self.id or "id", key)
            for name in self.text:
                check_text(name, row.get(name))
        except BadJSON as error:
            return Malformed(where(), error.reason, error.detail)
        return Record(parts[0] if len(parts) == 1 else "\n".join(parts), key, timestamp)

    def to_dict(self) -> dict:
        return {"text_fields": list(self.text), "id_field": self.id, "time_field": self.time,
                "time_format": self.time_format}


# ---------------------------------------------------------------------------------- files


WRONG_FIELD_AFTER = 100  # objects without the text field, none with it: the field name is wrong
WRONG_FORMAT_AFTER = 20  # times that --time-format cannot read, none it can: the format is wrong


class FieldCheck:
    """Tells a wrong text-field name or time format from records that lack the field or hold a
    bad time.

    When the first :data:`WRONG_FIELD_AFTER` objects of a read all lack every text field, or the
    first :data:`WRONG_FORMAT_AFTER` times all fail to parse with ``time_format``, :meth:`see`
    raises :class:`SourceError` saying so, instead of the whole archive going by as malformed
    records (a shorter read reports each). :meth:`held_back` holds the malformed items back
    until the questions are settled (no document is held: one with the field and a readable time
    settles them), so that the error comes as one line rather than after a screen of warnings."""

    def __init__(self, fields: Fields, source_name: str):
        self.fields, self.source_name = fields, source_name
        self._without_text: list[set] | None = []  # field names of each; None once one had the text
        self._bad_times: list | None = [] if fields.time and fields.time_format else None  # None: settled

    def found(self) -> None:
        """A record was read whole (its document and its time): the field name and format are right."""
        self._without_text = self._bad_times = None

    def see(self, row: Mapping) -> None:
        self._see_text(row)
        self._see_time(row)

    def _see_text(self, row: Mapping) -> None:
        if self._without_text is None:
            return
        if any(name in row for name in self.fields.text):
            self._without_text = None
            return
        self._without_text.append(set(row))
        if len(self._without_text) >= WRONG_FIELD_AFTER:
            seen = sorted(set().union(*self._without_text))
            wanted = " or ".join(map(repr, self.fields.text))
            raise SourceError(f"{self.source_name}: no text field {wanted} in the first {len(self._without_text)} "
                              f"records (their fields: {', '.join(seen) or 'none'}); name the text with --text-field")

    def _see_time(self, row: Mapping) -> None:
        if self._bad_times is None or self.fields.time not in row:
            return
        try:
            parse_time(row[self.fields.time], self.fields.time_format)
        except ValueError:
            self._bad_times.append(row[self.fields.time])
            if len(self._bad_times) >= WRONG_FORMAT_AFTER:
                raise SourceError(f"{self.source_name}: --time-format {self.fields.time_format!r} reads none of the "
                                  f"first {len(self._bad_times)} times in field {self.fields.time!r} "
                                  f"(e.g. {self._bad_times[0]!r})") from None
        else:
            self._bad_times = None

    def held_back(self, items: Iterable[Record | Malformed]) -> Iterator[Record | Malformed]:
        held = []
        for item in items:
            if (self._without_text or self._bad_times) and len(held) < 10 * WRONG_FIELD_AFTER:
                held.append(item)
                continue
            yield from held
            held.clear()
            yield item
        yield from held
