"""LDA-C corpora replay like the documents they count, bad lines are counted by reason, and a
replay that absorbs nothing is an error in words (exit 2), not a quiet success."""

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from consumers import reasons
from consumers.replay import Replay
from consumers.sources import LdacSource, Malformed, Record, SourceError, detect_format, open_source
from consumers.sources.archive_file import zstd
from streamtopics import StreamingTopicModel, TopicSnapshot

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REUTERS = DATA / "lda-reuters-rcv1-395" / "reuters.ldac.gz"
THEMES = [
    "apple pear plum cherry orchard harvest fruit juice".split(),
    "goal match striker keeper league referee stadium penalty".split(),
    "planet orbit rocket comet galaxy telescope asteroid launch".split(),
]
WORDS = sorted({w for theme in THEMES for w in theme})


def counted_documents(n=200, seed=5) -> list[dict[str, int]]:
    """Word counts, each document mostly from one theme."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        theme = rng.choice(THEMES)
        words = [rng.choice(theme) for _ in range(rng.randint(6, 14))] + [rng.choice(WORDS)]
        docs.append({w: words.count(w) for w in sorted(set(words))})
    return docs


def ldac_line(doc: dict[str, int], split_first=False) -> str:
    """``N id:count ...``; ``split_first``: the first word's count given in two terms (2 = 1 + 1)."""
    terms = [(WORDS.index(w), c) for w, c in doc.items()]
    if split_first and terms[0][1] > 1:
        (i, c), terms = terms[0], terms[1:]
        terms = [(i, 1), *terms, (i, c - 1)]
    return " ".join([str(len(terms)), *(f"{i}:{c}" for i, c in terms)])


def write_ldac(path: Path, lines: list[str], vocabulary: str | None = "{name}.vocab") -> Path:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    if vocabulary:
        name = path.name.split(".")[0]
        (path.parent / vocabulary.format(name=name)).write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return path


def new_model():
    return StreamingTopicModel(n_topics=3, vocabulary_size=100, warmup_documents=40, batch_size=16)


def snapshot_files(out: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_bytes()) for p in sorted(out.glob("snapshot-*.json"))}


def without_excerpts(snapshots: dict[str, dict]) -> dict[str, dict]:
    """The snapshots with their representative documents' key and text excerpt left out: the
    model keeps those of text documents only (word counts show their words, as text does)."""
    for snapshot in snapshots.values():
        for topic in snapshot["topics"]:
            for document in topic["representatives"]:
                document.pop("key"), document.pop("text", None)
    return snapshots


def cli(*args):
    return subprocess.run([sys.executable, "-m", "consumers.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_an_ldac_corpus_gives_the_snapshots_of_the_same_documents_as_text(tmp_path):
    docs = counted_documents()
    corpus = write_ldac(tmp_path / "toy.ldac.gz", [ldac_line(d, split_first=i % 7 == 0) for i, d in enumerate(docs)])
    reference = tmp_path / "toy.jsonl"  # the same counts as text, keyed alike: the reference
    texts = [" ".join(w for w, c in d.items() for _ in range(c)) for d in docs]
    reference.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    source = open_source(corpus)
    assert source.spec["format"] == "ldac" and source.spec["vocabulary"] == str((tmp_path / "toy.vocab").resolve())
    expected = Replay(new_model(), open_source(reference), tmp_path / "text", every_documents=50).run()
    summary = Replay(new_model(), source, tmp_path / "ldac", every_documents=50).run()
    assert summary.absorbed == expected.absorbed == len(docs) and not summary.malformed
    assert len(snapshot_files(tmp_path / "ldac")) == 4
    assert without_excerpts(snapshot_files(tmp_path / "ldac")) == without_excerpts(snapshot_files(tmp_path / "text"))


def test_an_ldac_replay_resumes_exactly_with_the_same_word_list(tmp_path):
    corpus = write_ldac(tmp_path / "toy.ldac", [ldac_line(d) for d in counted_documents()], "vocab.txt")
    Replay(new_model(), open_source(corpus), tmp_path / "whole", every_documents=50).run()
    Replay(new_model(), open_source(corpus), tmp_path / "parts", every_documents=50).run(stop_after=70)
    resumed = Replay.resume(tmp_path / "parts")
    assert resumed.source.spec["vocabulary"] == str((tmp_path / "vocab.txt").resolve())
    resumed.run()
    assert snapshot_files(tmp_path / "parts") == snapshot_files(tmp_path / "whole")


def test_every_line_is_a_document_keyed_by_its_index_with_its_counts(tmp_path):
    corpus = write_ldac(tmp_path / "c.ldac", ["2 0:3 5:1", "", "0", "3 2:1 2:2 1:1"])
    items = list(open_source(corpus))
    assert [(i.key, i.document) for i in items] == [
        (0, {WORDS[0]: 3, WORDS[5]: 1}), (2, {}), (3, {WORDS[2]: 3, WORDS[1]: 1})]


@pytest.mark.parametrize("line, reason, detail", [
    ("3 1:2 x:1 4:1", reasons.BAD_LINE, "term 2, b'x:1', is not id:count"),
    ("2 1:2 4", reasons.BAD_LINE, "term 2, b'4', is not id:count"),
    ("two 1:2 4:1", reasons.BAD_LINE, "expected N, the number of terms, first, not b'two'"),
    ("-2 1:2 4:1", reasons.BAD_LINE, "expected N, the number of terms, first, not b'-2'"),
    ("2 1:1.5 3:1", reasons.BAD_COUNT, "term 1, b'1:1.5': not a whole number"),
    ("2 1:-1 3:1", reasons.BAD_COUNT, "term 1, b'1:-1': not a whole number"),
    ("1 1:" + "9" * 30, reasons.BAD_COUNT, "term 1: a count of 30 digits"),
    (f"2 1:1 {len(WORDS)}:1", reasons.WORD_ID_OUT_OF_RANGE, f"{len(WORDS)} outside 0..{len(WORDS) - 1}"),
    ("1 " + "9" * 30 + ":1", reasons.WORD_ID_OUT_OF_RANGE, f"{10 ** 18} outside 0..{len(WORDS) - 1}"),
    ("3 1:1 2:1", reasons.TERM_COUNT_MISMATCH, "N is 3, the line has 2 id:count terms"),
    ("1 1:1 2:1", reasons.TERM_COUNT_MISMATCH, "N is 1, the line has 2 id:count terms"),
])
def test_a_malformed_line_is_reported_with_its_reason_and_line_and_the_read_goes_on(tmp_path, line, reason, detail):
    corpus = write_ldac(tmp_path / "c.ldac.gz", ["2 0:1 1:1", line, "2 2:1 3:1"])
    items = list(open_source(corpus))
    assert [i.key for i in items if isinstance(i, Record)] == [0, 2]
    assert [(i.where, i.reason, i.detail) for i in items if isinstance(i, Malformed)] == [
        (f"{corpus}:2", reason, detail)]


def test_the_replay_counts_bad_lines_by_reason_reports_them_and_succeeds(tmp_path):
    lines = [ldac_line(d) for d in counted_documents(120)]
    lines[10], lines[20], lines[30], lines[40] = "3 1:2 x:1 4:1", "2 1:1.5 3:1", "1 999:1", "5 1:1"
    corpus = write_ldac(tmp_path / "c.ldac.gz", lines)
    result = cli("replay", corpus, "--out", tmp_path / "run", "--n-topics", "3", "--warmup-documents", "40")
    assert result.returncode == 0, result.stderr
    assert "116 absorbed" in result.stdout
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["malformed"] == {reasons.BAD_LINE: 1, reasons.BAD_COUNT: 1, reasons.WORD_ID_OUT_OF_RANGE: 1,
                                   reasons.TERM_COUNT_MISMATCH: 1}
    assert "c.ldac.gz:41: term count mismatch (N is 5, the line has 1 id:count terms)" in result.stderr


def test_the_word_list_is_found_beside_the_corpus_or_named(tmp_path):
    for name in ("c.vocab", "c.tokens.gz", "vocab.txt"):
        folder = tmp_path / name
        folder.mkdir()
        corpus = write_ldac(folder / "c.ldac", ["2 0:1 1:1"], vocabulary=None)
        data = ("\n".join(WORDS) + "\n").encode()
        (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        assert open_source(corpus).spec["vocabulary"] == str((folder / name).resolve())
    corpus = write_ldac(tmp_path / "d.ldac.zst", [], vocabulary=None)
    corpus.write_bytes(zstd.compress(b"2 0:1 1:1\n"))
    with pytest.raises(SourceError, match="needs its word list.*--vocabulary FILE"):
        open_source(corpus)
    (tmp_path / "words.list").write_text("\n".join(WORDS) + "\n")
    source = open_source(corpus, vocabulary=tmp_path / "words.list")
    assert [i.document for i in source] == [{WORDS[0]: 1, WORDS[1]: 1}]
    with pytest.raises(SourceError, match="no such vocabulary file"):
        open_source(corpus, vocabulary=tmp_path / "missing.txt")
    with pytest.raises(SourceError, match="for LDA-C corpora"):
        open_source(write_ldac(tmp_path / "e.txt", ["some text"], vocabulary=None), vocabulary=tmp_path / "words.list")


def test_a_corpus_under_another_name_is_recognised_by_its_lines(tmp_path):
    corpus = write_ldac(tmp_path / "ap.dat", [ldac_line(d) for d in counted_documents(30)], vocabulary="vocab.txt")
    assert detect_format(str(corpus)) == "lines"
    assert isinstance(open_source(corpus), LdacSource)
    text = tmp_path / "notes.txt"
    text.write_text("1 apple a day\n3 1:2 4:1\n")
    assert open_source(text).spec["format"] == "lines"


def test_the_shared_reuters_sample_replays_with_every_document_absorbed(tmp_path):
    source = open_source(REUTERS)
    documents = [i for i in source if isinstance(i, Record)]
    assert len(documents) == 395 and len(source.words) == 4258
    assert sum(len(d.document) for d in documents) == 60_114  # the sample's README: non-zeros, tokens
    assert sum(sum(d.document.values()) for d in documents) == 84_010
    result = cli("replay", REUTERS, "--out", tmp_path / "run", "--n-topics", "10", "--words", "10")
    assert result.returncode == 0, result.stderr
    assert "replayed 395 documents from reuters.ldac.gz: 395 absorbed, 0 rejected, 0 malformed" in result.stdout
    snapshot = TopicSnapshot.load(tmp_path / "run" / "snapshot-000001.json")
    top_words = {w for words in snapshot.top_words(10).values() for w, _ in words}
    assert {"pope", "teresa", "elvis", "yeltsin"} <= top_words, top_words


def test_a_replay_that_absorbs_nothing_exits_2_saying_why(tmp_path):
    text = tmp_path / "counts.txt"  # LDA-C read as text (what the shared sample gave before)
    text.write_bytes(gzip.decompress(REUTERS.read_bytes()))
    result = cli("replay", text, "--format", "lines", "--out", tmp_path / "a")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: counts.txt: absorbed 0 of 395 documents: all 395 rejected as empty "
                                    "(read as format lines; hint: no document held a word"), result.stderr
    assert "--format" in result.stderr
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    result = cli("replay", blank, "--out", tmp_path / "b")
    assert (result.returncode, result.stderr) == (2, "Error: blank.txt: no document found (read as format lines)\n")
    result = cli("replay", text, "--out", tmp_path / "c")  # recognised as LDA-C by its lines: needs its words
    assert result.returncode == 2 and "LDA-C corpus needs its word list" in result.stderr


def test_a_replay_stopped_while_warming_up_is_not_refused(tmp_path):
    corpus = write_ldac(tmp_path / "toy.ldac", [ldac_line(d) for d in counted_documents()])
    result = cli("replay", corpus, "--out", tmp_path / "run", "--stop-after", "20", "--warmup-documents", "40")
    assert result.returncode == 0, result.stderr
    assert "replayed 20 documents from toy.ldac: 0 absorbed, 0 rejected" in result.stdout
