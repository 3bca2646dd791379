"""Running a benchmark suite the way a user does, for the guard tests (peers, quality)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def run_quick_suite(module: str, out: Path, timeout: int) -> None:
    """``python -m <module> --suite quick --out OUT --cache OUT/cache`` from the checkout's root;
    fails with the end of its output if it does not exit 0, and prints its tables for the CI log."""
    result = subprocess.run([sys.executable, "-m", module, "--suite", "quick", "--out", str(out),
                             "--cache", str(out / "cache")], cwd=ROOT, capture_output=True, text=True,
                            timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(result.stdout[-4000:])
