"""Why a record or a message did not become a document: one code per failure, used everywhere.

The code is what replay summaries, the consumer's ``documents_rejected_total{reason}`` metric and
the dead-letter header ``streamtopics.reason`` carry, whether the input came from an archive or
from Kafka; :data:`MESSAGES` holds the phrase a report line shows for it. The model adds its own
codes after tokenization (:data:`streamtopics.text.rejection.REJECTION_REASONS`).
"""

from __future__ import annotations

OVERSIZED = "oversized"
NOT_UTF8 = "not_utf8"
MALFORMED_JSON = "malformed_json"
MISSING_FIELD = "missing_field"
UNDECODABLE = "undecodable"
WRONG_FIELD_COUNT = "wrong_field_count"
MALFORMED_CSV = "malformed_csv"
TRUNCATED_ARCHIVE = "truncated_archive"
UNREADABLE_FILE = "unreadable_file"
BAD_HEADER = "bad_header"
VOCABULARY_MISMATCH = "vocabulary_mismatch"
NOT_SORTED = "not_sorted"
BAD_LINE = "bad_line"
WORD_ID_OUT_OF_RANGE = "word_id_out_of_range"
BAD_COUNT = "bad_count"
TERM_COUNT_MISMATCH = "term_count_mismatch"
IMPLAUSIBLE_TIME = "implausible_time"

#: Every code with its human message.
MESSAGES = {
    OVERSIZED: "larger than the size limit",
    NOT_UTF8: "not UTF-8",
    MALFORMED_JSON: "bad JSON",
    MISSING_FIELD: "missing field",  # the document's text (or tokens, counts) or a required time
    UNDECODABLE: "undecodable",  # no value, not a JSON object, a field of the wrong type, a bad time
    WRONG_FIELD_COUNT: "wrong number of fields",  # a CSV row
    MALFORMED_CSV: "bad CSV",
    TRUNCATED_ARCHIVE: "truncated or corrupt archive",
    UNREADABLE_FILE: "unreadable file",
    BAD_HEADER: "bad header",  # a UCI docword file
    VOCABULARY_MISMATCH: "vocabulary size mismatch",
    NOT_SORTED: "not sorted by document",
    BAD_LINE: "bad line",
    WORD_ID_OUT_OF_RANGE: "word id out of range",
    BAD_COUNT: "bad count",  # an LDA-C id:count term whose count is not a whole number (or too large)
    TERM_COUNT_MISMATCH: "term count mismatch",  # an LDA-C line whose N is not its number of terms
    IMPLAUSIBLE_TIME: "implausible time",  # before 0001 or from 2200 on (epoch milliseconds): consumers/times.py
}
