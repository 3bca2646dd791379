"""Atomic, checksummed state files.

A state file is an ``.npz`` archive (uncompressed zip) with a ``__manifest__`` entry. Formats 3
to 5 store every array as :mod:`~streamtopics.array_encoding` encodes it (formats 4 and 5: the
co-occurrence triangle as its nonzero items, repeats of recent ones coded by their slot, format
5 with each chunk's frame an entry of its own; format 3: as a bitmap and its nonzero items; the
rest compressed with Zstandard), and the metadata as one more encoded entry (JSON bytes,
``__meta__``); the manifest (JSON) gives each array's dtype, shape and encoding, the SHA-256 of
every stored entry and its own SHA-256. Checksumming the stored bytes, not the decoded arrays,
hashes a sixth as much (V = 15,000, 20 Newsgroups) and still covers every byte; the entries are
hashed on several threads. Formats 1 (arrays uncompressed, their SHA-256s), 2 (the metadata
checksummed too), 3 and 4 are still read.

Writes go to a temporary file in the same directory, are fsynced, then renamed over the target
(and the directory fsynced), so a crash leaves either the old file or the new one, never a torn
one. Reads verify every checksum and raise :class:`CorruptStateError` on any mismatch and on every
other way the file fails to read: a damaged zip header can make the zip reader raise
``NotImplementedError`` ("compression method"), ``RuntimeError`` ("encrypted"),
``struct.error`` and more, and all of them mean the same to a caller -- set the file aside, use
the previous one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .array_encoding import decode, encode

FORMAT = "streamtopics-state"
FORMAT_VERSION = 5  # 5: the triangle's chunks apart; 4: the triangle's repeats coded; 3: encoded arrays, stored bytes checksummed; 2: uncompressed, metadata checksummed; 1: arrays only
_MANIFEST = "__manifest__"
_META = "__meta__"  # formats 3 to 5: the metadata, an encoded array of JSON bytes


class CorruptStateError(ValueError):
    """A state file that is truncated, altered, or not a state file at all."""


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).view(np.uint8).reshape(-1)).hexdigest()


def _digests(entries: dict[str, np.ndarray]) -> dict[str, str]:
    """Each entry's SHA-256, on two threads (hashlib releases the GIL): the triangle's chunks
    (format 5) hash in half the time of one thread."""
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(entries, pool.map(_digest, entries.values())))


def _meta_digest(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode("utf-8")).hexdigest()


def _manifest_digest(manifest: dict) -> str:
    return _meta_digest({key: value for key, value in manifest.items() if key != "checksum"})


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
    meta_bytes = json.dumps(meta).encode("utf-8")  # a reader sees it through JSON (int keys become strings)
    arrays = {name: np.asarray(value, order="C") for name, value in arrays.items()}
    arrays[_META] = np.frombuffer(meta_bytes, np.uint8)
    table, entries = {}, {}
    with ThreadPoolExecutor(2) as pool:  # the small arrays encode while the triangle's chunks do (0.07 s at V = 15,000)
        encoded = list(pool.map(encode, arrays.values()))
    for (name, value), (encoding, parts) in zip(arrays.items(), encoded):
        table[name] = {"dtype": value.dtype.str, "shape": list(value.shape), "encoding": encoding}
        entries.update({f"{name}#{part}": np.frombuffer(data, np.uint8) for part, data in parts.items()})
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "arrays": table,
                "checksums": _digests(entries)}
    manifest["checksum"] = _manifest_digest(manifest)
    entries[_MANIFEST] = np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8)
    return _atomic_write(Path(path), lambda handle: np.savez(handle, **entries))


def read_state(path) -> tuple[dict[str, np.ndarray], dict]:
    """Read and verify a state file; returns ``(arrays, meta)``."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = set(archive.files)
            if _MANIFEST not in names:
                raise CorruptStateError(f"{path}: no manifest; not a streamtopics state file")
            manifest = json.loads(bytes(archive[_MANIFEST]).decode("utf-8"))
            entries = {name: archive[name] for name in names - {_MANIFEST}}
    except (CorruptStateError, MemoryError, FileNotFoundError, PermissionError):
        raise  # a missing or forbidden file is not a damaged one
    except Exception as error:  # noqa: BLE001 - whatever a damaged zip makes the reader raise
        raise CorruptStateError(f"{path}: unreadable state file ({type(error).__name__}: {error})") from error
    if (not isinstance(manifest, dict) or manifest.get("format") != FORMAT
            or manifest.get("format_version") not in (1, 2, 3, 4, 5)):
        found = manifest if not isinstance(manifest, dict) else (manifest.get("format"), manifest.get("format_version"))
        raise CorruptStateError(f"{path}: unsupported format {found!r}")
    expected, version = manifest.get("checksums"), manifest["format_version"]
    if not isinstance(expected, dict) or (version < 3 and not isinstance(manifest.get("meta"), dict)):
        raise CorruptStateError(f"{path}: damaged manifest")
    if version >= 3 and manifest.get("checksum") != _manifest_digest(manifest):
        raise CorruptStateError(f"{path}: checksum mismatch in the manifest")
    if version == 2 and manifest.get("meta_checksum") != _meta_digest(manifest["meta"]):
        raise CorruptStateError(f"{path}: checksum mismatch in the metadata")
    if set(expected) != set(entries):
        raise CorruptStateError(f"{path}: arrays {sorted(set(expected) ^ set(entries))} missing or unexpected")
    found = _digests(entries)
    for name, digest in expected.items():
        if found[name] != digest:
            raise CorruptStateError(f"{path}: checksum mismatch in {name!r}")
    return _decoded(path, manifest.get("arrays"), entries) if version >= 3 else (entries, manifest["meta"])


def _decoded(path: Path, table: dict, entries: dict) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and metadata of a format 3, 4 or 5 file from its verified ``entries`` (``NAME#PART``)."""
    parts: dict[str, dict] = {}
    for key, data in entries.items():
        name, _, part = key.rpartition("#")
        parts.setdefault(name, {})[part] = data
    try:
        arrays = {name: decode(entry["encoding"], parts.get(name, {}), entry["dtype"], entry["shape"])
                  for name, entry in table.items()}
        meta = json.loads(bytes(arrays.pop(_META)).decode("utf-8"))
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - checksums hold, yet the entries do not decode
        raise CorruptStateError(f"{path}: undecodable state file ({type(error).__name__}: {error})") from error
    if not isinstance(meta, dict):
        raise CorruptStateError(f"{path}: damaged metadata")
    return arrays, meta
