"""State files are small and lossless (issue 48, item 1): format 6 encodes the arrays
(streamtopics/array_encoding.py, streamtopics/repeat_encoding.py), every encoding gives back the
same bytes, a loaded model's arrays are the saved ones bit for bit, and a model saved mid-stream,
loaded and fed the rest ends where the uninterrupted one does. (With forgetting on it does not,
by rounding, on main before format 3 too: saving flushes the pending batch, and the decay weights
are computed per batch.)"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numba
import numpy as np
import pytest

from streamtopics import StreamingTopicModel, repeat_encoding, state
from streamtopics.array_encoding import decode, encode
from streamtopics.state import FORMAT_VERSION, read_state, write_state

WORDS = [f"w{i}" for i in range(2000)]
DATA = Path(__file__).parent / "data"
SETTINGS = dict(anchor_method="hybrid", anchor_min_df=2, reservoir_size=100, refresh_every=200,
                refine_iterations=2, refine_sweeps=1)


def documents(n: int, seed: int) -> list[dict]:
    """Short documents over 2,000 words, each within one of twenty subjects: a sparse triangle."""
    rng = np.random.default_rng(seed)
    return [{WORDS[100 * rng.integers(20) + j]: float(rng.integers(1, 4)) for j in rng.choice(100, 8, replace=False)}
            for _ in range(n)]


def model_arrays(model) -> dict:
    arrays = model.ingest.state_dict()[0]
    arrays.update(model.lineage.state_dict(model.ingest.vocabulary)[0])
    return arrays


def assert_same_bits(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert (x.dtype, x.shape, x.tobytes()) == (y.dtype, y.shape, y.tobytes()), name


def test_a_state_file_is_at_most_a_quarter_of_its_arrays(tmp_path):
    model = StreamingTopicModel(6, WORDS, anchor_min_df=2)
    model.learn_many(documents(1000, 1))
    model.refresh()
    raw = sum(np.asarray(array).nbytes for array in model_arrays(model).values())
    path = model.save(tmp_path / "model.state")
    assert path.stat().st_size <= raw / 4, (path.stat().st_size, raw)


def test_every_array_comes_back_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    sparse = np.zeros(200_000)
    sparse[rng.choice(sparse.size, 5000, replace=False)] = rng.standard_normal(5000)
    sparse[[3, 10, 199_999]] = [-0.0, np.nan, np.inf]
    arrays = {"sparse": sparse, "dense": rng.standard_normal((300, 7)), "zeros": np.zeros(100_003),
              "ints": np.arange(70_000, dtype=np.int64) % 5, "scalar": np.int64(7), "unit": np.str_("stream"),
              "empty": np.zeros(0, np.int32), "flags": rng.random(9) > 0.5, "transposed": rng.random((5, 4)).T}
    path = write_state(tmp_path / "a.state", arrays, {"k": [1, "x"]})
    loaded, meta = read_state(path)
    assert meta == {"k": [1, "x"]}
    assert_same_bits(arrays, loaded)
    assert all(array.flags.writeable for array in loaded.values())


def test_a_model_comes_back_bit_for_bit_in_the_new_format(tmp_path):
    model = StreamingTopicModel(6, WORDS, **SETTINGS)
    model.learn_many(documents(500, 2), stream_times=[float(t) for t in range(500)])
    path = model.save(tmp_path / "model.state")
    with np.load(path) as archive:
        assert json.loads(bytes(archive["__manifest__"]))["format_version"] == FORMAT_VERSION == 6
    assert_same_bits(model_arrays(model), model_arrays(StreamingTopicModel.load(path)))


def test_a_resumed_model_ends_where_the_uninterrupted_one_does(tmp_path):
    first, rest = documents(500, 3), documents(500, 4)
    uninterrupted = StreamingTopicModel(6, WORDS, **SETTINGS)
    uninterrupted.learn_many(first + rest, stream_times=[float(t) for t in range(1000)])
    interrupted = StreamingTopicModel(6, WORDS, **SETTINGS)
    interrupted.learn_many(first, stream_times=[float(t) for t in range(500)])
    resumed = StreamingTopicModel.load(interrupted.save(tmp_path / "model.state"))
    resumed.learn_many(rest, stream_times=[float(t) for t in range(500, 1000)])
    assert resumed.snapshot.version == uninterrupted.snapshot.version == 5
    assert_same_bits(model_arrays(uninterrupted), model_arrays(resumed))


def odd_bit_patterns(n: int, seed: int) -> np.ndarray:
    """``n`` doubles, mostly zero, with repeats near and far, -0.0, NaNs with payloads, signalling
    NaNs, infinities and denormals: what a decoder must give back byte for byte."""
    rng = np.random.default_rng(seed)
    words = np.zeros(n, np.uint64)
    cells = rng.choice(n, n // 3, replace=False)
    words[cells] = np.round(rng.random(cells.size), 2).view(np.uint64)  # many repeats
    words[cells[::5]] = rng.random(cells[::5].size).view(np.uint64)  # and values seen once
    odd = [0x8000000000000000, 0x7FF8000000000001, 0xFFF0000000000ABC, 0x7FF0000000000001,
           0x7FF0000000000000, 0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x8000000000000001]
    words[rng.choice(n, 64)] = np.resize(np.array(odd, np.uint64), 64)
    return words.view(np.float64)


@pytest.mark.parametrize("array", [
    odd_bit_patterns(300_001, 1),
    odd_bit_patterns(200_000, 2).view(np.int64).reshape(1000, 200),
    odd_bit_patterns(100_000, 3).view(np.complex64),
    np.zeros(70_000), np.full(70_001, np.nan), np.full(70_000, -0.0), np.arange(1.0, 70_001.0),
    odd_bit_patterns(100_000, 4).view(np.float32), odd_bit_patterns(100_000, 5).view(np.int16),
    odd_bit_patterns(80_000, 6).view(np.complex128), np.zeros(0), np.zeros((0, 3), np.int32),
    np.arange(100_000, dtype=np.uint8), np.array([True, False] * 40_000),
    np.array([5, -3, 2 ** 31 - 1, -2 ** 31] * 5000, np.int32), np.arange(0, 3 * 70_000, 3, dtype=">i4")],
    ids=lambda array: f"{array.dtype}{list(array.shape)}")
def test_an_encoding_gives_back_the_same_bytes(array, monkeypatch):
    monkeypatch.setattr(repeat_encoding, "WHOLE", 1 << 14)  # many chunks, one of them short
    monkeypatch.setattr(repeat_encoding, "CHUNK", 1 << 14)
    encoding, parts = encode(array)
    back = decode(encoding, parts, array.dtype.str, list(array.shape))
    assert (back.dtype, back.shape, back.tobytes()) == (array.dtype, array.shape, array.tobytes())
    assert back.flags.writeable and back.flags.c_contiguous


def test_values_that_share_a_slot_come_back(monkeypatch):
    """Values that hash to one slot of the repeat table take it from each other in turn."""
    bits = repeat_encoding._layout(90_000)[1]
    slot = lambda values: (values * repeat_encoding._HASH) >> np.uint64(64 - bits)
    candidates = np.arange(1, 5_000_000, dtype=np.uint64) << np.uint64(20)
    same = candidates[slot(candidates) == slot(candidates[:1])][:3]
    assert same.size == 3
    array = np.tile(same, 30_000).view(np.float64)
    encoding, parts = encode(array)
    assert encoding == "repeats_raw"
    assert decode(encoding, parts, "<f8", [array.size]).tobytes() == array.tobytes()


def test_planes_that_do_not_compress_are_stored_raw_and_come_back(monkeypatch):
    """Random low mantissa bytes skip Zstandard (stored raw beside the frame); the sign and
    exponent bytes, and every byte of values with short mantissas, are compressed. (Planes 0-2
    are the distances of repeats, 3-10 the bytes of new values, lowest first.)"""
    monkeypatch.setattr(repeat_encoding, "WHOLE", 1 << 16)
    monkeypatch.setattr(repeat_encoding, "CHUNK", 1 << 16)
    rng = np.random.default_rng(11)
    for values, random_bytes in ((rng.random(200_000), True), (np.round(rng.random(200_000), 2), False)):
        encoding, parts = encode(values)
        index = np.frombuffer(parts["index"], "<i8")[1:].reshape(-1, 4)
        stored_raw = np.bitwise_or.reduce(index[:, 3])
        assert bool(stored_raw >> 3) == random_bytes and not stored_raw >> 10 & 1
        if random_bytes:
            assert stored_raw >> 3 & 1 and sum(len(parts[f"raw{c}"]) for c in range(index.shape[0])) > 0.5 * values.nbytes
        assert decode(encoding, parts, "<f8", [values.size]).tobytes() == values.tobytes()


def format_5_parts() -> dict:
    """The stored parts of ``packed`` in ``tests/data/format5.state`` (seven chunks, every plane in the frame)."""
    with np.load(DATA / "format5.state") as archive:
        return {name.split("#")[1]: bytes(archive[name]) for name in archive.files if name.startswith("packed#")}


def test_format_5_and_format_4_repeats_still_decode():
    """Formats 4 and 5 kept every plane in the frame; format 4 stored the frames as one part."""
    parts, expected = format_5_parts(), odd_bit_patterns(100_000, 9)
    assert decode("repeats", parts, "<f8", [expected.size]).tobytes() == expected.tobytes()
    frames = [parts[f"frame{c}"] for c in range(len(parts) - 1)]
    assert len(frames) == 7
    joined = {"index": parts["index"], "frames": b"".join(frames)}
    assert decode("repeats", joined, "<f8", [expected.size]).tobytes() == expected.tobytes()
    for bad in (dict(joined, frames=joined["frames"][:-1]), dict(parts, raw0=b"")):
        with pytest.raises(ValueError):
            decode("repeats", bad, "<f8", [expected.size])


def test_repeats_parts_that_do_not_fit_are_a_value_error(monkeypatch):
    """Parts whose checksums hold but which do not make the array (a writer's bug, not damage)
    raise, never write outside the array."""
    monkeypatch.setattr(repeat_encoding, "WHOLE", 1 << 14)
    monkeypatch.setattr(repeat_encoding, "CHUNK", 1 << 14)
    monkeypatch.setattr(repeat_encoding, "_SAMPLE", 1 << 10)
    array = np.concatenate([odd_bit_patterns(100_000, 7), np.random.default_rng(7).random(40_000)])
    encoding, parts = encode(array)
    index = np.frombuffer(parts["index"], "<i8")
    raw = next(c for c in range(9) if parts[f"raw{c}"])
    damaged = [dict(parts, frame0=parts["frame0"][:-1]), dict(parts, index=parts["index"][:-8]),
               {k: v for k, v in parts.items() if k != "frame1"}, {k: v for k, v in parts.items() if k != "raw1"},
               dict(parts, **{f"raw{raw}": parts[f"raw{raw}"][:-1]}), dict(parts, **{f"raw{raw}": b""})]
    # index: items per chunk, then per chunk: frame bytes, nonzero items, hits, planes stored raw
    for position, delta in ((0, 8), (0, 1), (0, 1 << 24), (1, 1), (2, 1), (2, -1), (3, 1), (3, -1), (4, 1),
                            (4, 1 << 11), (4 * raw + 4, -1)):
        changed = index.copy()
        changed[position] += delta
        damaged.append(dict(parts, index=changed.tobytes()))
    for bad in damaged:
        with pytest.raises(Exception) as error:
            decode(encoding, bad, "<f8", [array.size])
        assert isinstance(error.value, ValueError) or "zstd" in type(error.value).__module__, error.value


def test_spare_buffers_serve_only_chunks_of_their_size(monkeypatch):
    """The encoder keeps its buffers between saves: a later array in larger chunks must not be
    given the smaller chunks' buffers (the kernels do not check bounds)."""
    array = odd_bit_patterns(300_000, 12)
    for chunk in (1 << 14, 1 << 16, 1 << 14):
        monkeypatch.setattr(repeat_encoding, "WHOLE", chunk)
        monkeypatch.setattr(repeat_encoding, "CHUNK", chunk)
        encoding, parts = encode(array)
        assert np.frombuffer(parts["index"], "<i8")[0] == chunk
        assert decode(encoding, parts, "<f8", [array.size]).tobytes() == array.tobytes()
    assert not repeat_encoding._SPARE_WORK.empty() and not repeat_encoding._SPARE_PLANES.empty()


def test_raw_planes_stored_from_buffers_that_serve_later_chunks_come_back(tmp_path, monkeypatch):
    """The writer stores each chunk's raw planes from the encoder's buffers, which then serve a
    later chunk: with many more chunks than buffer sets every chunk comes back, and no more sets
    are kept than chunks encoded ahead."""
    monkeypatch.setattr(repeat_encoding, "WHOLE", 1 << 14)
    monkeypatch.setattr(repeat_encoding, "CHUNK", 1 << 14)
    while not repeat_encoding._SPARE_PLANES.empty():
        repeat_encoding._SPARE_PLANES.get_nowait()
    random = np.random.default_rng(7).random(300_001)  # 19 chunks, their low value bytes raw
    arrays = {"random": random, "small": np.arange(5.0)}
    path = write_state(tmp_path / "a.state", arrays, {})
    with np.load(path) as archive:
        assert min(archive[f"random#raw{c}"].size for c in range(18)) > 0  # the last, short, compressed whole
    assert_same_bits(arrays, read_state(path)[0])
    kept = 0
    while not repeat_encoding._SPARE_PLANES.empty():
        repeat_encoding._SPARE_PLANES.get_nowait()
        kept += 1
    assert 1 <= kept <= numba.get_num_threads() + repeat_encoding._AHEAD


def test_a_failed_sync_during_the_save_fails_it(tmp_path, monkeypatch):
    """The writer syncs on a thread of its own while it writes: an error the disk reports to one
    of those syncs (Linux reports it once) fails the save and leaves no file, as the final sync's would."""
    real, calls = os.fdatasync, []

    def first_fails(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(state, "_SYNC_BYTES", 1 << 10)
    monkeypatch.setattr(state.os, "fdatasync", first_fails)
    with pytest.raises(OSError):
        write_state(tmp_path / "s.state", {"a": np.random.default_rng(0).random(300_000)}, {})
    assert len(calls) >= 1 and not list(tmp_path.iterdir())
