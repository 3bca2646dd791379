"""How a state file stores one array, losslessly and compactly.

Encodings: ``repeats_raw`` (format 6; ``repeats``, formats 4 and 5, read only: every plane
compressed) for arrays of 8-byte items of at least ``_SPARSE_MIN`` items, the co-occurrence
triangle above all (:mod:`~streamtopics.repeat_encoding`: nonzero items, each a repeat of a
recent one or new, in chunks on several threads); ``delta`` (formats 4 to 6) for an integer
array where it is smaller than ``zstd``: the differences of consecutive items (wrapping), byte
plane by byte plane, compressed (the reservoir's word indices, sorted within each document:
Reuters-21578 0.96 MB against 1.53 MB); ``zstd`` (formats 3 to 6) for the
rest, the items' bytes compressed with Zstandard, 1-byte items (the metadata's JSON) at a higher
level; ``nonzero`` (format 3, read only) for a mostly zero 8-byte array: a bitmap of the items
whose bit pattern is not zero and those items in order, each compressed. Decoding gives back the
same bytes, -0.0 and NaN payloads included.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from numba import njit, prange

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd  # the same module for older Pythons

from . import repeat_encoding

_LEVEL = 1  # 3 saved 4 % on the nonzero values of Reuters-21578's triangle and took 1.7 times as long
_TEXT_LEVEL = 4  # the metadata (Reuters, 4.9 MB): level 1 2.27 MB in 15 ms, 4 1.77 MB in 32 ms, 9 1.56 MB in 107 ms
_SPARSE_MIN = 1 << 16  # items; a smaller array is compressed whole
_CHUNK = 1 << 16  # format 3: the items of one count of the bitmap (a multiple of 8: whole bitmap bytes)
_PARALLEL_BYTES = 1 << 24  # larger blobs are compressed by several Zstandard threads
_POPCOUNT = np.array([bin(b).count("1") for b in range(256)], np.int64)


def encode(array: np.ndarray) -> tuple[str, dict[str, bytes]]:
    """``(encoding, {part: bytes})`` for a C-contiguous ``array``: its items, compressed."""
    flat = array.reshape(-1)
    if _repeats(array):
        return "repeats_raw", repeat_encoding.encode(flat.view(np.uint64))
    return _encode_whole(array)


def encode_on(pool: ThreadPoolExecutor, array: np.ndarray) -> Iterator[tuple[str, str, bytes]]:
    """Start encoding ``array`` on ``pool`` now, as :func:`encode` would; yields ``(encoding,
    part, bytes)`` for each part in order as soon as it is done, so a writer stores the first
    parts while the pool encodes the rest (the triangle's chunks)."""
    if _repeats(array):
        parts = repeat_encoding.encode_on(pool, array.reshape(-1).view(np.uint64))
        return (("repeats_raw", part, data) for part, data in parts)
    return _parts_of(pool.submit(_encode_whole, array))


def _parts_of(whole: Future) -> Iterator[tuple[str, str, bytes]]:
    encoding, parts = whole.result()
    for part, data in parts.items():
        yield encoding, part, data


def _repeats(array: np.ndarray) -> bool:
    return array.dtype.itemsize == 8 and array.size >= _SPARSE_MIN


def _encode_whole(array: np.ndarray) -> tuple[str, dict[str, bytes]]:
    """``zstd`` or, for integers where it is smaller, ``delta``: the array as one part."""
    flat = array.reshape(-1)
    whole = {"data": _compress(flat, _TEXT_LEVEL if array.dtype.itemsize == 1 else _LEVEL)}
    if array.dtype.kind in "iu" and array.dtype.itemsize > 1 and flat.size:
        words = flat.view(f"u{array.dtype.itemsize}")
        planes = np.diff(words, prepend=words.dtype.type(0)).view(np.uint8).reshape(-1, words.itemsize).T
        delta = {"data": _compress(planes)}
        if len(delta["data"]) < len(whole["data"]):
            return "delta", delta
    return "zstd", whole


def decode(encoding: str, parts: dict[str, bytes], dtype: str, shape: list[int]) -> np.ndarray:
    """The array :func:`encode` stored; ValueError (or a Zstandard error) if the parts do not
    make an array of that ``dtype`` and ``shape``."""
    dtype, shape = np.dtype(dtype), tuple(int(n) for n in shape)
    size = int(np.prod(shape, dtype=np.int64))
    if encoding == "zstd":
        flat = np.frombuffer(zstd.decompress(parts["data"]), dtype).copy()  # writable, as np.load's
    elif encoding == "nonzero" and dtype.itemsize == 8:
        mask = np.frombuffer(zstd.decompress(parts["mask"]), np.uint8)
        values = np.frombuffer(zstd.decompress(parts["values"]), np.uint64)
        if mask.size != (size + 7) // 8:
            raise ValueError(f"a bitmap of {mask.size} bytes for {size} items")
        counts = _bitmap_counts(mask, _CHUNK // 8, _POPCOUNT)
        starts = np.concatenate([[0], np.cumsum(counts)])
        if starts[-1] != values.size or (size % 8 and mask[-1] >> (size % 8)):
            raise ValueError("the bitmap does not match the nonzero items")
        flat = np.zeros(size, np.uint64)
        _scatter(mask, values, _CHUNK, starts, flat)
        flat = flat.view(dtype)
    elif encoding == "delta" and dtype.kind in "iu" and dtype.itemsize > 1:
        planes = np.frombuffer(zstd.decompress(parts["data"]), np.uint8)
        if planes.size != size * dtype.itemsize:
            raise ValueError(f"{planes.size} bytes for {size} items of {dtype}")
        words = np.ascontiguousarray(planes.reshape(dtype.itemsize, size).T).view(f"u{dtype.itemsize}").reshape(-1)
        flat = np.cumsum(words, dtype=words.dtype).view(dtype)
    elif encoding in ("repeats", "repeats_raw") and dtype.itemsize == 8:
        flat = repeat_encoding.decode(parts, size, raw_planes=encoding == "repeats_raw").view(dtype)
    else:
        raise ValueError(f"unknown encoding {encoding!r} of {dtype}")
    if flat.size != size:
        raise ValueError(f"{flat.size} items for shape {shape}")
    return flat.reshape(shape)


def _compress(array: np.ndarray, level: int = _LEVEL) -> bytes:
    data = memoryview(np.ascontiguousarray(array)).cast("B")
    workers = min(os.cpu_count() or 1, 4) if data.nbytes > _PARALLEL_BYTES else 0
    return zstd.compress(data, options={zstd.CompressionParameter.compression_level: level,
                                        zstd.CompressionParameter.nb_workers: workers,
                                        zstd.CompressionParameter.checksum_flag: 1})


@njit(cache=True, nogil=True, parallel=True)
def _bitmap_counts(mask, chunk_bytes, popcount):
    """The set bits of each ``chunk_bytes`` bytes of ``mask``."""
    n_chunks = (mask.size + chunk_bytes - 1) // chunk_bytes
    counts = np.zeros(n_chunks, np.int64)
    for c in prange(n_chunks):
        found = 0
        for byte in range(c * chunk_bytes, min(mask.size, (c + 1) * chunk_bytes)):
            found += popcount[mask[byte]]
        counts[c] = found
    return counts


@njit(cache=True, nogil=True, parallel=True)
def _scatter(mask, values, chunk, starts, flat):
    """Format 3's nonzero ``values`` into zeros ``flat`` where ``mask`` (bit ``i % 8`` of byte
    ``i // 8`` for item ``i``) has a bit set, chunk ``c``'s from ``values[starts[c]]``."""
    for c in prange(starts.size - 1):
        out = starts[c]
        for byte in range(c * chunk // 8, min(mask.size, (c + 1) * chunk // 8)):
            bits = mask[byte]
            bit = 0
            while bits:
                if bits & 1:
                    flat[8 * byte + bit] = values[out]
                    out += 1
                bits >>= 1
                bit += 1
