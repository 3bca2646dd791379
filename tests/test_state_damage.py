"""Any damage to a state file is recognised as damage (issue 15, item 3): loading raises
CorruptStateError -- never another exception, never a silently different model -- so a consumer
sets the file aside and uses the previous checkpoint. A byte-flip and truncation fuzz."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from streamtopics import StreamingTopicModel
from streamtopics.state import CorruptStateError

WORDS = [f"w{i}" for i in range(24)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(3)
    model = StreamingTopicModel(3, WORDS, anchor_min_df=1, anchor_method="hybrid", n_projections=8,
                                reservoir_size=50, refine_iterations=2)
    for i in range(300):
        model.learn_one({WORDS[j]: float(rng.integers(1, 4)) for j in rng.choice(24, 6, replace=False)}, key=i)
    model.refresh()
    path = model.save(tmp_path_factory.mktemp("state") / "model.state")
    return path, path.read_bytes(), model


def load_or_corrupt(path, data: bytes):
    """Load ``data`` written at ``path``: the model, or None if it was recognised as damaged."""
    path.write_bytes(data)
    try:
        return StreamingTopicModel.load(path)
    except CorruptStateError:
        return None


def same_model(a, b) -> bool:
    return (a.get_config() == b.get_config() and a.vocabulary == b.vocabulary
            and np.array_equal(a.statistics().packed, b.statistics().packed)
            and np.array_equal(a.snapshot.topic_word, b.snapshot.topic_word))


def test_a_missing_file_is_not_damage(tmp_path):
    with pytest.raises(FileNotFoundError):
        StreamingTopicModel.load(tmp_path / "missing.state")


def test_the_zip_flags_that_escaped_as_other_errors(saved, tmp_path):
    """The central directory's "encrypted" flag and "version needed to extract" made the zip
    reader raise RuntimeError and NotImplementedError, which stopped a consumer on every start.
    (The same fields in a member's local header are not read: harmless there.)"""
    path, data, original = saved
    central = data.index(b"PK\x01\x02")
    encrypted = bytearray(data)
    encrypted[central + 8] |= 0x01
    assert load_or_corrupt(tmp_path / "a.state", bytes(encrypted)) is None
    version = bytearray(data)
    version[central + 6:central + 8] = struct.pack("<H", 99)  # needs zip version 9.9
    assert load_or_corrupt(tmp_path / "b.state", bytes(version)) is None
    method = bytearray(data)
    method[central + 10:central + 12] = struct.pack("<H", 77)  # an unknown compression method
    assert load_or_corrupt(tmp_path / "c.state", bytes(method)) is None
    local = data.index(b"PK\x03\x04")
    for offset in (4, 6):
        flipped = bytearray(data)
        flipped[local + offset] ^= 0x01
        model = load_or_corrupt(tmp_path / "d.state", bytes(flipped))
        assert model is None or same_model(model, original)


def test_byte_flips_and_truncations_are_damage_or_harmless(saved, tmp_path):
    path, data, original = saved
    rng = random.Random(15)
    positions = sorted(set(range(0, 200)) | set(range(len(data) - 300, len(data)))
                       | set(rng.sample(range(len(data)), min(1200, len(data)))))
    target = tmp_path / "fuzz.state"
    harmless = 0
    for position in positions:
        damaged = bytearray(data)
        damaged[position] ^= 1 << rng.randrange(8)
        model = load_or_corrupt(target, bytes(damaged))
        if model is not None:  # a flip in bytes nothing reads (zip padding, unused header fields)
            assert same_model(model, original), position
            harmless += 1
    for length in sorted(rng.sample(range(len(data)), 150)):
        assert load_or_corrupt(target, data[:length]) is None, length
    assert harmless < len(positions) / 4


def test_byte_flips_in_an_encoded_triangle_are_damage(tmp_path):
    """A large 8-byte array is stored as its nonzero items, repeats coded (streamtopics/repeat_encoding.py):
    a flip anywhere in them is damage too."""
    from streamtopics.state import read_state, write_state

    triangle = np.zeros(100_001)
    triangle[::7] = np.arange(14_286) / 3.0
    data = write_state(tmp_path / "t.state", {"stats.packed": triangle}, {"n": 1}).read_bytes()
    rng = random.Random(48)
    target = tmp_path / "fuzz.state"
    for position in rng.sample(range(len(data)), 600):
        damaged = bytearray(data)
        damaged[position] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(damaged))
        try:
            arrays, meta = read_state(target)
        except CorruptStateError:
            continue
        assert arrays["stats.packed"].tobytes() == triangle.tobytes() and meta == {"n": 1}, position


def test_metadata_checksum_holds_for_what_json_changes(tmp_path):
    """Integer keys come back as strings (and sort differently): the checksum is of the metadata
    as a reader sees it."""
    from streamtopics.state import read_state, write_state

    path = write_state(tmp_path / "m.state", {"a": np.arange(3)}, {"counts": {2: 1, 10: 2}, "pair": (1, 2)})
    arrays, meta = read_state(path)
    assert meta == {"counts": {"2": 1, "10": 2}, "pair": [1, 2]} and arrays["a"].tolist() == [0, 1, 2]
