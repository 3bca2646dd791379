"""An array of 8-byte items stored as its nonzero items, each either a repeat of a recent one
(coded by how many items back it last occurred) or new (stored byte plane by byte plane), in
chunks compressed in parallel.

The co-occurrence triangle's nonzero cells are sums of per-document fractions: their mantissas
are random bits, but half of them equal another cell's (a pair seen in one document only gets
that document's fraction, shared by its other pairs), mostly a nearby one. An array of at most
``WHOLE`` items is one chunk, a larger one chunks of ``CHUNK`` items. Each chunk is scanned once:
a bitmap of the nonzero items; for each nonzero item a bit saying whether it repeats a value
still in the encoder's table of recent values (slots addressed by a hash of the value: see
:func:`_layout`), then either the distance back to the value's last occurrence among the chunk's
nonzero items (three bytes, by plane) or the value itself. The decoder needs no table: it copies
the item that distance back. New values are split into byte planes, so Zstandard codes the sign
and exponent bytes (nearly constant) apart from the random low mantissa bytes. Reuters-21578's
triangle (11.7 million items): 23.4 MB against 28.9 MB for format 3 (Zstandard level 1 over the
nonzero items; byte planes of all of them: 34.4 MB, as repeats are lost).

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

WHOLE = 1 << 24  # items of an array kept in one chunk (at most 2 ** 24: distances take three bytes)
CHUNK = 1 << 22  # items per chunk of a larger array: chunks encode on several threads
WHOLE_TABLE_BITS = 22  # most slots of a whole array's table; Reuters-21578 (one chunk): 2 ** 18 / 20 / 22 slots
# 24.3 / 23.7 / 23.4 MB; chunks of 2 ** 22 items: 24.4 MB
CHUNK_TABLE_BITS = 16  # slots of a chunk's table (1 MB): at V = 15,000 (112 million items) 2 ** 18 slots took 1.2 times as long for 1.5 % less, 2 ** 20 2.6 times
_HASH = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of value * 2 ** 64 / phi
_LEVEL = 1


def encode(words: np.ndarray) -> dict[str, bytes]:
    """``{"index", "frame0", "frame1", ...}`` for a 1-D ``uint64`` array: see the module
    docstring. The index is ``int64``: items per chunk, then per chunk its frame's bytes, nonzero
    items and hits. Each chunk's frame is a part of its own (no copy joins them; they are hashed
    apart, on several threads)."""
    chunk, bits = _layout(words.size)
    starts, scratch = range(0, words.size, chunk), threading.local()
    room = min(chunk, words.size)
    nonzero_room = np.count_nonzero(words) if len(starts) == 1 else room  # one chunk: its buffers fit its nonzero items
    with ThreadPoolExecutor(_threads(len(starts))) as pool:
        chunks = list(pool.map(lambda start: _encode_chunk(words[start:start + chunk], bits, scratch, room,
                                                           nonzero_room), starts))
    index = [chunk] + [n for frame, nonzero, hits in chunks for n in (len(frame), nonzero, hits)]
    return {"index": np.array(index, "<i8").tobytes(), **{f"frame{c}": frame for c, (frame, _, _) in enumerate(chunks)}}


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
    frames = _frames(parts, table[:, 0])
    flat, scratch = np.empty(size, np.uint64), threading.local()

    def decode_chunk(c):
        cells = flat[c * chunk:(c + 1) * chunk]
        nonzero, hits = int(table[c, 1]), int(table[c, 2])
        if hits > nonzero or nonzero > cells.size:
            raise ValueError(f"chunk {c}: {nonzero} nonzero items and {hits} hits of {cells.size}")
        payload = np.frombuffer(zstd.decompress(frames[c]), np.uint8)
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


def _frames(parts: dict[str, bytes], lengths: np.ndarray) -> list:
    """Each chunk's frame: the parts ``frame0``, ``frame1``, ... (format 5), or slices of the
    one part ``frames`` (format 4); ValueError unless their lengths are the index's."""
    if "frames" in parts:
        joined, ends = memoryview(parts["frames"]), np.cumsum(lengths)
        if len(joined) != (ends[-1] if lengths.size else 0):
            raise ValueError("the frames do not match the chunk index")
        return [joined[end - length:end] for end, length in zip(ends, lengths)]
    frames = [parts.get(f"frame{c}") for c in range(lengths.size)]
    if len(parts) != lengths.size + 1 or any(f is None or len(f) != n for f, n in zip(frames, lengths)):
        raise ValueError("the frames do not match the chunk index")
    return frames


def _layout(size: int) -> tuple[int, int]:
    """Items per chunk and the table's bits for an array of ``size`` items: a small array is one
    chunk with a table of about a quarter of its items (more repeats found; the time is small
    anyway), a large one chunks on several threads with a table that stays in the caches."""
    if size <= WHOLE:
        return WHOLE, min(WHOLE_TABLE_BITS, max(8, size.bit_length() - 2))
    return CHUNK, CHUNK_TABLE_BITS


def _threads(tasks: int) -> int:
    return max(1, min(tasks, numba.get_num_threads()))


def _encode_chunk(words: np.ndarray, bits: int, scratch: threading.local, room: int,
                  nonzero_room: int) -> tuple[bytes, int, int]:
    """One chunk's Zstandard frame (bitmap, hit bits, distances by byte plane, new values by
    byte plane), its nonzero items and its hits, with a table of 2 ** ``bits`` slots. The buffers
    (for chunks of up to ``room`` items, ``nonzero_room`` of them nonzero) are the thread's
    ``scratch``, one set a thread: allocating them (the table too) for each chunk kept two threads
    slower than one."""
    if not hasattr(scratch, "buffers"):
        scratch.buffers = (np.empty((1 << bits, 2), np.uint64), np.empty(nonzero_room + 1, np.uint64),
                           np.empty((2, (room + 7) // 8), np.uint8), np.empty((3, nonzero_room), np.uint8),
                           np.empty((8, nonzero_room), np.uint8))
    table, nonzero_items, bitmaps, codes, literals = scratch.buffers
    bitmaps[:] = 0
    mask, flags = bitmaps[0, :(words.size + 7) // 8], bitmaps[1]
    nonzero = _compact_nonzero(words, mask, nonzero_items)
    hits = _code_repeats(nonzero_items[:nonzero], bits, table, flags, codes, literals)
    compressor = zstd.ZstdCompressor(options={zstd.CompressionParameter.compression_level: _LEVEL,
                                              zstd.CompressionParameter.checksum_flag: 1})
    pieces = [mask, flags[:(nonzero + 7) // 8], *codes[:, :hits], *literals[:, :nonzero - hits]]
    frame = b"".join(compressor.compress(piece) for piece in pieces) + compressor.flush()
    return frame, nonzero, hits


@njit(cache=True, nogil=True)
def _compact_nonzero(words, mask, nonzero_items):
    """Set ``mask``'s bit of each nonzero item (``mask`` zeroed) and copy those items to the
    front of ``nonzero_items``; returns how many. Branch-free: a branch on each item's zero test
    mispredicted often enough to take most of a scan's time (V = 15,000: 0.47 s against 0.31 s
    for this pass and :func:`_code_repeats`)."""
    count = 0
    for i in range(words.size):
        value = words[i]
        nonzero_items[count] = value  # overwritten by the next item unless this one is kept
        kept = value != 0
        mask[i >> 3] |= np.uint8(kept) << np.uint8(i & 7)
        count += kept
    return count


@njit(cache=True, nogil=True)
def _code_repeats(items, bits, table, flags, codes, literals):
    """Fill the zeroed ``flags`` and the planes ``codes`` and ``literals`` for the nonzero
    ``items``, with a ``table`` of 2 ** ``bits`` rows (zeroed here): a value and where it last
    occurred among the items (read only where the value matched), side by side so one cache line
    holds both; returns the hits."""
    table[:, 0] = 0
    shift = np.uint64(64 - bits)
    hits = 0
    for i in range(items.size):
        value = items[i]
        slot = (value * _HASH) >> shift
        if table[slot, 0] == value:
            flags[i >> 3] |= np.uint8(1 << (i & 7))
            distance = i - np.int64(table[slot, 1])
            for plane in range(3):
                codes[plane, hits] = np.uint8((distance >> (8 * plane)) & 0xFF)
            hits += 1
        else:
            table[slot, 0] = value
            new = i - hits
            for plane in range(8):
                literals[plane, new] = np.uint8((value >> np.uint64(8 * plane)) & np.uint64(0xFF))
        table[slot, 1] = np.uint64(i)
    return hits


@njit(cache=True, nogil=True)
def _decode_chunk(mask, flags, codes, literals, cells, found):
    """The inverse of :func:`_compact_nonzero` and :func:`_code_repeats` into ``cells``, the nonzero items also into ``found``
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
