"""Regression guard for the peer comparison (issue 9): our matched L1 on the quick suite's
semi-synthetic setting must not get worse than the value recorded in
``benchmarks/peers/guard.json`` by more than the tolerance recorded there.

The setting is exactly the quick suite's ``kos-K20-a0.03-10k`` stream (K = 20 topics fitted by
our model to UCI KOS, 10,000 documents drawn with Dirichlet(0.03) proportions and KOS's mean
length, seed 1), learned in the suite's chunks and refreshed once. It is deterministic, so the
tolerance only has to absorb intended small changes and floating-point noise; it is a quality
guard, not a timing test. After an intended change of quality, rerun
``python -m benchmarks.peers --suite quick`` and update guard.json with the new value.
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "benchmarks" / "peers" / "guard.json"
DATA = ROOT.parent / "shared" / "data"


def test_matched_l1_has_not_regressed():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.peers import STREAM_CHUNK
    from benchmarks.peers.data import semi_synthetic_stream
    from benchmarks.peers.suites import QUICK
    from streamtopics import StreamingTopicModel
    from streamtopics.evaluation import matched_l1

    guard = json.loads(GUARD.read_text())
    setting = next(s for s in QUICK.settings if s.name == guard["setting"])
    if not (DATA / setting.corpus).is_dir():
        pytest.fail(f"corpus {setting.corpus} not found under {DATA}", pytrace=False)
    stream = semi_synthetic_stream(setting.corpus, setting.n_topics, setting.alpha, setting.n_docs,
                                   n_heldout=10, data=DATA)
    model = StreamingTopicModel(setting.n_topics, vocabulary=stream["vocabulary"], seed=0)
    train = stream["train"]
    for start in range(0, train.shape[0], STREAM_CHUNK):
        model.learn_many(train[start:start + STREAM_CHUNK])
    l1 = matched_l1(stream["truth"], model.refresh().topic_word)
    limit = guard["matched_l1"] + guard["tolerance"]
    assert l1 <= limit, (f"matched L1 {l1:.4f} on {guard['setting']} is worse than the recorded "
                         f"{guard['matched_l1']:.4f} + tolerance {guard['tolerance']} = {limit:.4f}")
