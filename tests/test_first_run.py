"""A newcomer's first run: a missing extra is one line naming it, the first-compile message
follows numba's on-disk cache, the demo's hints are runnable, and the served demo is paced."""

import os
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from consumers.cli.demo import PacedLive, command_prefix
from consumers.extras import EXTRAS, MissingExtra, missing_modules, require

ROOT = Path(__file__).resolve().parents[1]


def cli_without(modules, *args, cwd):
    """``streamtopics ARGS`` in a Python where ``modules`` cannot be imported."""
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in modules)
    code = f"import sys; {blocked}; from consumers.cli import main; main(prog_name='streamtopics')"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("blocked, args, message", [
    (["starlette"], ["serve", "."],
     "streamtopics serve needs the 'serve' extra (starlette not installed): pip install 'streamtopics[serve]'"),
    (["uvicorn", "starlette"], ["demo", "--out", "run", "--serve", "127.0.0.1:0"],
     "streamtopics demo --serve needs the 'serve' extra (starlette, uvicorn not installed): "
     "pip install 'streamtopics[serve]'"),
    (["matplotlib"], ["plot", ".", "--out", "p.png"],
     "streamtopics plot needs the 'plot' extra (matplotlib not installed): pip install 'streamtopics[plot]'"),
])
def test_a_command_needing_a_missing_extra_says_which_in_one_line(tmp_path, blocked, args, message):
    result = cli_without(blocked, *args, cwd=tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"Error: {message}"]


def test_require_and_missing_modules_follow_what_imports(monkeypatch):
    assert missing_modules("serve") == [] and require("serve", "x") is None  # the test install has them all
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert missing_modules("dask") == ["distributed"]
    with pytest.raises(MissingExtra, match=r"^the Dask replay needs the 'dask' extra \(distributed not installed\): "
                                           r"pip install 'streamtopics\[dask\]'$"):
        require("dask", "the Dask replay")
    declared = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(declared) - {"test", "all"}  # every extra a command can name is one pip knows


def test_a_kernel_counts_as_cached_once_numba_wrote_its_index_and_not_after_its_source_changed(tmp_path):
    (tmp_path / "kernels_here.py").write_text(textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def twice(x):
            return 2 * x
    """))
    code = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, sys.argv[1])
        from consumers.kernel_cache import is_cached
        import kernels_here
        before = is_cached(kernels_here.twice)
        kernels_here.twice(3)
        after = is_cached(kernels_here.twice)
        source = kernels_here.__file__
        os.utime(source, (os.path.getmtime(source) + 60,) * 2)
        print(before, after, is_cached(kernels_here.twice))
    """)
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.stdout.split() == ["False", "True", "False"], result.stderr


def test_first_compile_is_true_with_an_empty_numba_cache_and_lists_the_library_kernels(tmp_path):
    code = ("from consumers.kernel_cache import first_compile, kernels; "
            "print(first_compile(), sorted({k.__module__ for k in kernels()}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)})
    assert result.stdout.startswith("True "), result.stderr
    for module in ("streamtopics.statistics.cooccurrence", "streamtopics.inference", "streamtopics.refresh.l2_recovery",
                   "streamtopics.statistics.tracker_kernels"):
        assert module in result.stdout


def test_the_hint_prefix_is_the_way_this_process_was_started(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / ".venv" / "bin" / "streamtopics"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_prefix() == ".venv/bin/streamtopics"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert command_prefix() == "streamtopics"
    monkeypatch.setattr(sys, "argv", [str(ROOT / "consumers" / "cli" / "__main__.py")])
    assert command_prefix().endswith(" -m consumers.cli")


class RecordingLive:
    def __init__(self):
        self.calls = []

    def on_snapshot(self, snapshot, path=None, model=None):
        self.calls.append(("snapshot", snapshot, path, model, time.perf_counter()))

    def on_progress(self, replay):
        self.calls.append(("progress", replay))

    def finish(self):
        self.calls.append(("finish",))


def test_the_paced_live_source_passes_everything_on_and_pauses_after_each_snapshot():
    live, pauses = RecordingLive(), []
    paced = PacedLive(live, 0.2, pauses.append)  # the demo passes the replay's pause
    paced.on_snapshot("s1", "p1", model="m")
    assert pauses == [0.2]
    paced.on_progress("r")
    paced.on_snapshot("s2")
    paced.finish()
    assert pauses == [0.2, 0.2]
    assert [c[:4] for c in live.calls if c[0] == "snapshot"] == [("snapshot", "s1", "p1", "m"),
                                                                  ("snapshot", "s2", None, None)]
    assert [c for c in live.calls if c[0] != "snapshot"] == [("progress", "r"), ("finish",)]


@pytest.mark.slow
def test_a_first_runs_helper_leaves_the_refinement_kernels_cached_for_the_first_refresh(tmp_path):
    """With an empty numba cache ``compile_ahead`` starts the helper; once it is done, a model's
    refresh in a new process compiles kernels (recovery's) but none of the refinement's modules,
    and ``compile_ahead`` starts no helper again (kernels are cached)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    first = ("from consumers.kernel_cache import compile_ahead; helper = compile_ahead(); "
             "print(helper is not None, helper.wait() if helper else None)")
    result = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=600)
    assert result.stdout.split() == ["True", "0"], result.stderr
    refresh = textwrap.dedent("""
        from numba.core import event
        compiled = set()
        class Compiled(event.Listener):
            def on_start(self, ev):
                pass
            def on_end(self, ev):
                compiled.add(ev.data["dispatcher"].py_func.__module__)
        event.register("numba:compile", Compiled())
        from consumers.kernel_cache import compile_ahead
        from streamtopics import StreamingTopicModel
        from streamtopics.kernel_warmup import MODULES
        from streamtopics.synthetic import semi_synthetic, zipf_topics
        topic_word = zipf_topics(60, 3, seed=1)  # no anchor words: the refinement runs (separable topics skip it)
        documents, _ = semi_synthetic(topic_word, 400, doc_length=40, seed=2)
        model = StreamingTopicModel(3, vocabulary=[f"w{i}" for i in range(60)])
        model.learn_many(documents)
        model.refresh()
        print(model.last_refresh["refinement_sweeps"] > 0, compile_ahead() is None,
              "streamtopics.refresh.l2_recovery" in compiled, sorted(compiled & set(MODULES)))
    """)
    result = subprocess.run([sys.executable, "-c", refresh], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=600)
    assert result.stdout.strip() == "True True True []", result.stderr


def test_compile_ahead_starts_nothing_without_an_interpreter_to_start_and_the_run_goes_on(monkeypatch):
    from consumers import kernel_cache

    said = []
    monkeypatch.setattr(kernel_cache, "first_compile", lambda: True)  # as on a first run
    monkeypatch.setattr(sys, "executable", str(ROOT / "no-such-python"))
    assert kernel_cache.compile_ahead() is None
    kernel_cache.announce_first_compile(said.append)
    assert said == [kernel_cache.COMPILING_MESSAGE]
    monkeypatch.setattr(sys, "executable", "")
    assert kernel_cache.compile_ahead() is None
