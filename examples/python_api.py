"""The engine from Python: learn documents one at a time, refresh, read topics, infer, save.

    python examples/python_api.py
"""

import tempfile
from itertools import islice
from pathlib import Path

from consumers.builtin_corpus import BuiltinCorpus, tokenizer
from streamtopics import StreamingTopicModel

rejected = []
model = StreamingTopicModel(n_topics=8, vocabulary_size=2000, warmup_documents=500, tokenizer=tokenizer(),
                            on_reject=lambda rejection, document, key: rejected.append((key, rejection.reason)))

for record in islice(BuiltinCorpus(), 2000):  # any text works: str, bytes, token lists, {word: count}
    model.learn_one(record.document, key=record.key)
model.learn_one(b"\xff\xfe not UTF-8")  # bad input is counted and handed to on_reject, never raised

snapshot = model.refresh()  # anchors -> recovery -> aligned, versioned topics
for topic, words in snapshot.top_words(6).items():
    print(f"topic {topic} ({snapshot.anchors[snapshot.column(topic)]}): {' '.join(w for w, _ in words)}")
print("rejections:", dict(model.rejections), "e.g.", rejected[-1])

mixture = model.transform_one("Open a TCP socket, connect to the server and send the request bytes.")
print("mixture:", {t: round(w, 2) for t, w in sorted(mixture.items(), key=lambda kv: -kv[1])[:3]})

with tempfile.TemporaryDirectory() as tmp:
    path = model.save(Path(tmp) / "model.npz")  # statistics, vocabulary, config, latest snapshot
    restored = StreamingTopicModel.load(path)
    assert restored.transform_one("socket server request") == model.transform_one("socket server request")
    snapshot.save(Path(tmp) / "snapshot.json")  # the topics alone, as JSON
print(repr(restored))
