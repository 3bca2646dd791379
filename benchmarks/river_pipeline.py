"""Throughput of river pipelines with AnchorTopics vs river's LDA on the same document stream.

The stream is the one of examples/river_pipeline.py: the 20newsgroups-bydate training split,
shuffled with a fixed seed, headers removed, the first ``--limit`` documents. Each topic step is
timed in two river pipelines, one after the other, on that stream:

* features:  ``BagOfWords | <topic step>``, ``learn_one`` then ``transform_one`` per document
  (what producing topic features for a stream costs);
* classify:  ``BagOfWords | <topic step> | StandardScaler | SoftmaxRegression`` under
  progressive validation, ``predict_one`` then ``learn_one`` per document (the example's loop).

"none" is the pipeline without a topic step (the classifier reads the raw word counts), a
ceiling for the rest of the pipeline. AnchorTopics' rate includes its refreshes (one per
``--refresh-every`` absorbed documents after the warm-up), so the stream should hold several.
Rates are also given from document ``--refresh-every`` on, once
AnchorTopics has topics and infers mixtures (before that its transform returns ``{}``, which
costs nothing). Wall-clock rates depend on what else the machine runs; the CPU column (process time, all
threads) is steadier on a shared machine, and the load average is printed with the table.

    .venv/bin/python -m benchmarks.river_pipeline                   # 3000 documents, all steps
    .venv/bin/python -m benchmarks.river_pipeline --limit 11314 --models none,anchor
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path

from river import compose

from benchmarks.common import machine

REPO = Path(__file__).resolve().parents[1]
STEPS = ("none", "anchor", "lda")


def _example():
    spec = importlib.util.spec_from_file_location("river_pipeline_example",
                                                  REPO / "examples" / "river_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _example()


def pipeline(step: str, args, n_documents: int, classify: bool):
    parts = [example.bag_of_words()]
    if step != "none":
        parts.append(example.topic_step(step, args, n_documents))
    if classify:
        parts.append(example.classifier())
    return compose.Pipeline(*parts)


def _timed(loop, stream, cut: int) -> dict:
    """Run ``loop(x, y)`` over the stream; wall and CPU time overall and from document ``cut``
    on (AnchorTopics has no topics, hence no inference, before its first refresh)."""
    wall, cpu = time.perf_counter(), time.process_time()
    late = None
    for i, (x, y) in enumerate(stream):
        if i == cut:
            late = (time.perf_counter(), time.process_time())
        loop(x, y)
    end = (time.perf_counter(), time.process_time())
    out = {"wall_s": end[0] - wall, "cpu_s": end[1] - cpu}
    if late is not None:
        out.update(late_docs=len(stream) - cut, late_wall_s=end[0] - late[0], late_cpu_s=end[1] - late[1])
    return out


def time_features(step: str, stream, args) -> dict:
    model = pipeline(step, args, len(stream), classify=False)

    def loop(x, _):
        model.learn_one(x)
        model.transform_one(x)

    return _timed(loop, stream, args.refresh_every)


def time_classify(step: str, stream, args) -> dict:
    model = pipeline(step, args, len(stream), classify=True)
    correct = []

    def loop(x, y):
        correct.append(model.predict_one(x) == y)
        model.learn_one(x, y)

    out = _timed(loop, stream, args.refresh_every)
    out["accuracy"] = sum(correct) / len(correct)
    late = correct[args.refresh_every:]
    out["late_accuracy"] = sum(late) / len(late) if late else None
    return out


NAMES = {"none": "none (raw word counts)", "anchor": "AnchorTopics", "lda": "river LDA"}


def table(rows: list[dict], n: int, cut: int) -> str:
    lines = [f"| topic step | mode | docs/s | docs/s after doc {cut} | CPU ms/doc | accuracy | "
             f"accuracy after doc {cut} |", "|---|---|---:|---:|---:|---:|---:|"]

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for r in rows:
        late_rate = r["late_docs"] / r["late_wall_s"] if "late_docs" in r else None
        lines.append(f"| {NAMES[r['step']]} | {r['mode']} | {n / r['wall_s']:.1f} | {fmt(late_rate, '.1f')} | "
                     f"{1000 * r['cpu_s'] / n:.2f} | {fmt(r.get('accuracy'), '.3f')} | "
                     f"{fmt(r.get('late_accuracy'), '.3f')} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=example.DEFAULT_DATA_DIR)
    parser.add_argument("--limit", type=int, default=3000)
    parser.add_argument("--models", default=",".join(STEPS), help="comma-separated: none, anchor, lda")
    parser.add_argument("--modes", default="features,classify")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocabulary-size", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--refresh-every", type=int, default=1000)
    parser.add_argument("--recovery", choices=("l2", "kl"), default="l2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.models.split(",") if s.strip()]
    if set(steps) - set(STEPS):
        parser.error(f"--models: choose from {STEPS}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    stream = example.load_stream(args.data_dir, limit=args.limit, seed=args.seed)
    # Compile the numba kernels outside the timed loops (a one-off of a few seconds per process).
    warm = pipeline("anchor", argparse.Namespace(**{**vars(args), "warmup": 20, "refresh_every": 40}),
                    60, classify=False)
    for x, _ in stream[:60]:
        warm.learn_one(x)
        warm.transform_one(x)

    rows = []
    for step in steps:
        for mode in modes:
            timer = time_features if mode == "features" else time_classify
            row = {"step": step, "mode": mode, **timer(step, stream, args)}
            rows.append(row)
            print(f"{step} {mode}: {len(stream) / row['wall_s']:.1f} docs/s", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{len(stream)} documents of 20newsgroups-bydate train (seed {args.seed}, no headers); "
          f"AnchorTopics(n_topics={args.topics}, vocabulary_size={args.vocabulary_size}, "
          f"warmup_documents={args.warmup}, refresh_every={args.refresh_every}, "
          f"recovery={args.recovery!r}); LDA(n_components={args.topics}, seed={args.seed}).\n"
          f"{machine()}; load average {load:.1f} during the run\n")
    print(table(rows, len(stream), args.refresh_every))
    if args.json:
        args.json.write_text(json.dumps({"documents": len(stream), "machine": machine(), "load_average": load,
                                         "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows},
                                        indent=2))
    return rows


if __name__ == "__main__":
    main()
