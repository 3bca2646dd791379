"""A warm refresh with the refinement on a CUDA device against the CPU, on one machine, in one run
(``refine_device``, :mod:`streamtopics.refresh.gpu`; issue 17 item 5).

The stream of ``benchmarks.default_costs``: V = 15,000, K = 100, Zipf-shaped semi-synthetic
documents of 300 tokens (alpha 0.1); a model absorbs 30,000 and refreshes, then copies of it
absorb 10 % more and refresh warm, ``refine_device="cpu"`` and ``"cuda"`` alternately. Printed:
the phases of the warm refreshes (median of ``--repeats``), the first CUDA refresh's time (its
kernels compile then), and the largest L1 distance between a topic refined on the CPU and the
same topic refined on the device.

    python -m benchmarks.gpu_refinement --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from benchmarks.common import machine
from benchmarks.default_costs import PHASES
from streamtopics import StreamingTopicModel
from streamtopics.refresh.device import cuda_available, device_name
from streamtopics.synthetic import semi_synthetic, zipf_topics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=15000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--docs", type=int, default=30000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not cuda_available():
        raise SystemExit("numba finds no CUDA device: nothing to compare")
    print(f"# {machine()}; {device_name()}")
    vocabulary = [f"w{i}" for i in range(args.words)]
    topic_word = zipf_topics(args.words, args.topics, seed=1)
    docs, _ = semi_synthetic(topic_word, int(args.docs * 1.1), alpha=0.1, doc_length=300, seed=2)
    model = StreamingTopicModel(args.topics, vocabulary=vocabulary)
    model.learn_many(docs[: args.docs])
    model.refresh()  # the CPU kernels compile here

    def warm(device: str):
        copied = copy.deepcopy(model)
        copied.config.refine_device = device
        copied.learn_many(docs[args.docs:])
        snapshot = copied.refresh()
        return snapshot.topic_word, copied.last_refresh

    t0 = time.perf_counter()
    warm("cuda")
    print(f"first CUDA warm refresh (its kernels compile): {time.perf_counter() - t0:.2f} s")
    runs = {"cpu": [], "cuda": []}
    distances = []
    for _ in range(max(args.repeats, 1)):
        topics = {}
        for device in runs:
            topics[device], timings = warm(device)
            runs[device].append(timings)
        distances.append(float(np.abs(topics["cpu"] - topics["cuda"]).sum(axis=0).max()))
    print(f"\nwarm refresh phases, s (median of {max(args.repeats, 1)}):\n\n| refine_device | "
          + " | ".join(p.removesuffix("_s") for p in PHASES) + " |\n" + "|---" * (len(PHASES) + 1) + "|")
    for device, timings in runs.items():
        print(f"| {device} | " + " | ".join(f"{np.median([t[p] for t in timings]):.2f}" for p in PHASES) + " |")
    ratio = np.median([c["refine_s"] for c in runs["cpu"]]) / np.median([g["refine_s"] for g in runs["cuda"]])
    print(f"\nrefine phase, cpu / cuda: {ratio:.1f}; largest topic L1 between the two: {max(distances):.2e}")


if __name__ == "__main__":
    main()
