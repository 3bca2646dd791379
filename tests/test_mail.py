"""Mail and news transport (streamtopics.text.mail) gives no tokens; what the author wrote does."""

import gzip
import json
import re

import numpy as np
import pytest
from suite_helpers import DATA  # beside this file (conftest.py)

from streamtopics import StreamingTopicModel
from streamtopics.text.mail import blank_mail_transport, strip_mail
from streamtopics.text.tokenizer import Tokenizer

POST = ("From: jdoe@andrew.cmu.edu (John Doe)\n"
        "Subject: Re: Re: Shuttle launch delayed\n"
        "Organization: Carnegie Mellon University\n"
        "Keywords: orbiter, weather\n"
        "NNTP-Posting-Host: po2.andrew.cmu.edu\n"
        "Article-I.D.: andrew.1993Apr5\n"
        "  (a folded continuation)\n"
        "Lines: 12\n"
        "\n"
        "In article <1993Apr5.1234@nasa.gov>, bob@nasa.gov (Bob) writes:\n"
        "> >In article <C4x@ksc.nasa.gov> amy@ksc.nasa.gov writes:\n"
        "> The shuttle waited for weather.\n"
        "Clouds again, see http://www.nasa.gov/sts and www.ksc.org today.\n")


def test_a_post_keeps_its_subject_keywords_and_body_and_nothing_of_its_transport():
    assert Tokenizer().tokenize(POST) == ["shuttle", "launch", "delayed", "orbiter", "weather", "shuttle",
                                          "waited", "weather", "clouds", "see", "today"]


def test_without_strip_mail_the_transport_is_tokenized():
    tokens = Tokenizer(strip_mail=False).tokenize(POST)
    assert {"andrew", "cmu", "nntp", "posting", "host", "organization", "writes", "nasa", "http"} <= set(tokens)


@pytest.mark.parametrize("text", [
    "Note: the meeting moved\nto Friday.\n\nDetails follow.",  # a second line that is no field
    "Name: Ann\nIssue: printer jams\n\nIt jams on every page.",  # fields, but none of mail's
    "Re: your question\nanswered below",
    "  an indented first line\nthen more text\n\nand a body",
    "In article 3 of the treaty the parties agree.",  # no message id or address on the line
    "She writes: poems, and he wrote: nothing at all.",  # the colon does not end the line
    "Computed by @total_ordering; ask @ann or admin@localhost now",  # no "." after an "@": no address
])
def test_text_that_is_not_mail_transport_is_left_as_it_is(text):
    assert strip_mail(text) == text


def test_a_header_block_is_recognised_with_crlf_line_ends_and_without_a_body():
    assert strip_mail("From: a@b.org\r\nSubject: Grain prices\r\n\r\nWheat rose.") == "Grain prices\n\r\nWheat rose."
    assert strip_mail("From: a@b.org\nSubject: Only a subject") == "Only a subject"
    cut = " uunet!olivea!caltech.edu!keith\nSubject: Re: Atheists\nLines: 17\n\nBody"
    assert strip_mail(cut) == "Re: Atheists\n\nBody"  # the archive cut the Path field's name


def test_lines_of_encoded_data_go():
    pgp = "-----BEGIN PGP SIGNATURE-----\n\niQCVAgUBK8AjRXzXN+VrOblFAQFSbwP+MHePY4g7ge8Mo5wpsivX+kHYYxMErFAO\n"
    uuencoded = "begin 644 a.zip\r\n  M4$L#!!0````(`.U<CQ9%+VUN;W1E+G1X=`I`,,,,,,,,,,,,,,,,,,,,,,,,,,,,\r\n"
    assert strip_mail(pgp) == "-----BEGIN PGP SIGNATURE-----\n\n\n"
    assert strip_mail(uuencoded) == "begin 644 a.zip\r\n\n"
    words = "a line of ordinary words that runs on for well over sixty characters\n"
    assert strip_mail(words) == words


def test_addresses_go_as_whole_chunks_and_words_beside_them_stay():
    assert strip_mail("mail (ann@x.org) or ftp://ftp.x.org/pub, then\tgo") == "mail  or  then\tgo"
    assert strip_mail("Ann Smith wrote:\nyes\n>> Bob Jones WROTE: no\n") == "\nyes\n>> Bob Jones WROTE: no\n"


def test_the_setting_is_saved_and_a_tokenizer_saved_before_it_resumes_without_it(tmp_path):
    assert Tokenizer.from_config(Tokenizer(strip_mail=False).get_config()).strip_mail is False
    assert Tokenizer.from_config(Tokenizer().get_config()).strip_mail is True
    old = {key: value for key, value in Tokenizer().get_config().items() if key != "strip_mail"}
    assert Tokenizer.from_config(old).strip_mail is False
    model = StreamingTopicModel(2, vocabulary_size=50, warmup_documents=2, tokenizer=Tokenizer(strip_mail=False))
    model.learn_many([POST, "shuttle weather clouds"])
    assert StreamingTopicModel.load(model.save(tmp_path / "model")).ingest.tokenizer.strip_mail is False


FRAGMENTS = ["From: a@b.org", "Subject: Re: grain", "Keywords: wheat", "Lines: 3", "X-Id.x: y", "Note: z", " folded",
             "\tfolded", "", "\r", "In article <x@y> ann", " > In article 9", "> In article z@q", "bob writes:",
             "Ann WROTE:", "Ann Wrote: \x0b", "wrote: more", "mail ann@x.org now", "see http://x.org/a",
             "www.x.com", "wwww.x", "a://b", "@deco.x", "a@b", "x@@y.z", "@a@b.c", "plain words here", "colon:",
             "naive", "\x0bend writes:\x0c", "\x1c", "M" * 25, "qZ+/" * 8, "a@b.c" * 6, "|In article <q>",
             "Subject:Re:x@y", "Summary:\tspace ://"]


def test_the_compiled_pass_leaves_the_words_strip_mail_leaves():
    rng = np.random.default_rng(0)
    texts = [POST, ""] + ["\n".join(rng.choice(FRAGMENTS, rng.integers(1, 9))) + rng.choice(["", "\n", "\r\n"])
                          for _ in range(3000)]
    texts += [text.replace("\n", "\r\n") for text in texts[:500]]
    data = np.frombuffer("\n".join(texts).encode("ascii"), np.uint8).copy()
    starts = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(text) + 1 for text in texts], out=starts[1:])
    blank_mail_transport(data, starts)
    letters = lambda text: re.findall("[a-z]+", text.lower())
    for d, text in enumerate(texts):
        assert letters(data[starts[d]:starts[d + 1] - 1].tobytes().decode("ascii")) == letters(strip_mail(text)), text
    assert sum(strip_mail(text) != text for text in texts) > 2000  # the draws do exercise the stripping


def test_the_replay_options_and_the_consumer_config_set_the_tokenizer(tmp_path):
    from consumers.cli.options import topic_settings
    from consumers.consumer_config import ConsumerConfig

    extra = tmp_path / "stop.txt"
    extra.write_text("Shuttle\nweather\n")
    for_replay = topic_settings(extra, False, None, None, 0.5, 4)["tokenizer"]
    environ = {"STREAMTOPICS_STOP_WORDS": str(extra), "STREAMTOPICS_STRIP_MAIL": "false"}
    for_consumer = ConsumerConfig.load(environ=environ, topics=["news"]).new_model().ingest.tokenizer
    for tokenizer in (for_replay, for_consumer):
        tokens = tokenizer.tokenize(POST)
        assert "nntp" in tokens and "shuttle" not in tokens and "weather" not in tokens and "the" not in tokens
    assert "tokenizer" not in topic_settings(None, True, None, None, 0.5, 4)  # the defaults: the model's own
    assert ConsumerConfig(topics=["news"]).new_model().ingest.tokenizer.strip_mail


def test_models_that_tokenize_differently_are_not_merged():
    def model(strip):
        m = StreamingTopicModel(2, vocabulary=["shuttle", "weather", "clouds", "nntp"],
                                tokenizer=Tokenizer(strip_mail=strip))
        m.learn_one(POST)
        return m
    with pytest.raises(ValueError, match="tokenize alike"):
        model(True).merge(model(False))
    merged = model(True).merge(model(True))
    assert merged.documents_absorbed == 2


TRANSPORT = {"edu", "com", "subject", "lines", "organization", "writes", "article", "posting", "host", "nntp",
             "apr", "distribution", "reply", "andrew", "cmu", "netcom", "uiuc", "cso"}


def test_raw_posts_give_no_topic_of_transport_words():
    """The failure strip_mail is for, on docs/replay.md's own archive: raw 20 Newsgroups posts,
    headers included. Without it, topics of "edu nntp host posting organization"."""
    path = DATA / "20newsgroups-bydate" / "20news-bydate.jsonl.gz"
    if not path.is_file():
        pytest.fail(f"corpus file {path} not found", pytrace=False)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        posts = [json.loads(line)["text"] for line in lines]
    posts = [posts[i] for i in np.random.default_rng(0).permutation(len(posts))[:6000]]

    def transport_topics(strip):
        model = StreamingTopicModel(20, seed=0, tokenizer=Tokenizer(strip_mail=strip))
        model.learn_many(posts)
        return sum(len(TRANSPORT & {w for w, _ in words}) >= 3 for words in model.refresh().top_words(8).values())

    assert transport_topics(False) >= 4
    assert transport_topics(True) == 0
