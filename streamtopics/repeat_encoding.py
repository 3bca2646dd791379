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

A chunk's parts are one Zstandard frame and (format 6) the planes that do not compress, stored
raw beside it: the low mantissa bytes of sums of fractions are random, and Zstandard passing
over them spent 0.07 of the 1.0 processor-seconds of a save at V = 15,000 to store them as they
were. Whether a plane compresses is judged on a sample of it. Chunks are encoded and decoded on several threads (the
kernels and Zstandard release the GIL), and the comparisons are of bit patterns: decoding gives
back the same bytes, -0.0 and NaN payloads included.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd  # the same module for older Pythons

WHOLE = 1 << 24  # items of an array kept in one chunk (at most 2 ** 24: distances take three bytes)
CHUNK = 1 << 21  # items per chunk of a larger array, encoded on several threads (2 ** 22: 0.2 % smaller, spare buffers twice as large)
WHOLE_TABLE_BITS = 22  # most slots of a whole array's table; Reuters-21578 (one chunk): 2 ** 18 / 20 / 22 slots
# 24.3 / 23.7 / 23.4 MB; chunks of 2 ** 22 items: 24.4 MB
CHUNK_TABLE_BITS = 15  # slots of a chunk's table (512 kB): at V = 15,000 (112 million items) 2 ** 16 slots saved 0.9 % and took 1.08 times as long, 2 ** 18 1.3 times
_HASH = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of value * 2 ** 64 / phi
_LEVEL = 1
_HASH_LOG = 10  # Zstandard's match table, 2 ** 10 entries (level 1's own: 2 ** 14): the planes hold few long matches; V = 15,000 0.18 -> 0.16 processor-s, 0.1 % smaller (Reuters-21578 too)
_SAMPLE = 1 << 12  # bytes of a plane compressed to judge whether it compresses (2 ** 14: 0.03 s more of a save, same sizes)
_STORED = 0.97  # a plane whose sample does not compress below this share is stored raw (0.9: 0.03 s less at V = 15,000, Reuters-21578 1 % larger)
_PLANES = 11  # of a chunk: three of the distances, eight of the new values
_AHEAD = 2  # chunks of a large array encoded beyond the pool's threads ahead of the writer (each holds plane buffers)
_SPARE_WORK: queue.SimpleQueue = queue.SimpleQueue()  # (layout, work buffers) of large arrays' chunks, one a thread, between saves
_SPARE_PLANES: queue.SimpleQueue = queue.SimpleQueue()  # (layout, plane buffers): one a chunk encoded and not yet stored
_COMPRESSORS = threading.local()  # each thread's (see _compressors)


def encode(words: np.ndarray) -> dict[str, bytes]:
    """``{"frame0", "raw0", "frame1", ..., "index"}`` for a 1-D ``uint64`` array: see the
    module docstring and :func:`encode_on`."""
    with ThreadPoolExecutor(_threads(-(-words.size // _layout(words.size)[0]))) as pool:
        return {part: data if isinstance(data, bytes) else b"".join(data) for part, data in encode_on(pool, words)}


def encode_on(pool: ThreadPoolExecutor, words: np.ndarray) -> Iterator[tuple[str, bytes | list]]:
    """Start encoding ``words`` (1-D ``uint64``) chunk by chunk on ``pool`` now; yields
    ``("frame0", bytes)``, ``("raw0", planes)``, ``("frame1", bytes)``, ... in order, each as soon
    as its chunk is done (a writer stores one while the next are encoded), then ``("index",
    bytes)``. A raw part is a list of ``uint8`` arrays, the part their bytes one after the
    other, in the encoder's buffers: valid until the next part is asked for (the writer stores
    them from there: joined anew, their 96 MB at V = 15,000 were fresh pages every save). So a
    large array's chunks are encoded at most ``_AHEAD`` beyond the pool's threads ahead of the
    one last yielded. The index is ``int64``: items per chunk, then per chunk its frame's bytes,
    nonzero items, hits and the bits of the planes stored raw (bit ``p``: plane ``p`` of the three
    distance planes then the eight value planes)."""
    chunk, bits = _layout(words.size)
    starts = iter(range(0, words.size, chunk))
    room = min(chunk, words.size)
    nonzero_room = np.count_nonzero(words) if words.size <= chunk else room  # one chunk: its buffers fit its nonzero items

    def submit(start: int):
        return pool.submit(_encode_chunk, words[start:start + chunk], (bits, room, nonzero_room))

    futures = deque(submit(start) for start in itertools.islice(starts, numba.get_num_threads() + _AHEAD))
    return _frames_in_order(futures, starts, submit, chunk, (bits, room, nonzero_room))


def _frames_in_order(futures: deque, starts: Iterator[int], submit, chunk: int,
                     layout: tuple[int, int, int]) -> Iterator[tuple[str, bytes | list]]:
    """The parts of each chunk in order; once a chunk's raw planes are taken, its plane buffers
    go back and the next chunk is started."""
    index, c = [chunk], 0
    while futures:
        frame, raw, nonzero, hits, stored_raw, planes = futures.popleft().result()
        index += [len(frame), nonzero, hits, stored_raw]
        yield f"frame{c}", frame
        yield f"raw{c}", raw
        _give_back(_SPARE_PLANES, planes, layout)
        start = next(starts, None)
        if start is not None:
            futures.append(submit(start))
        c += 1
    yield "index", np.array(index, "<i8").tobytes()


def decode(parts: dict[str, bytes], size: int, raw_planes: bool = True) -> np.ndarray:
    """The ``uint64`` array of ``size`` items :func:`encode` stored (``raw_planes=False``: as
    formats 4 and 5 stored it, every plane in the frame); ValueError (or a Zstandard error) if
    the parts are not such an array."""
    columns = 4 if raw_planes else 3
    index = np.frombuffer(parts["index"], "<i8")
    if index.size < 1 or not 8 <= index[0] <= 1 << 24 or index[0] % 8:
        raise ValueError("a damaged chunk index")
    chunk = int(index[0])
    table = index[1:].reshape(-1, columns) if index.size % columns == 1 else None
    if table is None or table.shape[0] != -(-size // chunk) or (table < 0).any():
        raise ValueError(f"a chunk index of {index.size} numbers for {size} items")
    if raw_planes and (table[:, 3] >> _PLANES).any():
        raise ValueError("a chunk index with planes that do not exist")
    frames, raws = _frames(parts, table[:, 0], raw_planes)
    flat, scratch = np.empty(size, np.uint64), threading.local()

    def decode_chunk(c):
        cells = flat[c * chunk:(c + 1) * chunk]
        nonzero, hits = int(table[c, 1]), int(table[c, 2])
        if hits > nonzero or nonzero > cells.size:
            raise ValueError(f"chunk {c}: {nonzero} nonzero items and {hits} hits of {cells.size}")
        payload = np.frombuffer(zstd.decompress(frames[c]), np.uint8)
        codes, literals = np.empty((3, hits), np.uint8), np.empty((8, nonzero - hits), np.uint8)
        stored_raw = int(table[c, 3]) if raw_planes else 0
        raw = np.frombuffer(raws[c], np.uint8) if raw_planes else payload[:0]
        mask_bytes, flag_bytes = (cells.size + 7) // 8, (nonzero + 7) // 8
        rows = [*codes, *literals]
        raw_bytes = sum(row.size for plane, row in enumerate(rows) if stored_raw >> plane & 1)
        packed_bytes = mask_bytes + flag_bytes + sum(row.size for row in rows) - raw_bytes
        if payload.size != packed_bytes or raw.size != raw_bytes:
            raise ValueError(f"chunk {c}: {payload.size} and {raw.size} bytes, not {packed_bytes} and {raw_bytes}")
        packed_at, raw_at = mask_bytes + flag_bytes, 0
        for plane, row in enumerate(rows):
            if stored_raw >> plane & 1:
                row[:], raw_at = raw[raw_at:raw_at + row.size], raw_at + row.size
            else:
                row[:], packed_at = payload[packed_at:packed_at + row.size], packed_at + row.size
        if not hasattr(scratch, "found"):
            scratch.found = np.empty(min(chunk, size), np.uint64)
        problem = _decode_chunk(payload[:mask_bytes], payload[mask_bytes:mask_bytes + flag_bytes], codes, literals,
                                cells, scratch.found)
        if problem:
            raise ValueError(f"chunk {c}: {('', 'the bitmap', 'the hits', 'a distance', 'a new zero')[problem]} "
                             "does not match")

    with ThreadPoolExecutor(_threads(table.shape[0])) as pool:
        list(pool.map(decode_chunk, range(table.shape[0])))
    return flat


def _frames(parts: dict[str, bytes], lengths: np.ndarray, raw_planes: bool) -> tuple[list, list]:
    """Each chunk's frame and raw planes: the parts ``frame0``, ``raw0``, ``frame1``, ...
    (format 6; formats 5: frames only), or slices of the one part ``frames`` (format 4);
    ValueError unless they are the index's."""
    if "frames" in parts and not raw_planes:
        joined, ends = memoryview(parts["frames"]), np.cumsum(lengths)
        if len(joined) != (ends[-1] if lengths.size else 0) or len(parts) != 2:
            raise ValueError("the frames do not match the chunk index")
        return [joined[end - length:end] for end, length in zip(ends, lengths)], []
    frames = [parts.get(f"frame{c}") for c in range(lengths.size)]
    raws = [parts.get(f"raw{c}") for c in range(lengths.size)] if raw_planes else []
    expected = lengths.size * (2 if raw_planes else 1) + 1
    if (len(parts) != expected or any(f is None or len(f) != n for f, n in zip(frames, lengths))
            or any(r is None for r in raws)):
        raise ValueError("the frames do not match the chunk index")
    return frames, raws


def _layout(size: int) -> tuple[int, int]:
    """Items per chunk and the table's bits for an array of ``size`` items: a small array is one
    chunk with a table of about a quarter of its items (more repeats found; the time is small
    anyway), a large one chunks on several threads with a table that stays in the caches."""
    if size <= WHOLE:
        return WHOLE, min(WHOLE_TABLE_BITS, max(8, size.bit_length() - 2))
    return CHUNK, CHUNK_TABLE_BITS


def _threads(tasks: int) -> int:
    return max(1, min(tasks, numba.get_num_threads()))


def _encode_chunk(words: np.ndarray, layout: tuple[int, int, int]) -> tuple:
    """One chunk's Zstandard frame (bitmap, hit bits, then the distance and new value planes
    that compress), its raw planes (those that do not, in order: views into its plane buffers),
    its nonzero items, its hits, the bits of its raw planes and its plane buffers. ``layout``:
    the table's bits (2 ** bits slots), the items of the largest chunk and its most nonzero
    items, which the buffers are sized for."""
    work = _buffers(_SPARE_WORK, _new_work_buffers, layout)
    planes = _buffers(_SPARE_PLANES, _new_plane_buffers, layout)
    try:
        return *_encode_in(words, layout[0], work, planes), planes
    finally:
        _give_back(_SPARE_WORK, work, layout)


def _buffers(spares: queue.SimpleQueue, new, layout: tuple[int, int, int]) -> tuple:
    """A set of an encoder's buffers for ``layout`` from ``spares`` (``_SPARE_WORK`` or
    ``_SPARE_PLANES``) for a chunk of a large array (kept between saves: allocated anew for every
    save, their fresh pages cost 0.03-0.6 s of kernel time per save at V = 15,000), else
    ``new(*layout)``."""
    if _kept(layout):
        try:
            kept_layout, buffers = spares.get_nowait()
            if kept_layout == layout:  # not one of another layout (the kernels do not check bounds)
                return buffers
        except queue.Empty:
            pass
    return new(*layout)


def _new_work_buffers(bits: int, room: int, nonzero_room: int) -> tuple:
    """The repeat table, the nonzero items and the two bitmaps (nonzero items, hits)."""
    return np.empty((1 << bits, 2), np.uint64), np.empty(nonzero_room + 1, np.uint64), np.empty((2, (room + 7) // 8), np.uint8)


def _new_plane_buffers(bits: int, room: int, nonzero_room: int) -> tuple:
    """The distance planes and the new value planes."""
    return np.empty((3, nonzero_room), np.uint8), np.empty((8, nonzero_room), np.uint8)


def _give_back(spares: queue.SimpleQueue, buffers: tuple, layout: tuple[int, int, int]) -> None:
    if _kept(layout):
        spares.put((layout, buffers))


def _kept(layout: tuple[int, int, int]) -> bool:
    """Whether buffers of ``layout`` are kept between saves: those of a large array's chunks."""
    return layout[:2] == (CHUNK_TABLE_BITS, CHUNK)


def _encode_in(words: np.ndarray, bits: int, work: tuple, planes: tuple) -> tuple[bytes, list, int, int, int]:
    (table, nonzero_items, bitmaps), (codes, literals) = work, planes
    mask = bitmaps[0, :(words.size + 7) // 8]
    nonzero = _compact_nonzero(words, mask, nonzero_items)
    flags = bitmaps[1, :(nonzero + 7) // 8]
    hits = _code_repeats(nonzero_items[:nonzero], bits, table, flags, codes, literals)
    packed, raw, stored_raw = [mask, flags], [], 0
    for plane, row in enumerate([*codes[:, :hits], *literals[:, :nonzero - hits]]):
        if _compresses(row):
            packed.append(row)
        else:
            raw.append(row)
            stored_raw |= 1 << plane
    compressor = _compressors().frames
    frame = b"".join(compressor.compress(piece) for piece in packed) + compressor.flush()  # flush ends the frame
    return frame, raw, nonzero, hits, stored_raw


def _compresses(plane: np.ndarray) -> bool:
    """Whether a plane is worth Zstandard's time: a short one always, else when a sample of it
    compresses below ``_STORED`` of its size."""
    if plane.size < 2 * _SAMPLE:
        return True
    sample = _compressors().samples.compress(plane[:_SAMPLE], mode=zstd.ZstdCompressor.FLUSH_FRAME)
    return len(sample) < _STORED * _SAMPLE


def _compressors():
    """This thread's Zstandard compressors, of chunks' frames and of samples, kept: each made
    anew took its memory afresh (a new one for each of a save's 600 samples: 0.02 processor-s)."""
    if not hasattr(_COMPRESSORS, "frames"):
        _COMPRESSORS.frames = zstd.ZstdCompressor(options={zstd.CompressionParameter.compression_level: _LEVEL,
                                                           zstd.CompressionParameter.hash_log: _HASH_LOG,
                                                           zstd.CompressionParameter.checksum_flag: 1})
        _COMPRESSORS.samples = zstd.ZstdCompressor(level=_LEVEL)
    return _COMPRESSORS


@njit(cache=True, nogil=True)
def _compact_nonzero(words, mask, nonzero_items):
    """Set ``mask``'s bits of the nonzero items and copy those items to the front of
    ``nonzero_items``; returns how many. Branch-free (a branch on each item's zero test
    mispredicted often enough to take most of a scan's time), and each byte of the bitmap is
    built in a register and stored once (an or into memory per item chained every eighth item
    behind the previous store: V = 15,000, 0.19 against 0.14 s a pass)."""
    count = 0
    for byte_at in range(mask.size):
        byte = np.uint8(0)
        for bit in range(min(8, words.size - 8 * byte_at)):
            value = words[8 * byte_at + bit]
            nonzero_items[count] = value  # overwritten by the next item unless this one is kept
            kept = value != 0
            byte |= np.uint8(kept) << np.uint8(bit)
            count += kept
        mask[byte_at] = byte
    return count


@njit(cache=True, nogil=True)
def _code_repeats(items, bits, table, flags, codes, literals):
    """Fill ``flags`` and the planes ``codes`` and ``literals`` for the nonzero ``items``, with a
    ``table`` of 2 ** ``bits`` rows (zeroed here): a value and where it last occurred among the
    items (read only where the value matched), side by side so one cache line holds both;
    returns the hits. Branch-free like :func:`_compact_nonzero`: every item writes its distance
    and its value, a hit moves the distances' end on, a new value the values' end; the new
    values are gathered at the front of ``items`` (overwritten) and split into planes after (one
    store an item in the loop, not eight: V = 15,000, 0.26 against 0.14 s a pass)."""
    table[:, 0] = 0
    shift = np.uint64(64 - bits)
    hits = 0
    for byte_at in range(flags.size):
        byte = np.uint8(0)
        for bit in range(min(8, items.size - 8 * byte_at)):
            i = 8 * byte_at + bit
            value = items[i]
            slot = (value * _HASH) >> shift
            hit = table[slot, 0] == value
            distance = i - np.int64(table[slot, 1])
            for plane in range(3):
                codes[plane, hits] = np.uint8((distance >> (8 * plane)) & 0xFF)
            items[i - hits] = value  # i - hits <= i: an item already read
            byte |= np.uint8(hit) << np.uint8(bit)
            hits += hit
            table[slot, 0] = value
            table[slot, 1] = np.uint64(i)
        flags[byte_at] = byte
    for plane in range(8):
        row, shift_by = literals[plane], np.uint64(8 * plane)
        for new in range(items.size - hits):
            row[new] = np.uint8((items[new] >> shift_by) & np.uint64(0xFF))
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
