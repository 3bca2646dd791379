"""scripts/demo.sh installs once: while pyproject.toml is unchanged a later run starts the demo
without pip, which is slow and fails without a package index (issue 48 item 2). Run on a copy of
the scripts with a fake virtualenv whose pip and streamtopics only log their calls."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = pip ]; then echo "pip $*" >> calls.log; exit "${{PIP_EXIT:-0}}"; fi
exec {sys.executable} "$@"
"""
FAKE_STREAMTOPICS = """#!/bin/sh
echo "streamtopics $*" >> calls.log
"""


def checkout(tmp_path: Path) -> Path:
    """A checkout holding demo.sh, its stamp helper, pyproject.toml and a fake .venv."""
    (tmp_path / "scripts").mkdir()
    for name in ("demo.sh", "venv_stamp.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("streamtopics", FAKE_STREAMTOPICS)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return tmp_path


def demo(root: Path, pip_exit: int = 0) -> list[str]:
    """Run demo.sh; the calls it made to pip and streamtopics, in order."""
    (root / "calls.log").unlink(missing_ok=True)
    run = subprocess.run(["bash", str(root / "scripts" / "demo.sh"), "--quiet"], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "PIP_EXIT": str(pip_exit)})
    calls = (root / "calls.log").read_text().splitlines() if (root / "calls.log").exists() else []
    return [run.returncode, *[call.split()[0] for call in calls]]


def test_demo_installs_on_its_first_run_only_and_again_when_pyproject_changes(tmp_path):
    root = checkout(tmp_path)
    assert demo(root) == [0, "pip", "pip", "streamtopics"]
    assert demo(root) == [0, "streamtopics"]
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + "\n# changed\n")
    assert demo(root) == [0, "pip", "pip", "streamtopics"]
    assert demo(root) == [0, "streamtopics"]


def test_a_failed_install_is_not_marked_current(tmp_path):
    root = checkout(tmp_path)
    assert demo(root, pip_exit=1) == [1, "pip"]
    assert demo(root) == [0, "pip", "pip", "streamtopics"]
