"""A newcomer's first run: ``streamtopics demo`` with an empty numba cache, as shipped (a helper
process compiles the refinement's kernels alongside, ``consumers.kernel_cache.compile_ahead``)
and without the helper, alternately, each in a fresh process with a fresh ``NUMBA_CACHE_DIR``.
Prints the wall seconds of every run (interpreter start to exit) and the run's own summary line,
then the medians; the topics of the two must be the same (checked: the printed output, without
its timing line, is compared).

    python -m benchmarks.first_run --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine

ROOT = Path(__file__).resolve().parents[1]
#: The demo in this interpreter; ``without`` replaces the helper's start by nothing first (the
#: compile message is still printed: only the helper is left out).
DEMO = ("import sys; from consumers import kernel_cache; from consumers.cli import main; "
        "kernel_cache._start_helper = (lambda: None) if sys.argv[1] == 'without' else kernel_cache._start_helper; "
        "main(args=['demo', '-q', '--out', sys.argv[2]], prog_name='streamtopics')")


def first_run(variant: str) -> tuple[float, list[str]]:
    """Wall seconds of one demo run with an empty numba cache, and its output lines."""
    with tempfile.TemporaryDirectory(prefix="first-run-") as scratch:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(scratch) / "numba")}
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", DEMO, variant, str(Path(scratch) / "demo")], cwd=ROOT, env=env,
                                capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
    return seconds, [line.replace(scratch, "<out>") for line in result.stdout.splitlines()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, alternating")
    args = parser.parse_args(argv)
    print(f"# {machine()}")
    times: dict[str, list[float]] = {"with helper": [], "without": []}
    outputs = {}
    for round_ in range(1, args.rounds + 1):
        for label, variant in (("with helper", "with"), ("without", "without")):
            seconds, lines = first_run(variant)
            times[label].append(seconds)
            outputs[label] = [line for line in lines if not line.startswith("this run:")]
            summary = next((line for line in lines if line.startswith("this run:")), "")
            print(f"round {round_} {label:>11}: {seconds:6.1f} s  ({summary})", flush=True)
    medians = {label: statistics.median(values) for label, values in times.items()}
    print(f"median first run: with helper {medians['with helper']:.1f} s, without {medians['without']:.1f} s, "
          f"ratio {medians['with helper'] / medians['without']:.2f}; same output: "
          f"{outputs['with helper'] == outputs['without']}")
    return medians


if __name__ == "__main__":
    main()
