"""The peer comparison's quick suite, run whole in CI (issue 9), with its regression guard: our
matched L1 on the quick semi-synthetic setting must not get worse than the value recorded in
``benchmarks/peers/guard.json`` by more than the tolerance recorded there.

The suite runs as users run it (``python -m benchmarks.peers --suite quick``), into a temporary
directory so the committed tables and plots stay as measured. The guarded setting is the quick
suite's ``kos-K20-a0.03-10k`` stream (K = 20 topics fitted by our model to UCI KOS, 10,000
documents drawn with Dirichlet(0.03) proportions and KOS's mean length, seed 1), learned in the
suite's chunks and refreshed once. It is deterministic, so the tolerance only has to absorb
intended small changes and floating-point noise; it is a quality guard, not a timing test (the
suite's timings are printed, never asserted). After an intended change of quality, rerun
``python -m benchmarks.peers --suite quick`` and update guard.json with the new value.
"""

import json

import pytest
from suite_helpers import DATA, ROOT, run_quick_suite  # beside this file (conftest.py)

pytestmark = pytest.mark.peers

GUARD = ROOT / "benchmarks" / "peers" / "guard.json"
PEERS = ("gensim", "sklearn", "river", "tomotopy")


@pytest.fixture(scope="module")
def quick_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("peers-quick")
    for corpus in ("uci-kos", "20newsgroups-bydate"):
        if not (DATA / corpus).is_dir():
            pytest.fail(f"corpus {corpus} not found under {DATA}", pytrace=False)
    run_quick_suite("benchmarks.peers", out, timeout=1200)
    return json.loads((out / "results-quick.json").read_text()), out


def test_quick_suite_measures_every_system_on_every_setting(quick_suite):
    results, out = quick_suite
    for setting in ("kos-K20-a0.03-10k", "20news-K20"):
        rows = {row["system"]: row for row in results["results"][setting]}
        assert set(rows) == {"ours", *PEERS}, f"{setting}: {sorted(rows)}"
        for system, row in rows.items():
            assert row.get("error") is None, f"{setting}/{system}: {row.get('error')}"
            assert row["docs"] > 0 and row["docs_per_s_median"] > 0 and row["heldout_ll"] < 0, (setting, system)
    assert (out / "RESULTS-quick.md").exists() and (out / "throughput-quick.png").stat().st_size > 0


def test_matched_l1_has_not_regressed(quick_suite):
    results, _ = quick_suite
    guard = json.loads(GUARD.read_text())
    ours = next(row for row in results["results"][guard["setting"]] if row["system"] == "ours")
    limit = guard["matched_l1"] + guard["tolerance"]
    assert not ours["stopped_early"] and ours["docs"] == 10_000
    assert ours["l1"] <= limit, (f"matched L1 {ours['l1']:.4f} on {guard['setting']} is worse than the recorded "
                                 f"{guard['matched_l1']:.4f} + tolerance {guard['tolerance']} = {limit:.4f}")
