"""Held-out log-likelihood per token on a real stream: anchor recovery only, recovery + seeded
KL-tEM refinement, and gensim's online LDA, on the same stream in the same run, with times.

Stream: 20newsgroups-bydate training posts in arrival order (headers stripped, the project's
tokenizer, V = 5,000 most document-frequent words; :func:`benchmarks.peers.data.real_stream`),
one pass. Held out: test posts. Metric, the same for the three: document completion — each
held-out document's distinct words are split alternately in two halves, the mixture is fitted on
the first half against the system's topic-word matrix (:func:`streamtopics.inference.infer_mixtures`,
the same KL inference for all) and the second half's tokens are scored by log (A gamma)_j (floor
1e-9). gensim: ``LdaModel(num_topics=K, chunksize=2000, passes=1, update_every=1)`` fed the stream
chunk by chunk (online variational Bayes, Hoffman et al. 2010), topics = ``get_topics()``.

    python -m benchmarks.refinement --topics 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from streamtopics.text.documents import DocumentBatch
from streamtopics.model import StreamingTopicModel
from streamtopics.refresh.refinement import completion_log_likelihood, split_for_completion
from streamtopics.refresh.reservoir import Reservoir


def heldout_ll(heldout, topic_word) -> float:
    observed, held = split_for_completion(DocumentBatch.from_csr(heldout))
    return completion_log_likelihood(observed, held, np.ascontiguousarray(topic_word))


def ours(stream, k, refine_iterations, reservoir_size, kind="uniform"):
    t0 = time.perf_counter()
    model = StreamingTopicModel(k, stream["vocabulary"], refine_iterations=refine_iterations,
                                reservoir_size=reservoir_size)
    if refine_iterations:
        model.ingest.reservoir = Reservoir(reservoir_size, kind)
    model.learn_many(stream["train"])
    snapshot = model.refresh()
    seconds = time.perf_counter() - t0
    return snapshot.topic_word, seconds, model.last_refresh


def gensim_lda(stream, k, seed=0):
    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    words = stream["vocabulary"]
    id2word = Dictionary([[w] for w in words])
    remap = np.array([id2word.token2id[w] for w in words])
    train = stream["train"]
    t0 = time.perf_counter()
    model = LdaModel(id2word=id2word, num_topics=k, chunksize=2000, passes=1, update_every=1,
                     eval_every=None, random_state=seed)
    for start in range(0, train.shape[0], 2000):
        chunk = train[start:start + 2000]
        corpus = [list(zip(remap[chunk.indices[a:b]].tolist(), chunk.data[a:b].tolist()))
                  for a, b in zip(chunk.indptr[:-1], chunk.indptr[1:])]
        model.update(corpus)
    seconds = time.perf_counter() - t0
    topics = model.get_topics()  # K x V in gensim ids
    return topics[:, remap].T, seconds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--heldout", type=int, default=2000)
    parser.add_argument("--refine-iterations", type=int, default=10,
                        help="at most this many; refinement stops once its held-out score has peaked")
    parser.add_argument("--reservoir", type=int, default=4000)
    args = parser.parse_args(argv)
    from benchmarks.peers.data import real_stream

    stream = real_stream("20newsgroups-bydate", args.heldout)
    print(f"{stream['train'].shape[0]} training documents, {stream['heldout'].shape[0]} held out, "
          f"V = {len(stream['vocabulary'])}, K = {args.topics}; {stream['note']}\n")
    print("| system | held-out LL per token | seconds (learn + topics) |")
    print("|---|---|---|")
    a, s, _ = ours(stream, args.topics, 0, args.reservoir)
    print(f"| anchor recovery only | {heldout_ll(stream['heldout'], a):.4f} | {s:.1f} |", flush=True)
    traces = {}
    for kind, label in (("uniform", "a uniform sample of"), ("recent", "the last")):
        a, s, info = ours(stream, args.topics, args.refine_iterations, args.reservoir, kind)
        traces[kind] = info["refinement_heldout"]
        print(f"| recovery + KL-tEM refinement ({len(traces[kind]) - 1} of at most {args.refine_iterations} "
              f"iterations over {label} {args.reservoir} documents; iterate kept "
              f"{info['refinement_kept_iteration']}, refinement and alpha search {info['refine_s']:.2f} s) "
              f"| {heldout_ll(stream['heldout'], a):.4f} | {s:.1f} |", flush=True)
    a, s = gensim_lda(stream, args.topics)
    print(f"| gensim LdaModel online, 1 pass | {heldout_ll(stream['heldout'], a):.4f} | {s:.1f} |", flush=True)
    for kind, trace in traces.items():
        print(f"\n{kind} reservoir, its held-out third, LL per token by iterate (0 = recovered topics):",
              " ".join(f"{v:.4f}" for v in trace))


if __name__ == "__main__":
    main()
