"""Atomic, checksummed state files.

A state file is an uncompressed ``.npz`` archive of named arrays plus a ``__manifest__`` entry:
JSON with a format version, free-form metadata and the SHA-256 of every array. Writes go to a
temporary file in the same directory, are fsynced, then renamed over the target (and the
directory fsynced), so a crash leaves either the old file or the new one, never a torn one.
Reads verify every checksum, the metadata's included, and raise :class:`CorruptStateError` on
any mismatch and on every other way the file fails to read: a damaged zip header can make the
zip reader raise ``NotImplementedError`` ("compression method"), ``RuntimeError``
("encrypted"), ``struct.error`` and more, and all of them mean the same to a caller -- set the
file aside, use the previous one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

FORMAT = "streamtopics-state"
FORMAT_VERSION = 2  # 2: the metadata is checksummed too (1: arrays only, still read)
_MANIFEST = "__manifest__"


class CorruptStateError(ValueError):
    """A state file that is truncated, altered, or not a state file at all."""


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


def _meta_digest(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode("utf-8")).hexdigest()


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
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename is None:  # ENOSPC, EIO, ...: say which file
            raise OSError(error.errno, error.strerror, str(path)) from error
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
    meta = json.loads(json.dumps(meta))  # as a reader will see it (int keys become strings), checksummed so
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "meta": meta,
        "meta_checksum": _meta_digest(meta),
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
    except (CorruptStateError, MemoryError, FileNotFoundError, PermissionError):
        raise  # a missing or forbidden file is not a damaged one
    except Exception as error:  # noqa: BLE001 - whatever a damaged zip makes the reader raise
        raise CorruptStateError(f"{path}: unreadable state file ({type(error).__name__}: {error})") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("format_version") not in (1, 2):
        found = manifest if not isinstance(manifest, dict) else (manifest.get("format"), manifest.get("format_version"))
        raise CorruptStateError(f"{path}: unsupported format {found!r}")
    expected = manifest.get("checksums")
    if not isinstance(expected, dict) or not isinstance(manifest.get("meta"), dict):
        raise CorruptStateError(f"{path}: damaged manifest")
    if manifest["format_version"] >= 2 and manifest.get("meta_checksum") != _meta_digest(manifest["meta"]):
        raise CorruptStateError(f"{path}: checksum mismatch in the metadata")
    if set(expected) != set(arrays):
        raise CorruptStateError(f"{path}: arrays {sorted(set(expected) ^ set(arrays))} missing or unexpected")
    for name, digest in expected.items():
        if _digest(arrays[name]) != digest:
            raise CorruptStateError(f"{path}: checksum mismatch in {name!r}")
    return arrays, manifest["meta"]
