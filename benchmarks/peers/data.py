"""The streams: semi-synthetic (known topics) and real, prepared once and cached as .npz files.

Semi-synthetic (Arora et al. 2013, section 5.1): a K-topic model is fitted *with our model*
(``StreamingTopicModel(K, vocabulary=words, seed=0)`` on the whole corpus, one refresh) to a real
bag-of-words corpus; documents are then drawn from those topics with symmetric Dirichlet(alpha)
proportions and the corpus's mean document length (:func:`streamtopics.synthetic.semi_synthetic`).
Held-out documents are drawn the same way with another seed. Caveat: topics fitted by an
anchor-word method are separable by construction (every topic has an anchor word), which is the
assumption our method relies on; LDA peers do not need it.

Real streams: the training part, in the file's order, is the stream; held-out documents are a
seeded sample of the test part. Text is tokenized with :class:`streamtopics.text.tokenizer.Tokenizer`
(defaults) and the vocabulary is the ``vocabulary_size`` words of highest document frequency in
the training part (ties broken alphabetically).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
UCI = {
    "uci-kos": ("docword.kos.txt.gz", "vocab.kos.txt.gz"),
    "nips17-bow": ("docword.nips17.txt.gz", "vocab.nips17.txt.gz"),
}


def truth_topics(corpus: str, n_topics: int, data: Path = DATA):
    """(topic_word V x K, vocabulary, mean document length) fitted with our model."""
    from streamtopics import StreamingTopicModel
    from streamtopics.synthetic import load_uci_bow

    docword, vocab = UCI[corpus]
    counts, words = load_uci_bow(data / corpus / docword, data / corpus / vocab)
    model = StreamingTopicModel(n_topics, vocabulary=words, seed=0)
    model.learn_many(counts)
    truth = np.asarray(model.refresh().topic_word, dtype=float)
    length = int(round(counts.sum() / counts.shape[0]))
    return truth, words, length


def semi_synthetic_stream(corpus: str, n_topics: int, alpha: float, n_docs: int, n_heldout: int,
                          data: Path = DATA):
    from streamtopics.synthetic import semi_synthetic

    truth, words, length = truth_topics(corpus, n_topics, data)
    train, _ = semi_synthetic(truth, n_docs, alpha=alpha, doc_length=length, seed=1)
    heldout, _ = semi_synthetic(truth, n_heldout, alpha=alpha, doc_length=length, seed=2)
    return {"train": train.tocsr(), "heldout": heldout.tocsr(), "truth": truth, "vocabulary": words,
            "note": f"K = {n_topics} topics fitted by our model to {corpus}; Dirichlet({alpha}); "
                    f"{length} tokens per document"}


def _read_jsonl(path: Path):
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def _strip_headers(text: str) -> str:
    head, sep, body = text.partition("\n\n")
    return body if sep else text


def real_texts(corpus: str, data: Path = DATA):
    """(train texts, test texts) in arrival order, and a note on how they were cut."""
    if corpus == "20newsgroups-bydate":
        rows = list(_read_jsonl(data / corpus / "20news-bydate.jsonl.gz"))
        train = [_strip_headers(r["text"]) for r in rows if r["split"] == "train"]
        test = [_strip_headers(r["text"]) for r in rows if r["split"] == "test"]
        return train, test, "bydate split; headers stripped (text after the first blank line)"
    if corpus == "reuters21578":
        rows = [r for r in _read_jsonl(data / corpus / "reuters21578.jsonl.gz") if r["text_type"] != "BRIEF"]
        text = lambda r: f"{r['title']}\n{r['body']}"
        train = [text(r) for r in rows if r["lewissplit"] == "TRAIN"]
        test = [text(r) for r in rows if r["lewissplit"] == "TEST"]
        return train, test, "LEWISSPLIT TRAIN as the stream (NEWID order), TEST held out; BRIEF stories dropped"
    if corpus == "debian-descriptions":
        rows = list(_read_jsonl(data / corpus / "debian-bookworm-descriptions.jsonl.gz"))
        train = [r["text"] for i, r in enumerate(rows) if i % 10 != 9]
        test = [r["text"] for i, r in enumerate(rows) if i % 10 == 9]
        return train, test, "packages in name order; every 10th package held out"
    raise ValueError(corpus)


def real_stream(corpus: str, n_heldout: int, vocabulary_size: int = 5000, data: Path = DATA):
    from streamtopics.text.tokenizer import Tokenizer

    train_texts, test_texts, note = real_texts(corpus, data)
    tokenizer = Tokenizer(strip_mail=False)  # the corpus as first defined, so figures stay comparable
    train_counts = [Counter(tokenizer.tokenize(t)) for t in train_texts]
    df = Counter()
    for c in train_counts:
        df.update(c.keys())
    words = [w for w, _ in sorted(df.items(), key=lambda item: (-item[1], item[0]))[:vocabulary_size]]
    index = {w: i for i, w in enumerate(words)}

    def to_csr(all_counts):
        indptr, indices, values = [0], [], []
        for counts in all_counts:
            row = sorted((index[w], c) for w, c in counts.items() if w in index)
            indices.extend(i for i, _ in row)
            values.extend(c for _, c in row)
            indptr.append(len(indices))
        return sp.csr_matrix((np.array(values, float), np.array(indices, np.int32), np.array(indptr)),
                             shape=(len(all_counts), len(words)))

    train = to_csr(train_counts)
    train = train[np.asarray(train.sum(axis=1)).ravel() >= 2]  # documents any system can learn from
    test = to_csr([Counter(tokenizer.tokenize(t)) for t in test_texts])
    usable = np.flatnonzero(np.asarray(test.sum(axis=1)).ravel() >= 4)
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(usable, size=min(n_heldout, usable.size), replace=False))
    return {"train": train, "heldout": test[pick], "truth": None, "vocabulary": words,
            "note": f"{note}; V = {len(words)} most document-frequent training words; training documents "
                    f"with >= 2 known tokens; {pick.size} held-out test documents with >= 4 known tokens"}


def save(stream: dict, path: Path) -> None:
    arrays = {f"train_{k}": getattr(stream["train"], k) for k in ("data", "indices", "indptr")}
    arrays.update({f"heldout_{k}": getattr(stream["heldout"], k) for k in ("data", "indices", "indptr")})
    if stream["truth"] is not None:
        arrays["truth"] = stream["truth"]
    meta = {"vocabulary": stream["vocabulary"], "note": stream["note"],
            "train_shape": stream["train"].shape, "heldout_shape": stream["heldout"].shape}
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


def load(path: Path) -> dict:
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        def csr(part):
            return sp.csr_matrix((f[f"{part}_data"], f[f"{part}_indices"], f[f"{part}_indptr"]),
                                 shape=tuple(meta[f"{part}_shape"]))
        return {"train": csr("train"), "heldout": csr("heldout"),
                "truth": f["truth"] if "truth" in f else None,
                "vocabulary": meta["vocabulary"], "note": meta["note"]}
