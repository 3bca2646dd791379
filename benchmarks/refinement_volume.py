"""How close EM from the anchor seed gets to a Gibbs truth, against how many documents it sees.

The seed is our recovery without refinement (``refine_iterations=0``) on the setting's whole
stream (the quality protocol's :mod:`benchmarks.quality.truths` and :mod:`~benchmarks.quality.streams`);
plain KL-tEM from it (:func:`streamtopics.refinement.kl_tem_step`, the default smoothing, no
held-out split, no early stop) then runs over the first n documents of the same stream, for each
``--documents`` n. Printed: matched L1 to the truth after each of ``--report`` iterations, and the
default model's own L1 on the whole stream for comparison. It separates what the refinement could
reach with more data from what its stopping rule keeps (BENCHMARKS.md, "A reservoir sized by the
topics").

    python -m benchmarks.refinement_volume --setting 20newsgroups:20:0.1 --documents 16000 50000 100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import machine
from benchmarks.quality import streams, truths
from benchmarks.quality.__main__ import CACHE
from streamtopics import StreamingTopicModel
from streamtopics.config import default
from streamtopics.documents import DocumentBatch
from streamtopics.evaluation import matched_l1
from streamtopics.refinement import WordMajor, kl_tem_step


def em_curve(seed: np.ndarray, documents, truth: np.ndarray, report: list[int]) -> dict[int, float]:
    """L1 to ``truth`` after each iteration in ``report`` of KL-tEM from ``seed`` over ``documents``."""
    batch = DocumentBatch.from_csr(documents)
    topic_word, mixtures = np.ascontiguousarray(seed), None
    by_word = WordMajor.of(batch, topic_word.shape[0])
    curve = {}
    for iteration in range(1, max(report) + 1):
        topic_word, mixtures = kl_tem_step(batch, topic_word, mixtures, smoothing=default("refine_smoothing"),
                                           by_word=by_word)
        if iteration in report:
            curve[iteration] = matched_l1(truth, topic_word)
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", default="20newsgroups:20:0.1", help="CORPUS:K:ALPHA")
    parser.add_argument("--documents", type=int, nargs="+", default=[16_000, 50_000, 100_000])
    parser.add_argument("--report", type=int, nargs="+", default=[1, 2, 5, 10, 20, 30])
    parser.add_argument("--cache", default=CACHE)
    args = parser.parse_args()
    corpus, n_topics, alpha = args.setting.split(":")
    n_topics, alpha = int(n_topics), float(alpha)
    truth = truths.load(corpus, n_topics, cache=args.cache)
    stream = streams.draw(truth, max(args.documents), alpha)
    print(f"{args.setting}, stream of {stream.shape[0]:,} documents; {machine()}")

    def fitted(**settings) -> StreamingTopicModel:
        model = StreamingTopicModel(n_topics, vocabulary=list(truth.vocabulary), seed=0, **settings)
        model.learn_many(stream)
        model.refresh()
        return model

    seed = fitted(refine_iterations=0).snapshot.topic_word
    print(f"anchor seed (no refinement): L1 {matched_l1(truth.topic_word, seed):.3f}")
    print(f"defaults (held-out stop, reservoir {default('reservoir_size')}): "
          f"L1 {matched_l1(truth.topic_word, fitted().snapshot.topic_word):.3f}")
    print("| EM on | " + " | ".join(str(i) for i in args.report) + " iterations | seconds |")
    print("|---|" + "---:|" * (len(args.report) + 1))
    for n in args.documents:
        start = time.perf_counter()
        curve = em_curve(seed, stream[:n], truth.topic_word, args.report)
        cells = " | ".join(f"{curve[i]:.3f}" for i in args.report)
        print(f"| {n:,} documents | {cells} | {time.perf_counter() - start:.0f} |")


if __name__ == "__main__":
    main()
