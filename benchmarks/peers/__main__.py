"""Run the peer comparison and write RESULTS-<suite>.md, results-<suite>.json and PNG plots.

    python -m benchmarks.peers --suite quick|full [--out DIR] [--settings a,b] [--systems x,y]
                               [--budget SYSTEM=SECONDS ...] [--cache DIR] [--report-only]

The peers are the ``bench`` extra of pyproject.toml (``pip install -e '.[bench]'``; river is a
core dependency); ``--install`` runs that pip command first. A peer whose package is missing is
reported as not installed, never silently dropped. Results of earlier invocations of the same
suite in ``--out`` (default ``.artifacts/peers/``, git-ignored) are kept and merged, so a long
suite can be run setting by setting.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.peers import STREAM_CHUNK
from benchmarks.peers.suites import SUITES, Setting

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PACKAGES = {"ours": "streamtopics", "gensim": "gensim", "sklearn": "sklearn", "river": "river", "tomotopy": "tomotopy"}

PROTOCOL = """Protocol. Every system gets the same stream, in arrival order, once, in chunks of {chunk} documents
(river document by document, its unit), each in a fresh subprocess, after a warm-up fit of a
throwaway model on 50 documents (imports, JIT). *fit s* is the time spent in the systems' learn
calls plus the final step that makes topics readable (our `refresh()`; tomotopy's Gibbs sweeps);
the final step alone is in brackets (our refresh is a fixed cost that depends on V and K, not on the
stream length; our ingest alone runs at the learn-only rate noted under each table). Reading topics
at checkpoints for the L1 curve is not timed. *documents/s* = documents learned /
fit s, the median over the runs in brackets (when one fit takes less than {repeat:.0f} s it is repeated
twice more on fresh models in the same subprocess; slower systems are run once). A system past its time budget is cut at the end
of the chunk that crosses it and evaluated on what it learned (noted). *peak RSS*: the high-water mark (`VmHWM`) of
the subprocess right after the fit (data and warm-up included); Δ: growth over the resident size
just before the fit, i.e. roughly the model's own memory. *matched L1*: mean over true topics of the
L1 distance to the Hungarian-matched estimated topic (0 best, 2 worst). *held-out LL/token*:
document completion (Wallach et al. 2009) via `streamtopics.evaluation.heldout_log_likelihood`:
half of each held-out document's tokens observed, the system's own inference gives the mixture,
log-likelihood per held-out token (natural log). *NPMI*: mean over topics of the NPMI of the top
10 words' pairs, document co-occurrence in the training stream. *uniqueness*: Nan et al. 2019, on
the top 10 words. All systems run with K as stated, seed 0, and the parameters named in their
adapter's docstring (benchmarks/peers/*.py). Threads: ours uses numba's thread pool, tomotopy
`workers=0` (all cores); gensim and scikit-learn run one process (numpy/BLAS may thread); river is
pure Python."""


def machine() -> str:
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as handle:
            kb = int(next(line.split()[1] for line in handle if line.startswith("MemTotal")))
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()} "
            f"(load average {load:.1f} when the run started: shared machine)")


def versions(systems) -> list[str]:
    from benchmarks.peers.registry import adapter

    import numpy

    out = []
    for s in systems:
        try:
            out.append(adapter(s).version())
        except Exception as exc:  # noqa: BLE001 - reported, not hidden
            out.append(f"{s}: unavailable ({exc.__class__.__name__})")
    out.append(f"numpy {numpy.__version__}")
    try:
        import numba

        out.append(f"numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads)")
    except ImportError:
        pass
    return out


def prepare(setting: Setting, cache: Path) -> tuple[Path, str]:
    from benchmarks.peers import data

    path = cache / f"{setting.name}-heldout{setting.n_heldout}.npz"
    if not path.exists():
        t0 = time.perf_counter()
        if setting.kind == "semi":
            stream = data.semi_synthetic_stream(setting.corpus, setting.n_topics, setting.alpha,
                                                setting.n_docs, setting.n_heldout)
        else:
            stream = data.real_stream(setting.corpus, setting.n_heldout)
        data.save(stream, path)
        print(f"  prepared {setting.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    stream = data.load(path)
    shape = stream["train"].shape
    note = (f"{stream['note']}. Stream: {shape[0]:,} documents, V = {shape[1]:,}, "
            f"{stream['train'].sum():,.0f} tokens; held-out: {stream['heldout'].shape[0]:,} documents.")
    return path, note


def run_worker(spec: dict, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.peers.worker", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"system": spec["system"], "error": f"subprocess killed after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"system": spec["system"], "error": " / ".join(tail) or f"exit status {proc.returncode}"}


def run_system(system: str, setting: Setting, stream: Path, suite, budget: float) -> dict:
    spec = {"system": system, "stream": str(stream), "n_topics": setting.n_topics,
            "repeat_if_under_s": suite.repeat_if_under_s,
            "chunk": 100 if system == "river" else STREAM_CHUNK, "checkpoints": list(setting.checkpoints),
            "budget_s": budget, "evaluate": True, "iterations": suite.tomotopy_iterations, "seed": 0}
    # generous wall limit: the fit budget plus evaluation (river's held-out inference is slow)
    first = run_worker(spec, timeout=budget * 3 + 900)
    if "error" in first:
        return first
    first.update(docs_per_s_median=statistics.median(first["runs"]), budget_s=budget)
    return first


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=sorted(SUITES), default="quick")
    parser.add_argument("--out", type=Path, default=ROOT / ".artifacts" / "peers")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "streamtopics-peers")
    parser.add_argument("--settings", help="comma-separated setting names (default: all of the suite)")
    parser.add_argument("--systems", help="comma-separated systems (default: all)")
    parser.add_argument("--budget", action="append", default=[], metavar="SYSTEM=SECONDS",
                        help="override a system's fit time budget")
    parser.add_argument("--stream-docs", type=int, help="cut semi-synthetic streams to this many documents")
    parser.add_argument("--install", action="store_true", help="pip install -e '.[bench]' first")
    parser.add_argument("--report-only", action="store_true", help="rewrite the tables and plots from the JSON")
    args = parser.parse_args(argv)

    if args.install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-e", f"{ROOT}[bench]"], check=True)
    suite = SUITES[args.suite]
    settings = list(suite.settings)
    if args.stream_docs:
        settings = [replace(s, n_docs=min(s.n_docs, args.stream_docs),
                            checkpoints=tuple(c for c in s.checkpoints if c < args.stream_docs),
                            name=s.name.rsplit("-", 1)[0] + f"-{args.stream_docs // 1000}k")
                    if s.kind == "semi" else s for s in settings]
    if args.settings:
        wanted = args.settings.split(",")
        settings = [s for s in settings if s.name in wanted]
    systems = args.systems.split(",") if args.systems else list(suite.systems)
    budgets = dict(suite.budget_s)
    for item in args.budget:
        name, seconds = item.split("=")
        budgets[name] = float(seconds)

    args.out.mkdir(parents=True, exist_ok=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    results_path = args.out / f"results-{args.suite}.json"
    saved = json.loads(results_path.read_text()) if results_path.exists() else {}
    results, setting_info = saved.get("results", {}), saved.get("settings", {})
    runs_log = saved.get("invocations", [])
    t_start = time.perf_counter()
    command = "python -m benchmarks.peers " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    header = saved.get("header", {})
    if not args.report_only:
        invocation = {"command": command, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                      "wall_s": None, "settings": [s.name for s in settings], "systems": systems,
                      "budgets": budgets, "finished": False}
        runs_log.append(invocation)
        header = {"command": command, "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "machine": machine(), "versions": versions(systems),
                  "protocol": PROTOCOL.format(chunk=STREAM_CHUNK, repeat=suite.repeat_if_under_s)}
        for setting in settings:
            print(f"[{setting.name}]", flush=True)
            stream, note = prepare(setting, args.cache)
            setting_info[setting.name] = {**asdict(setting), "note": note}
            rows = [r for r in results.get(setting.name, []) if r["system"] not in systems]
            for system in systems:
                if importlib.util.find_spec(PACKAGES[system]) is None:
                    rows.append({"system": system, "error": "not installed (pip install -e '.[bench]')"})
                    continue
                t0 = time.perf_counter()
                row = run_system(system, setting, stream, suite, budgets.get(system, 1200))
                row["invocation"] = command
                rows.append(row)
                show = {k: row.get(k) for k in ("docs", "fit_s", "docs_per_s_median", "peak_rss_mb", "l1",
                                                 "heldout_ll", "npmi", "uniqueness", "error")}
                print(f"  {system:9s} {time.perf_counter() - t0:6.1f} s  {show}", flush=True)
                order = list(SUITES[args.suite].systems)
                results[setting.name] = sorted(rows, key=lambda r: order.index(r["system"]))
                invocation["wall_s"] = time.perf_counter() - t_start
                results_path.write_text(json.dumps({"header": header, "settings": setting_info,
                                                    "results": results, "invocations": runs_log}, indent=1))
        header["wall_s"] = time.perf_counter() - t_start
        invocation.update(wall_s=header["wall_s"], finished=True)
        results_path.write_text(json.dumps({"header": header, "settings": setting_info, "results": results,
                                            "invocations": runs_log}, indent=1))
    if len(runs_log) > 1 or (runs_log and not runs_log[-1].get("finished", True)):
        header["caveats"] = "Invocations that produced this file:\n\n" + "\n".join(
            f"- `{r['command']}` ({r['date']}, {(r['wall_s'] or 0) / 60:.1f} min"
            f"{'' if r.get('finished', True) else ', stopped before the end'}): settings {', '.join(r['settings'])}; "
            f"systems {', '.join(r['systems'])}; fit budgets (s) {r.get('budgets', '?')}" for r in runs_log)
    from benchmarks.peers.report import plots, write_markdown

    ordered = [setting_info[s.name] for s in suite.settings if s.name in setting_info]
    ordered += [v for k, v in setting_info.items() if k not in {s.name for s in suite.settings}]
    header["not_run"] = [s.name for s in suite.settings if s.name not in setting_info]
    write_markdown(args.out / f"RESULTS-{args.suite}.md", args.suite, header, ordered, results)
    for path in plots(args.out, args.suite, ordered, results):
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")
    print(f"wrote {args.out / f'RESULTS-{args.suite}.md'} in {(time.perf_counter() - t_start) / 60:.1f} min")


if __name__ == "__main__":
    main()
