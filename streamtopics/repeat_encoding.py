"""An array of 8-byte items stored as its nonzero items, each either a repeat of a recent one
(coded by how many items back it last occurred) or new (stored byte plane by byte plane), in
chunks compressed in parallel.

The co-occurrence triangle's nonzero cells are sums of per-document fractions: their mantissas
are random bits, but half of them equal another cell's (a pair seen in one document only gets
that document's fraction, shared by its other pairs), mostly a nearby one. Each chunk of
``CHUNK`` items is scanned once: a bitmap of the nonzero items; for each nonzero item a bit saying
whether it repeats a value still in the encoder's table of recent values (2 ** ``TABLE_BITS``
slots, addressed by a hash of the value), then either the distance back to the value's last
occurrence among the chunk's nonzero items (three bytes, by plane) or the value itself. The
decoder needs no table: it copies the item that distance back. New values are split into byte
planes, so Zstandard codes the sign and exponent bytes (nearly constant) apart from the random
low mantissa bytes. Reuters-21578's triangle: 24.5 MB against 28.9 MB for format 3 (Zstandard
level 1 over the nonzero items; byte planes of all of them: 34.4 MB, as repeats are lost).

A chunk's parts are one Zstandard frame, chunks are encoded and decoded on several threads (the
kernels and Zstandard release the GIL), and the comparisons are of bit patterns: decoding gives
back the same bytes, -0.0 and NaN payloads included.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd  # the same module for older Pythons

CHUNK = 1 << 22  # items per chunk (at most 2 ** 24: distances take three bytes)
TABLE_BITS = 18  # Reuters-21578, chunks of 2 ** 20 / 2 ** 22 / 2 ** 23 items, 2 ** 18 slots: 24.8 / 24.5 /
# 24.4 MB, 2 ** 20 slots: 24.6 / 24.0 / 23.8 MB, but at V = 15,000 2 ** 20 slots take 2.2 times as long
_HASH = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of value * 2 ** 64 / phi
_LEVEL = 1


def encode(words: np.ndarray) -> dict[str, bytes]:
    """``{"index", "frames"}`` for a 1-D ``uint64`` array: see the module docstring. The index
    is ``int64``: items per chunk, then per chunk its frame's bytes, nonzero items and hits."""
    starts, scratch, room = range(0, words.size, CHUNK), threading.local(), min(CHUNK, words.size)
    with ThreadPoolExecutor(_threads(len(starts))) as pool:
        chunks = list(pool.map(lambda start: _encode_chunk(words[start:start + CHUNK], scratch, room), starts))
    index = [CHUNK] + [n for frame, nonzero, hits in chunks for n in (len(frame), nonzero, hits)]
    return {"index": np.array(index, "<i8").tobytes(), "frames": b"".join(frame for frame, _, _ in chunks)}


def decode(parts: dict[str, bytes], size: int) -> np.ndarray:
    """The ``uint64`` array of ``size`` items :func:`encode` stored; ValueError (or a Zstandard
    error) if the parts are not such an array."""
    index = np.frombuffer(parts["index"], "<i8")
    if index.size < 1 or not 8 <= index[0] <= 1 << 24 or index[0] % 8:
        raise ValueError("a damaged chunk index")
    chunk = int(index[0])
    table = index[1:].reshape(-1, 3) if index.size % 3 == 1 else None
    if table is None or table.shape[0] != -(-size // chunk) or (table < 0).any():
        raise ValueError(f"a chunk index of {index.size} numbers for {size} items")
    ends = np.cumsum(table[:, 0])
    frames = memoryview(parts["frames"])
    if table.shape[0] and ends[-1] != len(frames) or not table.shape[0] and len(frames):
        raise ValueError("the frames do not match the chunk index")
    flat, scratch = np.empty(size, np.uint64), threading.local()

    def decode_chunk(c):
        cells = flat[c * chunk:(c + 1) * chunk]
        nonzero, hits = int(table[c, 1]), int(table[c, 2])
        if hits > nonzero or nonzero > cells.size:
            raise ValueError(f"chunk {c}: {nonzero} nonzero items and {hits} hits of {cells.size}")
        payload = np.frombuffer(zstd.decompress(frames[ends[c] - table[c, 0]:ends[c]]), np.uint8)
        bounds = np.cumsum([0, (cells.size + 7) // 8, (nonzero + 7) // 8, 3 * hits, 8 * (nonzero - hits)])
        if payload.size != bounds[-1]:
            raise ValueError(f"chunk {c}: {payload.size} bytes, not {bounds[-1]}")
        mask, flags, codes, literals = (payload[a:b] for a, b in zip(bounds[:-1], bounds[1:]))
        if not hasattr(scratch, "found"):
            scratch.found = np.empty(min(chunk, size), np.uint64)
        problem = _decode_chunk(mask, flags, codes.reshape(3, hits), literals.reshape(8, nonzero - hits), cells,
                                scratch.found)
        if problem:
            raise ValueError(f"chunk {c}: {('', 'the bitmap', 'the hits', 'a distance', 'a new zero')[problem]} "
                             "does not match")

    with ThreadPoolExecutor(_threads(table.shape[0])) as pool:
        list(pool.map(decode_chunk, range(table.shape[0])))
    return flat


def _threads(tasks: int) -> int:
    return max(1, min(tasks, numba.get_num_threads()))


def _encode_chunk(words: np.ndarray, scratch: threading.local, room: int) -> tuple[bytes, int, int]:
    """One chunk's Zstandard frame (bitmap, hit bits, distances by byte plane, new values by
    byte plane), its nonzero items and its hits. The buffers (for ``room`` items) are the
    thread's ``scratch``, one set a thread: allocating them (the table too) for each chunk kept
    two threads slower than one (V = 15,000: the scans took 0.56 s on two threads, 0.39 s on one;
    0.23 s on two with one set a thread)."""
    if not hasattr(scratch, "buffers"):
        scratch.buffers = (np.empty(1 << TABLE_BITS, np.uint64), np.empty(1 << TABLE_BITS, np.int32),
                           np.empty((2, (room + 7) // 8), np.uint8), np.empty((3, room), np.uint8),
                           np.empty((8, room), np.uint8))
    values, last, bitmaps, codes, literals = scratch.buffers
    bitmaps[:] = 0
    mask, flags = bitmaps[0, :(words.size + 7) // 8], bitmaps[1]
    nonzero, hits = _scan_chunk(words, TABLE_BITS, values, last, mask, flags, codes, literals)
    compressor = zstd.ZstdCompressor(options={zstd.CompressionParameter.compression_level: _LEVEL,
                                              zstd.CompressionParameter.checksum_flag: 1})
    pieces = [mask, flags[:(nonzero + 7) // 8], *codes[:, :hits], *literals[:, :nonzero - hits]]
    frame = b"".join(compressor.compress(piece) for piece in pieces) + compressor.flush()
    return frame, nonzero, hits


@njit(cache=True, nogil=True)
def _scan_chunk(words, bits, values, last, mask, flags, codes, literals):
    """Fill the zeroed ``mask`` and ``flags`` and the planes ``codes`` and ``literals``, with a
    table of 2 ** ``bits`` ``values`` (zeroed here) and where each last occurred among the
    nonzero items (``last``, read only where ``values`` matched); returns (nonzero items, hits)."""
    values[:] = 0
    shift = np.uint64(64 - bits)
    nonzero = hits = 0
    for i in range(words.size):
        value = words[i]
        if value == 0:
            continue
        mask[i >> 3] |= np.uint8(1 << (i & 7))
        slot = (value * _HASH) >> shift
        if values[slot] == value:
            flags[nonzero >> 3] |= np.uint8(1 << (nonzero & 7))
            distance = nonzero - last[slot]
            for plane in range(3):
                codes[plane, hits] = np.uint8((distance >> (8 * plane)) & 0xFF)
            hits += 1
        else:
            values[slot] = value
            new = nonzero - hits
            for plane in range(8):
                literals[plane, new] = np.uint8((value >> np.uint64(8 * plane)) & np.uint64(0xFF))
        last[slot] = nonzero
        nonzero += 1
    return nonzero, hits


@njit(cache=True, nogil=True)
def _decode_chunk(mask, flags, codes, literals, cells, found):
    """The inverse of :func:`_scan_chunk` into ``cells``, the nonzero items also into ``found``
    (at least as many as ``cells``); 0, or what did not match: 1 the bitmap (its count or
    padding), 2 the hit bits, 3 a distance beyond the chunk's first item, 4 a new value of zero."""
    n_hits = codes.shape[1]
    n_nonzero = literals.shape[1] + n_hits
    nonzero = hits = 0
    for i in range(mask.size * 8):
        if not (mask[i >> 3] >> (i & 7)) & 1:
            if i < cells.size:
                cells[i] = 0
            continue
        if i >= cells.size or nonzero == n_nonzero:
            return 1
        if (flags[nonzero >> 3] >> (nonzero & 7)) & 1:
            if hits == n_hits:
                return 2
            distance = np.int64(codes[0, hits]) | (np.int64(codes[1, hits]) << 8) | (np.int64(codes[2, hits]) << 16)
            if not 1 <= distance <= nonzero:
                return 3
            value = found[nonzero - distance]
            hits += 1
        else:
            new = nonzero - hits
            if new == literals.shape[1]:
                return 2
            value = np.uint64(0)
            for plane in range(8):
                value |= np.uint64(literals[plane, new]) << np.uint64(8 * plane)
            if value == 0:
                return 4
        found[nonzero] = value
        cells[i] = value
        nonzero += 1
    if nonzero != n_nonzero:
        return 1
    if hits != n_hits or (nonzero % 8 and flags[-1] >> (nonzero % 8)):
        return 2
    return 0
