"""The first refresh of a process with the refinement on a CUDA device: compiled, then cached.

The device's kernels are declared ``cuda.jit(cache=True)`` (:mod:`streamtopics.refresh.gpu`): the first
process compiles them and writes them beside the package, later processes load them. Each row is
a fresh process (V = 2,000, K = 20, 4,000 semi-synthetic documents of Zipf-shaped topics, then 500 more):
its first refresh, its second, and the whole process. One CPU process first, which compiles and
caches the CPU kernels, so that the device rows time the device's kernels alone.

    python -m benchmarks.gpu_first_refresh --processes 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def one_process(device: str) -> None:
    """Refresh twice in this process and print the times (the child's side)."""
    started = time.perf_counter()
    import numpy as np

    from streamtopics import StreamingTopicModel
    from streamtopics.synthetic import semi_synthetic, zipf_topics

    words, topics = 2000, 20
    topic_word = zipf_topics(words, topics, seed=1)
    model = StreamingTopicModel(topics, vocabulary=[f"w{i}" for i in range(words)], refine_device=device)
    times = []
    for n_docs, seed in ((4000, 2), (500, 3)):
        documents, _ = semi_synthetic(topic_word, n_docs, alpha=0.1, doc_length=100, seed=seed)
        model.learn_many(documents)
        tick = time.perf_counter()
        snapshot = model.refresh()
        times.append(time.perf_counter() - tick)
    checksum = float(np.abs(np.asarray(snapshot.topic_word)).sum(axis=1) @ np.arange(words))
    print(f"{times[0]:.2f} {times[1]:.2f} {time.perf_counter() - started:.2f} {checksum:.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=3, help="fresh device processes, one after another")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        one_process(args.child)
        return
    from streamtopics.refresh.device import cuda_available

    if not cuda_available():
        raise SystemExit("numba finds no CUDA device: nothing to measure")
    print("| process | first refresh s | second refresh s | whole process s | topics checksum |")
    print("|---|---|---|---|---|")
    for label, device in [("cpu", "cpu")] + [(f"cuda {i + 1}", "cuda") for i in range(args.processes)]:
        run = subprocess.run([sys.executable, "-m", "benchmarks.gpu_first_refresh", "--child", device],
                             capture_output=True, text=True, check=True)
        first, second, whole, checksum = run.stdout.split()[-4:]
        print(f"| {label} | {first} | {second} | {whole} | {checksum} |", flush=True)


if __name__ == "__main__":
    main()
