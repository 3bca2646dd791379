"""Checkpoints: the model's whole state and the stream position it reflects, written together.

The order in which a checkpoint is written and its position committed is defined once, in
:mod:`consumers.stream` (:meth:`StreamDriver.checkpoint <consumers.stream.StreamDriver.checkpoint>`);
this module holds where checkpoints go (steps 2-4 of that order, through
:func:`write_state_and_manifest`): a :class:`CheckpointStore`, one format for both stream
drivers -- the Kafka consumer's ``--checkpoint-dir`` and a replay's ``checkpoints/`` in its run
directory.

A checkpoint is two files in the store's directory that share a sequence number::

    ckpt-0000000042.state   the model (StreamingTopicModel.save: statistics, vocabulary,
                            configuration, latest snapshot; atomic, SHA-256 per array)
    ckpt-0000000042.json    the manifest: the stream position the statistics cover, the
                            driver's counters, the state file's size and the manifest's own
                            SHA-256; written (atomically) only once the state file is on disk,
                            so a manifest marks a complete checkpoint

The position is one of two kinds, in one manifest schema (format version 1):

* Kafka: ``offsets``, the next offset to read in every partition the statistics cover
  (:data:`Offsets`); ``archive`` is null;
* an archive replay: ``archive`` (:class:`ArchivePosition`: the ``source`` arguments that
  reopen it and the ``position`` read in it); ``offsets`` is empty.

On start the newest good checkpoint is restored and the stream resumes from *its* position
(Kafka: every partition it covers is sought to its offset, not to the group's committed one; why
that is exactly-once: :mod:`consumers.stream`).

Corruption: a manifest that is unreadable, fails its checksum or its schema (types, ranges, a
complete archive position), a state file of the wrong size, or one whose checksums fail
(:class:`~streamtopics.CorruptStateError`) is reported (logged, renamed ``*.corrupt``, listed in
:attr:`Restored.skipped`) and the previous checkpoint is used; the stream is then re-read from
that checkpoint's position. Any other load error (a sound file written by an incompatible
version) propagates and leaves the files alone.

>>> import tempfile
>>> from streamtopics import StreamingTopicModel
>>> model = StreamingTopicModel(n_topics=2, vocabulary=["apple", "pear", "goal", "match"])
>>> model.learn_many(["apple pear apple", "goal match goal"])
>>> with CheckpointStore(tempfile.mkdtemp()) as store:
...     saved = store.save(model, {("news", 0): 2})
...     restored = store.restore()
>>> restored.checkpoint.offsets, restored.model.documents_absorbed
({('news', 0): 2}, 2)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from streamtopics import CorruptStateError, StreamingTopicModel
from streamtopics.state import atomic_write_bytes

log = logging.getLogger("streamtopics.checkpoint")

FORMAT = "streamtopics-checkpoint"
FORMAT_VERSION = 1
_NAME = re.compile(r"^ckpt-(\d{10})\.(state|json)(\.corrupt)?$")

Offsets = dict[tuple[str, int], int]  # (topic, partition) -> next offset to read


@dataclass(frozen=True)
class ArchivePosition:
    """Where a replay stands in its archive: ``source``, the arguments of
    :func:`~consumers.sources.open_source` that reopen it (``path``, ``format`` and the format's
    fields), and ``position``, what it has read there (records, lines or files: an int; a Kafka
    topic: the next offset per partition, ``{"0": 17, ...}``)."""

    source: dict
    position: int | dict[str, int]


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint, as described by its manifest: ``offsets`` for a Kafka
    consumer's, ``archive`` for a replay's (see the module docstring)."""

    sequence: int
    offsets: Offsets
    counters: dict
    state_path: Path
    state_bytes: int
    created: float  # seconds since the epoch
    archive: ArchivePosition | None = None

    @property
    def manifest_path(self) -> Path:
        return self.state_path.with_suffix(".json")


@dataclass
class Restored:
    """What :meth:`CheckpointStore.restore` found: the model and offsets of the newest good
    checkpoint (both None in an empty store) and the newer ones that were corrupt."""

    model: StreamingTopicModel | None
    checkpoint: Checkpoint | None
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (sequence, why), newest first


class CheckpointStore:
    """A directory of checkpoints written by one consumer (see the module docstring).

    ``keep`` checkpoints are kept: the newest is the one in use, the older ones are the
    fall-backs if it turns out damaged. The directory is locked while the store is open, so two
    consumers can never interleave their checkpoints in it. ``member_id`` is a random id made
    once per directory; it names this consumer's offset commits in its group.
    """

    def __init__(self, directory, keep: int = 3, *, read_only: bool = False):
        if keep < 1:
            raise ValueError("keep at least one checkpoint")
        self.directory = Path(directory)
        self.keep = int(keep)
        self._lock = None
        if read_only:
            member = self.directory / "member-id"
            self.member_id = member.read_text().strip() if member.exists() else None
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = lock_exclusively(self.directory / "lock",
                                      f"{self.directory} is in use by another consumer or replay (its lock is held)")
        self.member_id = self._member_id()

    @classmethod
    def reader(cls, directory, keep: int = 3) -> "CheckpointStore":
        """A view of another consumer's directory that only reads (:meth:`checkpoints`,
        :meth:`latest`): no lock taken, nothing written, renamed or pruned. Safe while its owner
        writes, because manifests and state files are replaced atomically."""
        return cls(directory, keep, read_only=True)

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint whose manifest is intact (its state file not checked)."""
        for sequence in sorted(self._sequences("json"), reverse=True):
            try:
                return self._read_manifest(sequence)
            except CorruptStateError:
                continue
        return None

    def _member_id(self) -> str:
        path = self.directory / "member-id"
        if not path.exists():
            atomic_write_bytes(path, f"{uuid.uuid4().hex}\n".encode())
        return path.read_text().strip()

    # ------------------------------------------------------------------ writing
    def save(self, model: StreamingTopicModel, position: Offsets | ArchivePosition,
             counters: dict | None = None) -> Checkpoint:
        """Write the model and the position it reflects (Kafka offsets or an
        :class:`ArchivePosition`) as the next checkpoint (state file first, manifest last), then
        drop checkpoints beyond ``keep``."""
        archive = position if isinstance(position, ArchivePosition) else None
        offsets = {} if archive is not None else dict(position)
        sequence = self._last_sequence() + 1
        state_path = self._path(sequence, "state")
        created = time.time()

        def manifest(state_bytes: int) -> dict:
            body = {
                "format": FORMAT, "format_version": FORMAT_VERSION, "sequence": sequence,
                "member": self.member_id, "created": created,
                "state_file": state_path.name, "state_bytes": state_bytes,
                "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())],
                "archive": None if archive is None else {"source": archive.source, "position": archive.position},
                "counters": dict(counters or {}),
                "documents_absorbed": model.documents_absorbed,
            }
            return dict(body, checksum=_checksum(body))

        body = write_state_and_manifest(model, state_path, self._path(sequence, "json"), manifest)
        self._prune(sequence)
        return Checkpoint(sequence, offsets, body["counters"], state_path, body["state_bytes"], created, archive)

    def _prune(self, newest: int) -> None:
        """Keep the newest ``keep`` checkpoints; delete older ones, state files whose manifest
        was never written, and temporaries left by an interrupted write."""
        kept = sorted(self._sequences("json"), reverse=True)[: self.keep]
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match and not match.group(3) and int(match.group(1)) < newest and int(match.group(1)) not in kept:
                path.unlink(missing_ok=True)
            elif path.name.startswith(".ckpt-") and path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ reading
    def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint whose manifest is intact, newest first (state files unchecked)."""
        found = []
        for sequence in sorted(self._sequences("json"), reverse=True):
            try:
                found.append(self._read_manifest(sequence))
            except CorruptStateError:
                continue
        return found

    def restore(self, on_reject=None) -> Restored:
        """Load the newest checkpoint that is intact; report and set aside newer damaged ones.

        ``on_reject`` is handed to :meth:`StreamingTopicModel.load`."""
        restored = Restored(None, None)
        for sequence in sorted(self._sequences("json"), reverse=True):
            try:
                checkpoint = self._read_manifest(sequence)
                size = checkpoint.state_path.stat().st_size if checkpoint.state_path.exists() else None
                if size != checkpoint.state_bytes:
                    raise CorruptStateError(f"state file has {size} bytes, manifest says {checkpoint.state_bytes}")
                model = StreamingTopicModel.load(checkpoint.state_path, on_reject=on_reject)
            except CorruptStateError as error:  # only damage: a sound file this code cannot load
                why = str(error) or type(error).__name__
                log.error("checkpoint %d in %s is damaged (%s); setting it aside and trying the previous one",
                          sequence, self.directory, why)
                restored.skipped.append((sequence, why))
                self._set_aside(sequence)
                continue
            restored.model, restored.checkpoint = model, checkpoint
            break
        return restored

    def _read_manifest(self, sequence: int) -> Checkpoint:
        """The checkpoint manifest ``sequence`` describes, checked (checksum, then schema);
        :class:`~streamtopics.CorruptStateError` saying what is wrong if it is not sound. The
        only reader of manifests."""
        path = self._path(sequence, "json")
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            checksum = manifest.pop("checksum")
        except (OSError, ValueError, AttributeError, KeyError, TypeError, RecursionError) as error:
            raise CorruptStateError(f"{path}: unreadable manifest ({type(error).__name__}: {error})") from error
        if checksum != _checksum(manifest):
            raise CorruptStateError(f"{path}: manifest checksum mismatch")
        if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
            raise CorruptStateError(f"{path}: unsupported format {manifest.get('format')!r}")
        try:
            return self._parse_manifest(manifest, sequence)
        except (KeyError, TypeError, ValueError) as error:
            why = f"no {error}" if isinstance(error, KeyError) else str(error)
            raise CorruptStateError(f"{path}: bad manifest ({why})") from None

    def _parse_manifest(self, manifest: dict, sequence: int) -> Checkpoint:
        """The manifest's fields, each checked for type and range (ValueError, TypeError or
        KeyError otherwise)."""
        _check(manifest["sequence"] == sequence and _is_int(manifest["sequence"]), "sequence", manifest["sequence"])
        state_file = manifest["state_file"]
        _check(state_file == self._path(sequence, "state").name, "state_file", state_file)  # never another path
        _check(_is_int(manifest["state_bytes"]) and manifest["state_bytes"] >= 0, "state_bytes", manifest["state_bytes"])
        _check(_is_int(manifest["documents_absorbed"]) and manifest["documents_absorbed"] >= 0,
               "documents_absorbed", manifest["documents_absorbed"])
        created = manifest["created"]
        _check(isinstance(created, (int, float)) and not isinstance(created, bool), "created", created)
        _check(isinstance(manifest["counters"], dict), "counters", manifest["counters"])
        _check(manifest.get("member") is None or isinstance(manifest["member"], str), "member", manifest.get("member"))
        offsets = manifest["offsets"]
        _check(isinstance(offsets, list), "offsets", offsets)
        for entry in offsets:
            _check(isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                   and _is_int(entry[1]) and _is_int(entry[2]) and entry[1] >= 0 and entry[2] >= 0, "offset", entry)
        archive = manifest.get("archive")  # absent in manifests written before replays used this store
        if archive is not None:
            archive = _archive_position(archive)
            _check(not offsets, "offsets (an archive checkpoint has none)", offsets)
            # Every source reads at least one record (line, row, file, offset) per document it
            # gives: a position behind the documents would count documents twice.
            read = sum(archive.position.values()) if isinstance(archive.position, dict) else archive.position
            _check(read >= manifest["documents_absorbed"], "position (behind the documents absorbed)", archive.position)
        return Checkpoint(
            sequence=sequence,
            offsets={(t, p): o for t, p, o in offsets},
            counters=manifest["counters"],
            state_path=self.directory / state_file,
            state_bytes=manifest["state_bytes"],
            created=float(created),
            archive=archive,
        )

    def _set_aside(self, sequence: int) -> None:
        for kind in ("state", "json"):
            path = self._path(sequence, kind)
            if path.exists():
                path.replace(path.with_name(path.name + ".corrupt"))

    # ------------------------------------------------------------------ naming
    def _path(self, sequence: int, kind: str) -> Path:
        return self.directory / f"ckpt-{sequence:010d}.{kind}"

    def _sequences(self, kind: str) -> set[int]:
        names = (_NAME.match(p.name) for p in self.directory.iterdir())
        return {int(m.group(1)) for m in names if m and m.group(2) == kind and not m.group(3)}

    def _last_sequence(self) -> int:
        """The highest sequence ever used here, set-aside ones included, so none is reused."""
        names = (_NAME.match(p.name) for p in self.directory.iterdir())
        return max((int(m.group(1)) for m in names if m), default=0)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release the directory lock."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> "CheckpointStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CheckpointStore({str(self.directory)!r}, keep={self.keep})"


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: none there, every one damaged, or one of another
    source (the command line exits 2)."""


def write_state_and_manifest(model: StreamingTopicModel, state_path: Path, manifest_path: Path,
                             manifest: Callable[[int], dict]) -> dict:
    """Steps 2 and 3 of the commit order (:mod:`consumers.stream`): the model's state file,
    then -- once it is on disk -- the manifest ``manifest(state_bytes)`` that names it,
    atomically. Returns the manifest."""
    model.save(state_path)
    body = manifest(state_path.stat().st_size)
    atomic_write_bytes(manifest_path, json.dumps(body, indent=1).encode("utf-8"))
    return body


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(ok: bool, what: str, value) -> None:
    if not ok:
        raise ValueError(f"bad {what}: {value!r}"[:200])


def _archive_position(archive) -> ArchivePosition:
    """A manifest's ``archive`` entry as an :class:`ArchivePosition`: a ``source`` with a
    ``path`` and a ``format`` (the replay checks the rest by reopening it) and a non-negative
    ``position`` (per partition for Kafka)."""
    _check(isinstance(archive, dict) and set(archive) == {"source", "position"}, "archive", archive)
    source, position = archive["source"], archive["position"]
    _check(isinstance(source, dict) and all(isinstance(key, str) for key in source), "source", source)
    for key in ("path", "format"):
        _check(isinstance(source[key], str) and source[key] != "", f"source {key}", source[key])
    if source["format"] == "kafka":
        _check(isinstance(position, dict) and all(
            isinstance(p, str) and p.isdigit() and _is_int(o) and o >= 0 for p, o in position.items()),
            "position (next offset per partition)", position)
    else:
        _check(_is_int(position) and position >= 0, "position (a non-negative int)", position)
    return ArchivePosition(source, position)


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def lock_exclusively(path: Path, held_message: str) -> int | None:
    """Take an exclusive lock on the file ``path`` (created if missing) and return its
    descriptor, or None where fcntl does not exist; raises RuntimeError(held_message) if another
    process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(held_message) from None
    return fd
