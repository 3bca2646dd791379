"""Which JSON/CSV fields hold a document's text, key and time (:class:`Fields`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .. import reasons
from ..records import Malformed, Record
from ..times import parse_time
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
