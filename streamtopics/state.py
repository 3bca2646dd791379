"""Atomic, checksummed state files.

A state file is an uncompressed ``.npz`` archive of named arrays plus a ``__manifest__`` entry:
JSON with a format version, free-form metadata and the SHA-256 of every array. Writes go to a
temporary file in the same directory, are fsynced, then renamed over the target (and the
directory fsynced), so a crash leaves either the old file or the new one, never a torn one.
Reads verify every checksum and raise :class:`CorruptStateError` on any mismatch.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

FORMAT = "streamtopics-state"
FORMAT_VERSION = 1
_MANIFEST = "__manifest__"


class CorruptStateError(ValueError):
    """A state file that is truncated, altered, or not a state file at all."""


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return _atomic_write(Path(path), lambda handle: handle.write(data))


def _atomic_write(path: Path, write) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path


def write_state(path, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    """Write arrays and JSON-serialisable metadata to ``path`` atomically, with checksums."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "meta": meta,
        "checksums": {name: _digest(value) for name, value in arrays.items()},
    }
    payload = dict(arrays)
    payload[_MANIFEST] = np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8)
    return _atomic_write(Path(path), lambda handle: np.savez(handle, **payload))


def read_state(path) -> tuple[dict[str, np.ndarray], dict]:
    """Read and verify a state file; returns ``(arrays, meta)``."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = set(archive.files)
            if _MANIFEST not in names:
                raise CorruptStateError(f"{path}: no manifest; not a streamtopics state file")
            manifest = json.loads(bytes(archive[_MANIFEST]).decode("utf-8"))
            arrays = {name: archive[name] for name in names - {_MANIFEST}}
    except CorruptStateError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError, io.UnsupportedOperation) as error:
        raise CorruptStateError(f"{path}: unreadable state file ({error})") from error
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise CorruptStateError(f"{path}: unsupported format {manifest.get('format')!r} v{manifest.get('format_version')}")
    expected = manifest["checksums"]
    if set(expected) != set(arrays):
        raise CorruptStateError(f"{path}: arrays {sorted(set(expected) ^ set(arrays))} missing or unexpected")
    for name, digest in expected.items():
        if _digest(arrays[name]) != digest:
            raise CorruptStateError(f"{path}: checksum mismatch in {name!r}")
    return arrays, manifest["meta"]
