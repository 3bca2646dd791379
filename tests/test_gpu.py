"""The refinement on a CUDA device (streamtopics.refresh.gpu): its steps against the CPU's, and the
setting that chooses it.

The comparisons live in tests/device_steps.py and run in a child process: on the CUDA device
where numba finds one, and through numba's CUDA simulator everywhere else (CI has no GPU), so
that the kernels' logic is checked on every run. The simulator must be chosen before numba is
imported, hence the child process."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamtopics.refresh.device import cuda_available
from streamtopics.model import StreamingTopicModel
from streamtopics.synthetic import semi_synthetic, separable_topics

DEVICE = cuda_available()


@pytest.mark.gpu
def test_device_steps_match_the_cpu():
    env = dict(os.environ)
    if not DEVICE:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
                          str(Path(__file__).with_name("device_steps.py"))],
                         cwd=Path(__file__).parent.parent, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= (6 if DEVICE else 4), run.stdout[-2000:]  # 2 need a device


def _model(device: str) -> StreamingTopicModel:
    truth = separable_topics(40, 3, anchor_mass=0.05, seed=1)
    docs, _ = semi_synthetic(truth.topic_word, 200, alpha=0.2, doc_length=30, seed=2)
    model = StreamingTopicModel(3, vocabulary=[f"w{i}" for i in range(40)], refine_device=device, anchor_min_df=2)
    model.learn_many(docs)
    return model


@pytest.mark.skipif(DEVICE, reason="this machine has a CUDA device")
def test_cuda_without_a_device_is_a_clear_error_and_auto_falls_back():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        _model("cuda").refresh()
    np.testing.assert_array_equal(_model("auto").refresh().topic_word, _model("cpu").refresh().topic_word)


@pytest.mark.skipif(DEVICE, reason="this machine has a CUDA device")
def test_replay_asked_for_cuda_without_a_device_stops_before_reading(tmp_path):
    from click.testing import CliRunner

    from consumers.cli import main

    result = CliRunner().invoke(main, ["replay", "builtin", "--out", str(tmp_path / "run"), "--refine-device", "cuda"])
    assert result.exit_code == 2, result.output
    assert "numba finds no CUDA device" in result.output
    assert not (tmp_path / "run").exists()


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="refine_device"):
        StreamingTopicModel(3, vocabulary=["a", "b", "c"], refine_device="gpu")
    with pytest.raises(ValueError, match="at most 511 topics"):
        StreamingTopicModel(600, vocabulary=["a", "b", "c"], refine_device="cuda")
