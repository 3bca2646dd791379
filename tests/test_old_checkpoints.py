"""State files written by earlier versions still load. One written by main at 5569d75 (before
the parts saved themselves and before the refresh schedule was one object) loads and resumes as
the uninterrupted run; ones of formats 3 and 5 give back their arrays byte for byte.

``tests/data/model-5569d75.state`` was written by that commit with :func:`documents` and
:data:`SETTINGS` below: ``model.learn_many(documents(400, 1), stream_times=range(400))`` then
``model.save(path)`` (snapshot version 2, made at 300 documents by ``refresh_every=150``).
"""

import hashlib
from pathlib import Path

import numpy as np
import pytest

from streamtopics import StreamingTopicModel
from streamtopics.state import read_state

STATE = Path(__file__).parent / "data" / "model-5569d75.state"
WORDS = ["word" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(60)]
SETTINGS = dict(anchor_method="hybrid", anchor_min_df=2, reservoir_size=200, refresh_every=150,
                refine_iterations=3, refine_sweeps=1, half_life=500.0, half_life_unit="stream")


def documents(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(WORDS[i] for i in rng.choice(20, size=12) + 20 * rng.integers(3)) for _ in range(n)]


def test_a_state_file_of_5569d75_loads_with_every_part():
    model = StreamingTopicModel.load(STATE)
    assert model.documents_absorbed == 400 and model.snapshot.version == 2
    assert model.snapshot.documents_seen == 300 and model.schedule.documents_mark == 300
    assert model.tracker is not None and model.activity is not None and len(model.reservoir) == 200
    assert model.config.refresh_every == 150 and model.config.refresh_every_stream_seconds is None


def test_it_resumes_as_the_uninterrupted_run():
    resumed = StreamingTopicModel.load(STATE)
    uninterrupted = StreamingTopicModel(3, WORDS, **SETTINGS)
    # that commit's tracker kept no noise sums, so its candidates never had a signal_z filter, nor do
    # they after the resume: the uninterrupted run of that commit is one whose tracker lacks them too
    uninterrupted.tracker.noise_sums = None
    uninterrupted.learn_many(documents(400, 1), stream_times=[float(t) for t in range(400)])
    for model in (resumed, uninterrupted):  # refreshes fall due at 450 and 600 documents
        model.learn_many(documents(300, 2), stream_times=[float(t) for t in range(400, 700)])
    assert resumed.snapshot.version == uninterrupted.snapshot.version == 4
    assert resumed.snapshot.documents_seen == uninterrupted.snapshot.documents_seen == 600
    assert resumed.snapshot.topic_ids == uninterrupted.snapshot.topic_ids
    assert resumed.snapshot.anchors == uninterrupted.snapshot.anchors
    # the state file's sums were computed on another machine: equal to rounding
    np.testing.assert_allclose(resumed.snapshot.topic_word, uninterrupted.snapshot.topic_word, atol=1e-8)


OLD_FORMATS = {  # file in tests/data: the commit that wrote it, and its arrays' SHA-256s as that commit read them
    # format 3: the triangle as a bitmap and the nonzero items
    "format3.state": ("main at 752416c (format 3)", {
        "packed": ("<f8", (100_000,), "396b1d372ab2497e"), "ints": ("<i4", (1000,), "2661a2fee5db79c9"),
        "dense": ("<f8", (40, 3), "ca4d9d1ca0ee06a0"), "empty": ("<f8", (0,), "e3b0c44298fc1c14")}),
    # format 5: every plane of the triangle's chunks compressed, SHA-256 checksums; ``packed`` in chunks of
    # 2 ** 14 items, tests.test_state_files.odd_bit_patterns(100_000, 9)
    "format5.state": ("main at 898c7e9 (format 5)", {
        "packed": ("<f8", (100_000,), "725986b6d395c47a"), "ints": ("<i4", (1000,), "d75f8fd95c96680f"),
        "dense": ("<f8", (40, 3), "b0a81a77c976a742"), "empty": ("<f8", (0,), "e3b0c44298fc1c14")}),
}


@pytest.mark.parametrize("name", OLD_FORMATS)
def test_an_older_format_still_loads_byte_for_byte(name):
    arrays, meta = read_state(Path(__file__).parent / "data" / name)
    written_by, expected = OLD_FORMATS[name]
    assert meta == {"written_by": written_by}
    assert {key: (array.dtype.str, array.shape, hashlib.sha256(array.tobytes()).hexdigest()[:16])
            for key, array in arrays.items()} == expected
