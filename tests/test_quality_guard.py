"""The quality protocol's quick suite, run whole in CI (issue 14), with its regression guard.

The suite runs as users run it (``python -m benchmarks.quality --suite quick``) into a temporary
directory, its Gibbs truth fitted there too (no cache), so the guard covers the whole protocol:
corpus filtering, the tomotopy truth, the semi-synthetic stream and the real split. Three figures
of our defaults are guarded against ``benchmarks/quality/guard.json``: matched L1 at 20,000
documents of the 20 Newsgroups K = 20, Dirichlet(0.03) Gibbs-truth stream and at 50,000 documents
of a separable stream (V = 2,000, K = 20, the seed papers' setting; neither may rise above its
bound) and test-split NPMI on 20 Newsgroups K = 20 (must not fall below it). Everything is
seeded, so the margins only absorb floating-point and thread-count noise and changes of equal
quality; guard.json says how they were chosen. After an intended change of quality, rerun the
quick suite and update guard.json.
"""

import json

import pytest
from suite_helpers import DATA, ROOT, run_quick_suite  # beside this file (conftest.py)

GUARD = ROOT / "benchmarks" / "quality" / "guard.json"


@pytest.fixture(scope="module")
def quick_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("quality-quick")
    corpus = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
    if not corpus.is_file():
        pytest.fail(f"corpus file {corpus} not found", pytrace=False)
    run_quick_suite("benchmarks.quality", out, timeout=600)
    return json.loads((out / "quick.json").read_text())


def _default(records, setting):
    row = next(r for r in records if r["setting"] == setting and r["system"] == "default")
    assert "error" not in row, row["error"]
    return row


def _assert_l1_within_bound(quick_suite, entry):
    guard = json.loads(GUARD.read_text())[entry]
    l1 = _default(quick_suite["synthetic"], guard["setting"])["l1"][str(guard["documents"])]
    assert l1 <= guard["bound"], (f"matched L1 {l1:.4f} at {guard['documents']} documents of {guard['setting']} "
                                  f"is above the bound {guard['bound']} (measured {guard['measured']})")


@pytest.mark.peers
def test_gibbs_truth_l1_has_not_regressed(quick_suite):
    _assert_l1_within_bound(quick_suite, "l1")


@pytest.mark.peers
def test_separable_stream_l1_has_not_regressed(quick_suite):
    """The seed papers' setting (separable topics, anchors rarer than the shared words) in the quick suite."""
    _assert_l1_within_bound(quick_suite, "separable_l1")


@pytest.mark.peers
def test_real_split_npmi_has_not_regressed(quick_suite):
    guard = json.loads(GUARD.read_text())["npmi"]
    npmi = _default(quick_suite["real"], guard["setting"])["npmi"]
    assert npmi >= guard["bound"], (f"test-split NPMI {npmi:.4f} on {guard['setting']} is below the bound "
                                    f"{guard['bound']} (measured {guard['measured']})")


def test_topics_sharing_a_top_word_are_counted_as_displayed_too():
    """A word likely in every topic and in the corpus is among each topic's likeliest words but
    not among those displayed (relevance, lambda 0.6): the protocol reports both counts."""
    import numpy as np

    from benchmarks.quality.real import shared_top_words

    topic_word = np.zeros((10, 3))
    for k in range(3):
        topic_word[[0, 1 + 3 * k, 2 + 3 * k, 3 + 3 * k], k] = [0.3, 0.4, 0.2, 0.1]
    corpus = topic_word.mean(axis=1)
    assert shared_top_words(topic_word, 2) == (3, 1.5)  # word 0 in all three top-2 lists
    assert shared_top_words(topic_word, 2, word_distribution=corpus) == (1, 1.0)
