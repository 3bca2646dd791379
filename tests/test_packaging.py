"""The wheel that ``pip`` builds from the checkout carries the package data, installs into a fresh
virtualenv with the 'serve' extra only (what scripts/demo.sh installs), and runs the main job
from there: the first-compile message once, hints that work as printed, and a one-line error for
the 'plot' extra it lacks. About a minute and a half: the install (from pip's cache when warm)
and numba compiling the kernels in the new environment."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NUMBA_CACHE_DIR")}


def run(command, cwd):
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600)


def package_data() -> set[str]:
    """The data files of the checkout that the installed package needs."""
    files = set()
    for pattern in ("streamtopics/data/*.txt", "consumers/static/*"):
        files |= {str(p.relative_to(ROOT)) for p in ROOT.glob(pattern) if p.is_file()}
    return files


def copy_of_the_sources(tmp_path: Path) -> Path:
    """The checkout's sources in ``tmp_path``: setuptools builds in the tree, and a checkout's
    build/ keeps files deleted since, which a wheel built there would carry."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=lambda folder, names: [
        n for n in names if n in ("__pycache__", "streamtopics.egg-info")
        or (Path(folder) == ROOT and n in (".git", ".venv", "build", "dist", "runs", "kafka", ".artifacts"))])
    return source


@pytest.mark.slow
def test_the_wheel_installs_in_a_fresh_virtualenv_and_runs_the_main_job(tmp_path):
    source = copy_of_the_sources(tmp_path)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"),
                 str(source)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("streamtopics-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert package_data() and package_data() <= names
    assert any(re.fullmatch(r"streamtopics-[^/]+\.dist-info/licenses/LICENSE", n) for n in names)
    assert not any(n.startswith(("tests/", "benchmarks/", "devtools/")) for n in names)

    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    installed = run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-compile", f"{wheel}[serve]"],
                    cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    # kafka-python's native CRC32C: without it every Kafka path runs 5-7x slower (pyproject.toml)
    assert run([str(bin_dir / "python"), "-c", "import crc32c"], cwd=tmp_path).returncode == 0

    demo = run([str(bin_dir / "streamtopics"), "demo", "--out", "runs/demo", "--snapshot-every", "2000"], cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.count("compiling kernels, once") == 1  # the new environment's cache is empty
    assert "final topics:" in demo.stdout and (tmp_path / "runs" / "demo" / "snapshot-000001.json").is_file()

    hints = demo.stdout.split("; next:\n")[1].splitlines()
    commands = [re.sub(r"\s+# .*$", "", h.strip()) for h in hints]
    assert all(c.startswith("venv/bin/streamtopics ") or "| venv/bin/streamtopics " in c for c in commands), commands
    assert not any(" plot " in c for c in commands)  # no 'plot' extra here: no hint that would fail
    for command in commands:
        if " serve " in command:
            # as printed, but on a free port: another server may hold the default one
            # (no shell between: terminating a shell can leave its server child running)
            server = subprocess.Popen(shlex.split(command.replace(" serve ", " serve --port 0 ", 1)), cwd=tmp_path,
                                      env={**ENV, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
            try:
                assert server.stdout.readline().startswith("dashboard: http://127.0.0.1:")
                time.sleep(2)
                assert server.poll() is None  # serving, not stopped by an error
            finally:
                server.terminate()
                server.wait(timeout=30)
            continue
        result = run(["bash", "-c", command], cwd=tmp_path)
        assert result.returncode == 0 and result.stdout.strip(), (command, result.stderr)

    topics = run([str(bin_dir / "streamtopics"), "topics", "runs/demo", "--json"], cwd=tmp_path)
    assert json.loads(topics.stdout)["n_topics"] == 20

    plot = run([str(bin_dir / "streamtopics"), "plot", "runs/demo", "--out", "p.png"], cwd=tmp_path)
    assert plot.returncode == 1
    assert plot.stderr.splitlines() == ["Error: streamtopics plot needs the 'plot' extra (matplotlib not installed): "
                                        "pip install 'streamtopics[plot]'"]

    cold = run([str(bin_dir / "python"), "-c", "from consumers.kernel_cache import first_compile; print(first_compile())"],
               cwd=tmp_path)
    assert cold.stdout.strip() == "False", cold.stderr  # the next run prints no compile message


@pytest.mark.slow
def test_the_editable_install_that_the_scripts_run_prints_nothing(tmp_path):
    """pip install --quiet -e (scripts/install.sh, scripts/demo.sh) says nothing when all is well:
    no setuptools warning box about the editable install's import finder (issue 48 item 9c)."""
    source = copy_of_the_sources(tmp_path)
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    # the scripts' pip: older ones (ensurepip's) keep the build's warnings to themselves
    assert run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], cwd=tmp_path).returncode == 0
    installed = run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                     "-e", str(source)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout + installed.stderr == ""
    found = run([python, "-c", "import consumers, streamtopics; print(streamtopics.__file__)"], cwd=tmp_path)
    assert found.stdout.strip() == str(source / "streamtopics" / "__init__.py"), found.stderr
