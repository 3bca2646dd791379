"""The directory of full snapshots that replays, consumers and the group's refresher write.

One file per refresh, ``snapshot-NNNNNN.json`` (the snapshot's version, zero-padded to six
digits), so every writer and reader (the CLI, the HTTP service, the plots) agrees on the names,
the order (by version, numerically) and which files pruning removes (the oldest).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from streamtopics import TopicSnapshot

_FILE = re.compile(r"snapshot-(\d+)\.json")


class SnapshotDirectory:
    """``path`` holding ``snapshot-NNNNNN.json`` files; ``keep`` newest kept on save (0 = all)."""

    def __init__(self, path, keep: int = 0):
        self.path = Path(path)
        self.keep = int(keep)

    @staticmethod
    def file_name(version: int) -> str:
        return f"snapshot-{version:06d}.json"

    @staticmethod
    def version_of(path) -> int | None:
        """The version in a snapshot file's name, None for any other file."""
        match = _FILE.fullmatch(Path(path).name)
        return int(match.group(1)) if match else None

    def files(self) -> list[Path]:
        """The snapshot files, oldest version first; empty when the directory does not exist."""
        try:
            entries = list(os.scandir(self.path))
        except OSError:
            return []
        found = [(version, self.path / entry.name) for entry in entries
                 if (version := self.version_of(entry.name)) is not None and entry.is_file()]
        return [path for _, path in sorted(found)]

    @classmethod
    def files_at(cls, path) -> list[Path]:
        """The snapshot files ``path`` stands for: a run directory's, oldest version first, or
        a single snapshot file; FileNotFoundError if there are none."""
        path = Path(path)
        if path.is_file():
            return [path]
        if not path.is_dir():
            raise FileNotFoundError(f"no such file or directory: {path}")
        files = cls(path).files()
        if not files:
            raise FileNotFoundError(f"{path}: no snapshot-*.json files")
        return files

    def save(self, snapshot: TopicSnapshot) -> Path:
        """Write ``snapshot`` under its version's name, then remove all but the ``keep`` newest."""
        path = snapshot.save(self.path / self.file_name(snapshot.version))
        if self.keep:
            for old in self.files()[: -self.keep]:
                old.unlink(missing_ok=True)
        return path

    def load(self, version: int) -> TopicSnapshot | None:
        """The snapshot of that version, None if it is missing or unreadable."""
        try:
            return TopicSnapshot.load(self.path / self.file_name(version))
        except (OSError, ValueError, KeyError):
            return None

    def latest(self) -> TopicSnapshot | None:
        """The newest readable snapshot (a torn or corrupt newest file is skipped)."""
        for path in reversed(self.files()):
            try:
                return TopicSnapshot.load(path)
            except (OSError, ValueError, KeyError):
                continue
        return None
