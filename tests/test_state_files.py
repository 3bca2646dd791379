"""State files are small and lossless (issue 48, item 1): format 3 encodes the arrays
(streamtopics/array_encoding.py), a loaded model's arrays are the saved ones bit for bit, and a
model saved mid-stream, loaded and fed the rest ends where the uninterrupted one does. (With
forgetting on it does not, by rounding, on main before format 3 too: saving flushes the pending
batch, and the decay weights are computed per batch.)"""

from __future__ import annotations

import json

import numpy as np

from streamtopics import StreamingTopicModel
from streamtopics.state import FORMAT_VERSION, read_state, write_state

WORDS = [f"w{i}" for i in range(2000)]
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
        assert json.loads(bytes(archive["__manifest__"]))["format_version"] == FORMAT_VERSION == 3
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
