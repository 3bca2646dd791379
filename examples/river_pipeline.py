"""Topic features in a river pipeline: AnchorTopics vs river's own LDA on 20 Newsgroups.

The training split of 20newsgroups-bydate is streamed once, shuffled with a fixed seed (the file is
sorted by newsgroup, which would make any stream order meaningless), headers removed (the usual
"body only" variant). Each document goes through

    feature_extraction.BagOfWords | <topic model, 20 topics> | StandardScaler | SoftmaxRegression

and is scored by progressive validation, river's standard: the pipeline predicts the newsgroup
before it learns from the document. The topic model is either streamtopics' AnchorTopics or
river's `preprocessing.LDA`, with the same bag of words in front and the same classifier behind,
so the table compares the topic features and the speed of the topic step.

    .venv/bin/python examples/river_pipeline.py                  # the whole split (LDA: ~25 min)
    .venv/bin/python examples/river_pipeline.py --limit 2000     # a prefix of the stream
    .venv/bin/python examples/river_pipeline.py --models anchor  # ours only

Before its first refresh AnchorTopics outputs no features (``{}``), so the classifier predicts
from its intercepts alone until then; "after warm-up" scores only the documents that came after
the first ``--warmup`` ones, when both models have topics.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from pathlib import Path

from river import compose, feature_extraction, linear_model, metrics, preprocessing

from streamtopics.integrations.river import AnchorTopics
from streamtopics.text.tokenizer import english_stop_words

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
DATASET = Path("20newsgroups-bydate") / "20news-bydate.jsonl.gz"
MODELS = ("anchor", "lda")


def load_stream(data_dir: Path, split: str = "train", limit: int | None = None, seed: int = 0,
                keep_headers: bool = False) -> list[tuple[str, str]]:
    """``(text, newsgroup)`` pairs of one split, shuffled with ``seed``, the first ``limit``."""
    path = Path(data_dir) / DATASET
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: pass --data-dir (the folder holding "
                                f"{DATASET.parent}/)")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        rows = [row for row in map(json.loads, lines) if row["split"] == split]
    random.Random(seed).shuffle(rows)
    rows = rows[:limit] if limit else rows
    return [(row["text"] if keep_headers else body(row["text"]), row["label"]) for row in rows]


def body(text: str) -> str:
    """A post without its headers: everything after the first blank line."""
    head, sep, rest = text.partition("\n\n")
    return rest if sep else head


def bag_of_words() -> feature_extraction.BagOfWords:
    """Word counts: words of 3+ letters, lowercased, English stop words removed."""
    return feature_extraction.BagOfWords(
        stop_words=set(english_stop_words()), tokenizer_pattern=r"(?u)\b[^\W\d_]{3,}\b")


def topic_step(name: str, args, n_documents: int):
    if name == "anchor":
        return AnchorTopics(n_topics=args.topics, vocabulary_size=args.vocabulary_size,
                            warmup_documents=args.warmup, refresh_every=args.refresh_every,
                            recovery=args.recovery)
    if name == "lda":
        return preprocessing.LDA(n_components=args.topics, number_of_documents=n_documents,
                                 seed=args.seed)
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def classifier():
    return preprocessing.StandardScaler() | linear_model.SoftmaxRegression()


def evaluate(name: str, stream, args, progress=None) -> dict:
    """Progressive validation of ``BagOfWords | <name> | classifier`` over ``stream``."""
    topics = topic_step(name, args, len(stream))
    pipeline = compose.Pipeline(bag_of_words(), topics, classifier())
    overall, after_warmup = metrics.Accuracy(), metrics.Accuracy()
    start = time.perf_counter()
    for i, (x, y) in enumerate(stream):
        y_pred = pipeline.predict_one(x)
        overall.update(y, y_pred)
        if i >= args.warmup:
            after_warmup.update(y, y_pred)
        pipeline.learn_one(x, y)
        if progress and (i + 1) % progress == 0:
            print(f"  {name}: {i + 1} documents, accuracy {overall.get():.3f}, "
                  f"{(i + 1) / (time.perf_counter() - start):.1f} docs/s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    result = {
        "model": name,
        "pipeline": f"BagOfWords | {type(topics).__name__}({args.topics}) | StandardScaler | SoftmaxRegression",
        "documents": len(stream),
        "accuracy": overall.get(),
        "accuracy_after_warmup": after_warmup.get() if len(stream) > args.warmup else None,
        "seconds": seconds,
        "docs_per_s": len(stream) / seconds,
    }
    if isinstance(topics, AnchorTopics):
        result["refreshes"] = 0 if topics.snapshot is None else topics.snapshot.version
        result["refresh_failures"] = topics.refresh_failures
        result["top_words"] = {k: [w for w, _ in v] for k, v in topics.top_words(8).items()}
        result["features"] = sorted(pipeline.transform_one(stream[-1][0]))
    return result


def table(results: list[dict]) -> str:
    lines = ["| pipeline | documents | accuracy | after warm-up | docs/s | seconds |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        late = "-" if r["accuracy_after_warmup"] is None else f"{r['accuracy_after_warmup']:.3f}"
        pipeline = r["pipeline"].replace("|", "\\|")  # a literal | inside a markdown cell
        lines.append(f"| {pipeline} | {r['documents']} | {r['accuracy']:.3f} | {late} | "
                     f"{r['docs_per_s']:.1f} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="folder holding 20newsgroups-bydate/ (default: ../shared/data "
                             "relative to the repository root)")
    parser.add_argument("--limit", type=int, default=None, help="stream only the first N documents")
    parser.add_argument("--models", default="anchor,lda", help="comma-separated: anchor, lda")
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--vocabulary-size", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=1000,
                        help="documents that build AnchorTopics' vocabulary")
    parser.add_argument("--refresh-every", type=int, default=1000)
    parser.add_argument("--recovery", choices=("l2", "kl"), default="l2")
    parser.add_argument("--seed", type=int, default=0, help="stream order (and LDA's sampler)")
    parser.add_argument("--keep-headers", action="store_true")
    parser.add_argument("--progress", type=int, default=1000,
                        help="report every N documents on stderr (0: never)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = set(args.models) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; choose from {MODELS}")
    return args


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    stream = load_stream(args.data_dir, limit=args.limit, seed=args.seed,
                         keep_headers=args.keep_headers)
    results = [evaluate(name, stream, args, args.progress) for name in args.models]
    print(f"20 Newsgroups train split as a stream: {len(stream)} documents, shuffled with seed "
          f"{args.seed}, {'with' if args.keep_headers else 'without'} headers; "
          f"progressive validation (predict, then learn)\n")
    print(table(results))
    for r in results:
        if "top_words" in r:
            print(f"\nAnchorTopics after {r['refreshes']} refreshes, top words:")
            for name, words in r["top_words"].items():
                print(f"  {name}: {' '.join(words)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
