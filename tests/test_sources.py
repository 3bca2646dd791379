"""Archive sources: every format gives the same documents, positions resume exactly, and
malformed records are reported with file and line without stopping the stream."""

import csv
import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from consumers import reasons
from consumers.builtin_corpus import BuiltinCorpus, docstrings
from consumers.messages import MessageDecoder
from consumers.sources.archive_file import zstd
from consumers.sources import Malformed, Record, SourceError, UciSource, detect_format, open_source
from consumers.times import parse_time
from streamtopics import StreamingTopicModel, Tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
THEMES = [
    "apple pear plum cherry orchard harvest fruit juice".split(),
    "goal match striker keeper league referee stadium penalty".split(),
    "planet orbit rocket comet galaxy telescope asteroid launch".split(),
]


def make_docs(n=60, seed=0):
    """Single-line documents with commas and quotes (so CSV must quote them)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        theme = rng.choice(THEMES)
        words = [rng.choice(theme) for _ in range(rng.randint(6, 12))]
        words[1] = f'"{words[1]}",'
        docs.append(" ".join(words) + ", 3 times!")
    return docs


def write_all_formats(tmp_path: Path, docs: list[str]) -> dict[str, Path]:
    rows = [{"id": i, "text": t, "time": 1_000_000 + 60 * i} for i, t in enumerate(docs)]
    jsonl = "".join(json.dumps(r) + "\n" for r in rows).encode()
    paths = {
        "jsonl": tmp_path / "docs.jsonl", "gz": tmp_path / "docs.jsonl.gz", "zst": tmp_path / "docs.jsonl.zst",
        "csv": tmp_path / "docs.csv", "tsv": tmp_path / "docs.tsv", "lines": tmp_path / "docs.txt",
        "lines_gz": tmp_path / "docs.txt.gz", "dir": tmp_path / "docs",
    }
    paths["jsonl"].write_bytes(jsonl)
    paths["gz"].write_bytes(gzip.compress(jsonl))
    half = jsonl.index(b"\n", len(jsonl) // 2) + 1  # two Zstandard frames, one after the other
    paths["zst"].write_bytes(zstd.compress(jsonl[:half])
                             + zstd.compress(jsonl[half:]))
    for key, delimiter in (("csv", ","), ("tsv", "\t")):
        with open(paths[key], "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, ["id", "text", "time"], delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
    lines = "".join(t + "\n" for t in docs).encode()
    paths["lines"].write_bytes(lines)
    paths["lines_gz"].write_bytes(gzip.compress(lines))
    paths["dir"].mkdir()
    for i, text in enumerate(docs):
        (paths["dir"] / f"{i:04d}.txt").write_text(text, encoding="utf-8")
    (paths["dir"] / ".hidden").write_text("never read")
    return paths


def write_uci(tmp_path: Path, docs: list[str], name="toy") -> Path:
    """The same documents, tokenized, in UCI docword + vocab form (gzip)."""
    counts = [Tokenizer().count(t) for t in docs]
    words = sorted({w for c in counts for w in c})
    ids = {w: i + 1 for i, w in enumerate(words)}
    body = [f"{d + 1} {ids[w]} {c[w]}" for d, c in enumerate(counts) for w in sorted(c, key=ids.get)]
    text = f"{len(docs)}\n{len(words)}\n{len(body)}\n" + "\n".join(body) + "\n"
    docword = tmp_path / f"docword.{name}.txt.gz"
    docword.write_bytes(gzip.compress(text.encode()))
    (tmp_path / f"vocab.{name}.txt.gz").write_bytes(gzip.compress(("\n".join(words) + "\n").encode()))
    return docword


def records(source):
    return [item for item in source if isinstance(item, Record)]


def statistics_of(source, vocabulary):
    model = StreamingTopicModel(n_topics=3, vocabulary=vocabulary, batch_size=7)
    for record in records(source):
        model.learn_one(record.document, record.key)
    return model.statistics()


def test_every_format_gives_identical_statistics(tmp_path):
    docs = make_docs()
    paths = write_all_formats(tmp_path, docs)
    vocabulary = sorted({w for t in docs for w in Tokenizer().tokenize(t)})
    reference = StreamingTopicModel(n_topics=3, vocabulary=vocabulary)
    reference.learn_many(docs)
    expected = reference.statistics()
    sources = {name: open_source(path) for name, path in paths.items()}
    sources["uci"] = open_source(write_uci(tmp_path, docs))
    assert {name: s.spec["format"] for name, s in sources.items()} == {
        "jsonl": "jsonl", "gz": "jsonl", "zst": "jsonl", "csv": "csv", "tsv": "tsv",
        "lines": "lines", "lines_gz": "lines", "dir": "dir", "uci": "uci"}
    for name, source in sources.items():
        got = statistics_of(source, vocabulary)
        assert got.n_docs == len(docs), name
        assert np.array_equal(got.packed, expected.packed), name
        assert np.array_equal(got.word_mass, expected.word_mass), name
        assert np.array_equal(got.document_frequency, expected.document_frequency), name


def test_fields_keys_and_timestamps(tmp_path):
    docs = make_docs(5)
    paths = write_all_formats(tmp_path, docs)
    for name in ("jsonl", "csv", "tsv"):
        got = records(open_source(paths[name], time_field="time"))
        assert [r.document for r in got] == docs
        assert [str(r.key) for r in got] == [str(i) for i in range(5)]
        assert [r.timestamp for r in got] == [1_000_000.0 + 60 * i for i in range(5)]
    assert [r.key for r in records(open_source(paths["dir"]))] == [f"{i:04d}.txt" for i in range(5)]
    assert [r.key for r in records(open_source(paths["lines"]))] == [None] * 5


def test_several_text_fields_are_joined(tmp_path):
    path = tmp_path / "news.jsonl"
    path.write_text(json.dumps({"title": "Cocoa review", "body": "Showers continued", "id": "a"}) + "\n"
                    + json.dumps({"title": "Only a title", "body": None}) + "\n")
    got = records(open_source(path, text_fields=["title", "body"]))
    assert [r.document for r in got] == ["Cocoa review\nShowers continued", "Only a title"]
    assert [r.key for r in got] == ["a", None]


@pytest.mark.parametrize("name", ["jsonl", "gz", "zst", "csv", "tsv", "lines", "dir", "uci"])
def test_position_resumes_exactly(tmp_path, name):
    docs = make_docs(25)
    paths = write_all_formats(tmp_path, docs)
    path = write_uci(tmp_path, docs) if name == "uci" else paths[name]
    source = open_source(path)
    seen = []
    for item in source:
        seen.append((source.position, item))
    assert len(seen) == 25
    for k in (0, 1, 12, 24):
        position, _ = seen[k]
        rest = list(open_source(**source.spec, start=position))
        assert rest == [item for _, item in seen[k + 1:]], (name, k)


def test_malformed_jsonl_is_reported_with_line_and_skipped(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "first good"}\n'
                     b'{"text": "broken\n'
                     b'\n'
                     b'{"body": "no text field"}\n'
                     b'{"text": "caf\xe9 latin-1"}\n'
                     b'[1, 2]\n'
                     b'{"text": 42}\n'
                     b'{"text": "last good", "time": "yesterday"}\n')
    items = list(open_source(path))
    assert [r.document for r in items if isinstance(r, Record)] == ["first good", "last good"]
    bad = [(m.where, m.reason) for m in items if isinstance(m, Malformed)]
    assert bad == [(f"{path}:2", "malformed_json"), (f"{path}:4", "missing_field"), (f"{path}:5", "not_utf8"),
                   (f"{path}:6", "undecodable"), (f"{path}:7", "undecodable")]
    assert [str(m).split(": ", 1)[1] for m in items if isinstance(m, Malformed)][2:4] == [
        "not UTF-8 (byte 14 of the line)", "undecodable (a JSON list, not an object)"]
    timed = list(open_source(path, time_field="time"))
    assert (f"{path}:8", "undecodable") in [(m.where, m.reason) for m in timed if isinstance(m, Malformed)]
    assert (f"{path}:1", "missing_field") in [(m.where, m.reason) for m in timed if isinstance(m, Malformed)]


def test_archives_and_messages_give_the_same_reason_for_the_same_failure(tmp_path):
    decoder = MessageDecoder(format="json")
    path = tmp_path / "bad.jsonl"
    for value in (b'{"text": "caf\xe9"}', b'{"text": "broken', b'{"body": "x"}', b"[1, 2]", b'{"text": 42}',
                  b'{"text": "x", "timestamp": "soon"}'):
        path.write_bytes(value + b"\n")
        (item,) = open_source(path, time_field="timestamp" if b"timestamp" in value else None)
        assert item.reason == decoder.decode(value).reason, value
        assert item.reason in reasons.MESSAGES


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_truncated_archive_is_reported_at_the_line_where_it_ends(tmp_path, suffix):
    data = "".join(json.dumps({"text": f"document number {i} " + "word " * 30}) + "\n" for i in range(3000)).encode()
    packed = gzip.compress(data) if suffix == ".gz" else zstd.compress(data)
    path = tmp_path / f"cut.jsonl{suffix}"
    path.write_bytes(packed[: len(packed) // 2])
    items = list(open_source(path))
    good = [r for r in items if isinstance(r, Record)]
    assert isinstance(items[-1], Malformed) and items[-1].reason == "truncated_archive"
    assert 0 < len(good) < 3000
    assert items[-1].where == f"{path}:{len(good) + 1}"
    assert [r.document.split()[2] for r in good] == [str(i) for i in range(len(good))]  # no partial record


def test_csv_errors(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b'id,text\n1,"good, quoted"\n2,"bad \xff byte"\n3\n4,fine\n')
    items = list(open_source(path))
    assert [r.document for r in items if isinstance(r, Record)] == ["good, quoted", "fine"]
    assert [(m.where, m.reason) for m in items if isinstance(m, Malformed)] == [
        (f"{path}:3", "not_utf8"), (f"{path}:4", "wrong_field_count")]
    with pytest.raises(SourceError, match=r"no column 'body' \(columns: id, text\)"):
        open_source(path, text_fields=["body"])
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match="header"):
        open_source(empty)


def test_directory_reports_undecodable_files(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("fine text")
    (tmp_path / "d" / "b.txt").write_bytes(b"\xff\xfe broken")
    items = list(open_source(tmp_path / "d"))
    assert items[0] == Record("fine text", "a.txt")
    assert (items[1].where, items[1].reason) == (str(tmp_path / "d" / "b.txt"), "not_utf8")


def test_uci_malformed_lines_and_truncation(tmp_path):
    docword = write_uci(tmp_path, make_docs(30))
    lines = gzip.decompress(docword.read_bytes()).decode().splitlines()
    lines[5] = "1 oops 2"
    lines[7] = "1 99999 1"
    docword.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    items = list(UciSource(docword))
    assert [(m.where, m.reason) for m in items if isinstance(m, Malformed)] == [
        (f"{docword}:6", "bad_line"), (f"{docword}:8", "word_id_out_of_range")]
    assert len(records(UciSource(docword))) == 30
    packed = docword.read_bytes()
    docword.write_bytes(packed[: len(packed) * 2 // 3])
    items = list(UciSource(docword))
    assert items[-1].reason == "truncated_archive" and "dropped" in items[-1].detail
    assert 0 < len(records(UciSource(docword))) < 30


def test_uci_kos_reads_as_bag_of_words():
    source = open_source(DATA / "uci-kos")
    first = []
    for item in source:
        first.append(item)
        if len(first) == 3:
            break
    assert source.total == 3430
    assert all(isinstance(r, Record) and isinstance(r.document, dict) for r in first)
    assert [r.key for r in first] == [1, 2, 3]
    assert all(all(c > 0 for c in r.document.values()) for r in first)


def test_open_source_errors(tmp_path):
    with pytest.raises(SourceError, match="no such file or directory"):
        open_source(tmp_path / "missing.jsonl")
    with pytest.raises(SourceError, match="unknown format 'xml'"):
        open_source(tmp_path, format="xml")
    with pytest.raises(SourceError, match="kafka://HOST:PORT/TOPIC"):
        open_source("kafka://nohost", format="kafka")
    assert [detect_format(str(p)) for p in (tmp_path, "x.ndjson", "y.csv.zst", "docword.kos.txt.gz")] == [
        "dir", "jsonl", "csv", "uci"]


def test_parse_time():
    assert parse_time("1970-01-02") == 86400.0
    assert parse_time("1970-01-01T01:00:00+01:00") == 0.0
    assert parse_time(12.5) == 12.5
    for bad in ("soon", None, True, [1], float("nan"), "inf"):
        with pytest.raises(ValueError):
            parse_time(bad)


def test_builtin_corpus_is_real_stable_and_resumable():
    first, second = BuiltinCorpus(), BuiltinCorpus()
    head = [next(it) for it in [iter(first)] for _ in range(300)]
    assert [next(it) for it in [iter(second)] for _ in range(300)] == head
    assert len({r.key for r in head}) == 300
    assert all(len(r.document.split()) >= 12 for r in head)
    resumed = BuiltinCorpus(start=first.position - 10)
    assert [next(it) for it in [iter(resumed)] for _ in range(10)] == head[-10:]


def test_docstrings_walks_classes_functions_and_blocks():
    source = b'"""Module doc."""\nclass A:\n    """Class doc."""\n    def f(self):\n        """Method doc."""\n' \
             b'if True:\n    def g():\n        """Guarded doc."""\n'
    assert list(docstrings("m", source)) == [
        ("m", "Module doc."), ("m:A", "Class doc."), ("m:A.f", "Method doc."), ("m:g", "Guarded doc.")]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_wrong_text_field_fails_within_the_first_records_naming_the_fields_there(tmp_path):
    path = write_jsonl(tmp_path / "news.jsonl", ({"id": i, "body": f"document {i}", "time": i} for i in range(5000)))
    source = open_source(path)
    with pytest.raises(SourceError) as raised:
        for item in source:
            pytest.fail(f"an item came before the error: {item}")
    assert str(raised.value) == (f"{path}: no text field 'text' in the first 100 records (their fields: body, id, "
                                 "time); name the text with --text-field")
    assert source.position == 100  # lines read: not the whole archive


def test_a_wrong_time_format_fails_within_the_first_records_showing_a_time(tmp_path):
    rows = ({"text": f"document {i}", "time": f"2024-03-01T00:00:{i % 60:02d}Z"} for i in range(5000))
    path = write_jsonl(tmp_path / "news.jsonl", rows)
    source = open_source(path, time_field="time", time_format="%d-%b-%Y")
    with pytest.raises(SourceError) as raised:
        for item in source:
            pytest.fail(f"an item came before the error: {item}")
    assert str(raised.value) == (f"{path}: --time-format '%d-%b-%Y' reads none of the first 20 times in field "
                                 "'time' (e.g. '2024-03-01T00:00:00Z')")
    assert source.position == 20


def test_a_right_time_format_reports_each_unreadable_time(tmp_path):
    rows = [{"text": "late", "time": "soon"}] * 19 + [{"text": "on time", "time": "01-Mar-2024"}]
    items = list(open_source(write_jsonl(tmp_path / "news.jsonl", rows), time_field="time", time_format="%d-%b-%Y"))
    assert [getattr(i, "reason", "record") for i in items] == ["undecodable"] * 19 + ["record"]
    rows = [{"text": "on time", "time": "01-Mar-2024"}] + [{"text": "late", "time": "soon"}] * 30
    items = list(open_source(write_jsonl(tmp_path / "news.jsonl", rows), time_field="time", time_format="%d-%b-%Y"))
    assert [getattr(i, "reason", "record") for i in items] == ["record"] + ["undecodable"] * 30


def test_the_wrong_field_error_names_every_text_field_asked_for(tmp_path):
    path = write_jsonl(tmp_path / "news.jsonl", ({"title": f"document {i}"} for i in range(100)))
    with pytest.raises(SourceError, match=r"no text field 'body' or 'summary' in the first 100 records \(their "
                                          r"fields: title\)"):
        list(open_source(path, text_fields=["body", "summary"]))
    short = write_jsonl(tmp_path / "short.jsonl", ({"title": f"document {i}"} for i in range(99)))
    items = list(open_source(short))  # fewer records than that: each is reported, none lost
    assert [(i.where, i.reason) for i in items] == [(f"{short}:{n}", "missing_field") for n in range(1, 100)]


def test_records_missing_the_text_field_before_one_that_has_it_are_reported_in_order(tmp_path):
    rows = [{"id": i, "title": "x"} for i in range(3)] + [{"id": 3, "text": "the text"}, {"id": 4, "title": "y"}]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    items = list(open_source(path))
    assert [(type(i).__name__, getattr(i, "where", None)) for i in items] == [
        ("Malformed", f"{path}:1"), ("Malformed", f"{path}:2"), ("Malformed", f"{path}:3"),
        ("Record", None), ("Malformed", f"{path}:5")]
    assert {i.reason for i in items if isinstance(i, Malformed)} == {"missing_field"}


@pytest.mark.parametrize("name", ["news.txt", "news.txt.gz", "news.log"])
def test_json_lines_in_a_file_named_as_text_is_an_error_not_text(tmp_path, name):
    data = "".join(json.dumps({"id": i, "text": f"document {i}"}) + "\n" for i in range(30)).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(SourceError, match=r"the lines are JSON objects, not text: read it with --format jsonl"):
        open_source(path)
    asked = list(open_source(path, format="lines"))  # said so explicitly: read as text
    assert len(asked) == 30 and asked[0].document.startswith('{"id": 0')
    assert [r.document for r in open_source(path, format="jsonl")][:2] == ["document 0", "document 1"]


def test_text_with_a_line_that_looks_like_json_is_still_text(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text('{"a": 1}\nan ordinary line of text\n')
    assert [r.document for r in open_source(path)] == ['{"a": 1}', "an ordinary line of text"]


@pytest.mark.parametrize("suffix, delimiter", [(".csv", ","), (".tsv", "\t")])
def test_a_csv_without_a_header_row_is_named_in_the_error(tmp_path, suffix, delimiter):
    rows = "".join(f'{i}{delimiter}"document {i}, about topic {i % 3}"\n' for i in range(40))
    path = tmp_path / f"headless{suffix}"
    path.write_text(rows)
    with pytest.raises(SourceError, match=rf"headless{suffix}: the first row looks like data, not a header row"):
        open_source(path)
    (tmp_path / f"ok{suffix}").write_text(f"id{delimiter}text\n" + rows)
    assert len(records(open_source(tmp_path / f"ok{suffix}"))) == 40


def test_a_wrong_text_field_on_a_kafka_topic_fails_within_the_first_messages(kafka_broker):
    from kafka_helpers import create_topic, produce, unique

    topic = unique("wrong-field")
    create_topic(kafka_broker, topic, 1)
    produce(kafka_broker, topic, [(None, json.dumps({"id": i, "body": f"message {i}"}).encode()) for i in range(300)])
    source = open_source(f"kafka://{kafka_broker.bootstrap_servers}/{topic}", text_fields=["text"])
    with pytest.raises(SourceError, match=rf"^Kafka topic '{topic}': no text field 'text' in the first 100 records "
                                          r"\(their fields: body, id\)"):
        for item in source:
            pytest.fail(f"an item came before the error: {item}")
    assert source.position == {"0": 100}
    right = [r.document for r in open_source(f"kafka://{kafka_broker.bootstrap_servers}/{topic}", text_fields=["body"])]
    assert right == [f"message {i}" for i in range(300)]


def test_a_headed_file_with_a_wrong_column_name_gets_the_column_error_not_the_header_one(tmp_path):
    path = tmp_path / "news.tsv"  # text with commas: a sniffed delimiter would be ','
    path.write_text("id\ttitle\tbody\n" + "".join(f"{i}\ta, b, c\tone, two, three, four, five, six\n"
                                                  for i in range(20)))
    with pytest.raises(SourceError, match=r"no column 'text' \(columns: id, title, body\)"):
        open_source(path)
    words_only = tmp_path / "words.csv"  # no number, but a first row of sentences is a record
    words_only.write_text("".join(f"title {i},a sentence of more than four words\n" for i in range(5)))
    with pytest.raises(SourceError, match="the first row looks like data, not a header row"):
        open_source(words_only)


@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_an_over_long_line_is_skipped_as_oversized_without_being_held(tmp_path, suffix, monkeypatch):
    import tracemalloc

    from consumers.sources import lines

    limit = 4096
    monkeypatch.setattr(lines, "MAX_RECORD_BYTES", limit)
    body = (json.dumps({"id": "a", "text": "first"}) + "\n"
            + json.dumps({"id": "huge", "text": "w " * 3_000_000}) + "\n"  # 6 MB: 1,500 x the limit
            + json.dumps({"id": "b", "text": "x" * (limit - 23)}) + "\n"  # exactly at the limit: kept
            + json.dumps({"id": "c", "text": "last line, no newline"})).encode()
    assert len(body.split(b"\n")[2]) == limit
    path = tmp_path / f"docs.jsonl{suffix}"
    path.write_bytes(gzip.compress(body) if suffix == ".gz" else zstd.compress(body) if suffix == ".zst" else body)
    tracemalloc.start()
    items = list(open_source(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [i.key if isinstance(i, Record) else i.reason for i in items] == ["a", reasons.OVERSIZED, "b", "c"]
    huge = len(body.split(b"\n")[1]) + 1  # with its newline
    assert items[1].where.endswith(":2") and f"a line of {huge:,} bytes > {limit:,}" == items[1].detail
    assert peak < 1_000_000  # the 6 MB line was never in memory at once


def test_a_file_over_the_limit_in_a_directory_is_skipped_as_oversized(tmp_path, monkeypatch):
    from consumers.sources import directory

    monkeypatch.setattr(directory, "MAX_RECORD_BYTES", 100)
    (tmp_path / "a.txt").write_text("small document")
    (tmp_path / "b.txt").write_text("big " * 100)
    items = list(open_source(tmp_path))
    assert isinstance(items[0], Record) and items[1].reason == reasons.OVERSIZED and "400 bytes > 100" in items[1].detail
