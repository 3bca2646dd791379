"""Replay an archive through a topic model, printing topic events as they happen.

    python examples/replay_archive.py                    # the built-in stream (stdlib docstrings)
    python examples/replay_archive.py news.jsonl.gz      # any archive `streamtopics replay` reads

Snapshots and a checkpoint land in runs/example; run it again to see the replay resume from the
checkpoint instead of starting over (delete runs/example to start afresh).
"""

import sys
from pathlib import Path

from consumers import builtin_corpus
from consumers.replay import Replay, checkpoint_dir
from consumers.sources import open_source
from streamtopics import StreamingTopicModel

archive = sys.argv[1] if len(sys.argv) > 1 else "builtin"
out = Path("runs/example")


def show(snapshot, path):
    births = [e for e in snapshot.events if e["type"] == "birth"]
    print(f"snapshot {snapshot.version}: {snapshot.documents_seen} documents, {len(snapshot.events)} events -> {path}")
    for event in births[:3]:
        words = [w for w, _ in snapshot.top_words(5)[event["topic"]]]
        print(f"  born: topic {event['topic']} ({event['anchor']}): {' '.join(words)}")


def report(item):
    print(f"  skipped {item}")


if checkpoint_dir(out).is_dir():
    replay = Replay.resume(out, on_snapshot=show, on_malformed=report)  # continues where it stopped
else:
    tokenizer = builtin_corpus.tokenizer() if archive == "builtin" else None  # docstring stop words
    model = StreamingTopicModel(n_topics=10, vocabulary_size=2000, warmup_documents=500, tokenizer=tokenizer)
    replay = Replay(model, open_source(archive), out, every_documents=1000, on_snapshot=show, on_malformed=report)
summary = replay.run(stop_after=2500)  # stop (and checkpoint) after 2,500 documents of this run
print(f"{summary.documents} documents so far, {sum(summary.malformed.values())} malformed, "
      f"{'stopped: run again to resume' if summary.stopped else 'archive finished'}")
