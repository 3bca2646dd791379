"""How close refinement from the anchor seed gets to a Gibbs truth, against how many documents it
sees and which objective it climbs.

The seed is our recovery without refinement (``refine_iterations=0``) on the setting's whole
stream (the quality protocol's :mod:`benchmarks.quality.truths` and :mod:`~benchmarks.quality.streams`);
plain KL-tEM from it (:func:`streamtopics.refinement.kl_tem_step`, the default smoothing, no
held-out split, no early stop) then runs over the first n documents of the same stream, for each
``--documents`` n. Printed: matched L1 to the truth after each of ``--report`` iterations, and the
default model's own L1 on the whole stream for comparison. It separates what the refinement could
reach with more data from what its stopping rule keeps (BENCHMARKS.md, "A reservoir sized by the
topics").

The same seed and documents also go through CVB0 (zero-order collapsed variational Bayes for LDA,
Asuncion et al. 2009), a candidate objective for the refinement: it keeps LDA's Dirichlet priors
(``--alpha`` on the document mixtures, ``--beta`` on the topics), where KL-tEM climbs the
likelihood of a mixture of multinomials whose fixed point, on short documents, lies farther from
the truth than the anchor seed (BENCHMARKS.md, "CVB0 from the anchor seed"). Its responsibilities
start from the seed: each word of a document split over the topics by ``A_wk theta_dk``.

    python -m benchmarks.refinement_volume --setting 20newsgroups:20:0.1 --documents 16000 50000 100000
    python -m benchmarks.refinement_volume --setting debian:50:0.03 --documents 32000 --report 1 5 10 30
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from benchmarks.common import machine
from benchmarks.quality import streams, truths
from benchmarks.quality.__main__ import CACHE
from streamtopics import StreamingTopicModel
from streamtopics.config import default
from streamtopics.documents import DocumentBatch
from streamtopics.evaluation import matched_l1
from streamtopics.inference import infer_mixtures
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


@njit(cache=True, nogil=True)
def _cvb0_sweep(indptr, indices, counts, shares, word_topic, topic_total, doc_topic, alpha, beta):
    """One CVB0 sweep in document order: each entry's expected topic counts leave the totals, are
    recomputed as ``(n_wk + beta) / (n_k + V beta) * (n_dk + alpha)`` and go back in."""
    n_words, k = word_topic.shape
    p = np.empty(k)
    for d in range(indptr.size - 1):
        for e in range(indptr[d], indptr[d + 1]):
            w, c = indices[e], counts[e]
            for a in range(k):
                x = c * shares[e, a]
                word_topic[w, a] -= x
                topic_total[a] -= x
                doc_topic[d, a] -= x
            total = 0.0
            for a in range(k):
                p[a] = ((max(word_topic[w, a], 0.0) + beta) / (max(topic_total[a], 0.0) + n_words * beta)
                        * (max(doc_topic[d, a], 0.0) + alpha))
                total += p[a]
            for a in range(k):
                shares[e, a] = p[a] / total
                x = c * shares[e, a]
                word_topic[w, a] += x
                topic_total[a] += x
                doc_topic[d, a] += x


def cvb0_curve(seed: np.ndarray, documents, truth: np.ndarray, report: list[int], alpha: float,
               beta: float) -> dict[int, float]:
    """L1 to ``truth`` after each sweep in ``report`` of CVB0 from ``seed`` over ``documents``."""
    batch = DocumentBatch.from_csr(documents)
    mixtures = infer_mixtures(batch, seed, None, max_iter=50, tol=1e-6)
    doc_of = np.repeat(np.arange(len(batch)), np.diff(batch.indptr))
    shares = seed[batch.indices] * mixtures[doc_of]
    shares /= shares.sum(axis=1, keepdims=True)
    counts = batch.counts.astype(np.float64)
    word_topic = np.zeros_like(seed)
    np.add.at(word_topic, batch.indices, counts[:, None] * shares)
    doc_topic = np.zeros((len(batch), seed.shape[1]))
    np.add.at(doc_topic, doc_of, counts[:, None] * shares)
    topic_total = word_topic.sum(axis=0)
    curve = {}
    for sweep in range(1, max(report) + 1):
        _cvb0_sweep(batch.indptr, batch.indices, counts, shares, word_topic, topic_total, doc_topic, alpha, beta)
        if sweep in report:
            curve[sweep] = matched_l1(truth, (word_topic + beta) / (topic_total + seed.shape[0] * beta))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", default="20newsgroups:20:0.1", help="CORPUS:K:ALPHA")
    parser.add_argument("--documents", type=int, nargs="+", default=[16_000, 50_000, 100_000])
    parser.add_argument("--report", type=int, nargs="+", default=[1, 2, 5, 10, 20, 30])
    parser.add_argument("--cache", default=CACHE)
    parser.add_argument("--alpha", type=float, default=0.03, help="CVB0's symmetric Dirichlet on the mixtures")
    parser.add_argument("--beta", type=float, default=0.01, help="CVB0's symmetric Dirichlet on the topics")
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
    print("| on | " + " | ".join(str(i) for i in args.report) + " iterations | seconds |")
    print("|---|" + "---:|" * (len(args.report) + 1))
    for n in args.documents:
        for name, curve_of in (("KL-tEM", lambda docs: em_curve(seed, docs, truth.topic_word, args.report)),
                               (f"CVB0 (alpha {args.alpha:g}, beta {args.beta:g})",
                                lambda docs: cvb0_curve(seed, docs, truth.topic_word, args.report, args.alpha,
                                                        args.beta))):
            start = time.perf_counter()
            curve = curve_of(stream[:n])
            cells = " | ".join(f"{curve[i]:.3f}" for i in args.report)
            print(f"| {name}, {n:,} documents | {cells} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
