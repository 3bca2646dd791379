"""The record of a replay that has ended: ``run.json`` in its run directory.

A replay removes it when it starts and writes it when it ends (normally or stopped), so its
presence says "the latest run here is over" and a service started later over the directory
(``streamtopics serve DIR``) can report that run's own figures -- documents, rejections and
malformed records by reason, the run's ingest rate (while ingesting: refreshes, checkpoints and
pacing pauses excluded) -- instead of what it measures while it reads
the snapshot files (a backlog read in milliseconds is no ingest rate, and snapshots carry no
rejections).

>>> import tempfile
>>> from consumers.replay import ReplaySummary
>>> from collections import Counter
>>> out = tempfile.mkdtemp()
>>> summary = ReplaySummary(documents=100, absorbed=98, rejected=Counter(empty=2), elapsed_s=2.0,
...                         documents_this_run=100)
>>> _ = write_run_record(out, summary, snapshot_version=3, documents_seen=98)
>>> record = read_run_record(out)
>>> record["rejected"], record["ingest_rate"], record["snapshot_version"]
({'empty': 2}, 50.0, 3)
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from streamtopics.state import atomic_write_bytes

RUN_RECORD = "run.json"
FORMAT = "streamtopics-run"


def write_run_record(out_dir, summary, snapshot_version: int | None, documents_seen: int | None) -> Path:
    """Write what the run of ``summary`` (a :class:`~consumers.replay.ReplaySummary`) did, and
    the snapshot it ended on (the service uses the record only while that snapshot is the
    directory's newest)."""
    record = {
        "format": FORMAT, "ended_at": time.time(), "stopped": bool(summary.stopped),
        "snapshot_version": snapshot_version, "documents_seen": documents_seen,
        "documents": int(summary.documents), "absorbed": int(summary.absorbed),
        "rejected": {str(k): int(v) for k, v in summary.rejected.items()},
        "malformed": {str(k): int(v) for k, v in summary.malformed.items()},
        "times_clamped": int(summary.times_clamped),
        "documents_this_run": int(summary.documents_this_run), "elapsed_s": float(summary.elapsed_s),
        "refresh_s": float(summary.refresh_s), "checkpoint_s": float(summary.checkpoint_s),
        "paused_s": float(summary.paused_s), "ingest_rate": float(summary.ingest_rate),
    }
    return atomic_write_bytes(Path(out_dir) / RUN_RECORD, json.dumps(record, indent=1).encode("utf-8"))


def clear_run_record(out_dir) -> None:
    """A run starts in ``out_dir``: the record of the previous one no longer describes it."""
    (Path(out_dir) / RUN_RECORD).unlink(missing_ok=True)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counts(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _count(v) for k, v in value.items())


def _seconds(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


_FIELDS = {"documents": _count, "absorbed": _count, "rejected": _counts, "malformed": _counts,
           "documents_this_run": _count, "elapsed_s": _seconds, "refresh_s": _seconds, "checkpoint_s": _seconds,
           "ingest_rate": _seconds, "ended_at": _seconds, "stopped": lambda v: isinstance(v, bool),
           "snapshot_version": lambda v: v is None or _count(v), "documents_seen": lambda v: v is None or _count(v)}
_OPTIONAL = {"paused_s": _seconds}  # absent from the records of older versions


def read_run_record(out_dir) -> dict | None:
    """The record of the run that ended in ``out_dir``; None when there is none (a run in
    progress, a Kafka consumer's directory, a run written before records existed) or when it
    is unreadable or not of this format (each field checked for type and range)."""
    try:
        record = json.loads((Path(out_dir) / RUN_RECORD).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None
    if not all(name in record and valid(record[name]) for name, valid in _FIELDS.items()):
        return None
    if not all(valid(record[name]) for name, valid in _OPTIONAL.items() if name in record):
        return None
    return record
