"""State files: size, save and load time of format 2 (main before issue 48: uncompressed arrays)
against the current format (encoded: :mod:`streamtopics.array_encoding`), in one run.

    python -m benchmarks.state_files [--sizes 6000 15000] [--repeats 5] [FILE.state ...]

Without files: 20 Newsgroups (all 18,846 posts, ``../shared/data``), a model of K = 20 with its
vocabulary learned from the first 5,000 posts at each ``--sizes`` V, one refresh; then
``model.save`` (format 2: the same state gathered, then written as main wrote it) and
``StreamingTopicModel.load`` in each format, alternating, medians of
``--repeats``. With files (a checkpoint's ``ckpt-*.state``): their arrays and metadata written and
read in each format (``write_state`` / ``read_state``). Every load is checked bit for bit against
the model's arrays.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine
from streamtopics import StreamingTopicModel, persistence
from streamtopics.state import FORMAT, FORMAT_VERSION, _atomic_write, _digest, _meta_digest, read_state, write_state

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"


def write_format_2(path, arrays: dict, meta: dict) -> Path:
    """``write_state`` as main had it: the raw arrays, SHA-256 of each, uncompressed ``.npz``."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    meta = json.loads(json.dumps(meta))
    manifest = {"format": FORMAT, "format_version": 2, "meta": meta, "meta_checksum": _meta_digest(meta),
                "checksums": {name: _digest(value) for name, value in arrays.items()}}
    payload = dict(arrays, __manifest__=np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8))
    return _atomic_write(Path(path), lambda handle: np.savez(handle, **payload))


WRITERS = {"format 2": write_format_2, f"format {FORMAT_VERSION}": write_state}


def same_arrays(a: dict, b: dict) -> bool:
    """Bit for bit, compared in place (``tobytes()`` copied 1.8 GB at V = 15,000 before each
    next save, which then ran in the memory that churn left)."""
    def bits(array):
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(bits(a[k]), bits(b[k])) for k in a)


def model_of_20news(n_words: int) -> StreamingTopicModel:
    texts = [json.loads(line)["text"] for line in gzip.open(CORPUS, "rt", encoding="utf-8")]
    model = StreamingTopicModel(20, vocabulary_size=n_words, warmup_documents=5000)
    model.learn_many(texts)
    model.refresh()
    return model


def measure(label: str, save, load, reference: dict, path: Path, repeats: int) -> None:
    """Median save and load seconds of each format, alternating, and the file's size."""
    times = {(writer, step): [] for writer in WRITERS for step in ("save", "load")}
    sizes = {}
    for _ in range(repeats):
        for writer in WRITERS:
            path.unlink(missing_ok=True)  # time the save, not the deletion of the other format's file
            os.sync()  # nor the writing back of the other format's file (926 MB at V = 15,000)
            start = time.perf_counter()
            save(writer, path)
            times[writer, "save"].append(time.perf_counter() - start)
            sizes[writer] = path.stat().st_size
            start = time.perf_counter()
            loaded = load(path)
            times[writer, "load"].append(time.perf_counter() - start)
            assert same_arrays(loaded, reference), f"{writer} did not restore the arrays bit for bit"
            del loaded
    for writer in WRITERS:
        print(f"| {label} | {writer} | {sizes[writer] / 1e6:,.1f} | {np.median(times[writer, 'save']):.2f} | "
              f"{np.median(times[writer, 'load']):.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--sizes", nargs="*", type=int, default=[6000, 15000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(machine())
    print("| state | format | MB | save (s) | load (s) |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "model.state"
        for file in args.files:
            arrays, meta = read_state(file)
            measure(file.name, lambda writer, target: WRITERS[writer](target, arrays, meta),
                    lambda target: read_state(target)[0], arrays, path, args.repeats)
        for n_words in args.sizes:
            model = model_of_20news(n_words)
            reference = model.ingest.state_dict()[0]

            def save(writer, target):
                if writer == "format 2":
                    write_format_2(target, *persistence.model_state(model))
                else:
                    model.save(target)

            measure(f"20 Newsgroups, V = {len(model.vocabulary):,}", save,
                    lambda target: StreamingTopicModel.load(target).ingest.state_dict()[0], reference, path,
                    args.repeats)
            del model, reference


if __name__ == "__main__":
    main()
