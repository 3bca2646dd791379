"""Mail and news text without its transport: what a topic model should read of a message.

Raw mail, news and ticket archives carry words that say who sent a message and through which
host, not what it is about: the header block (``From:``, ``Organization:``,
``NNTP-Posting-Host:``, ``Lines:``), quote attributions (``In article <...>, jdoe@cs.cmu.edu
writes:``), e-mail addresses, message ids and URLs. Split into word tokens they are among the
most frequent words of the stream ("edu", "cmu", "nntp", "posting", "host", "writes"), and
streamed raw, 7-10 of 20 topics of 20 Newsgroups were made of them (``git show
8e056d1:BENCHMARKS.md``, "Mail and news text"; today's figure: BENCHMARKS.md, "Topic quality
against gensim, scikit-learn and tomotopy").

:func:`strip_mail` keeps the text a reader would: a leading header block is replaced by its
``Subject:``, ``Keywords:`` and ``Summary:`` values, attribution lines go, and every
whitespace-separated chunk holding an e-mail address (``user@host.domain``, not a decorator or
handle such as ``@total_ordering``) or a URL goes, as do lines of encoded data (uuencode, base64,
PGP signatures: 60 or more characters without a space). A header block is only
recognised at the very start of a text: ``Name: value`` lines up to the first empty line
(continuation lines indented, also a first one left by an archive that cut its field), one of
them a mail or news field (``From``, ``Subject``, ``Newsgroups``, ...). So a document that merely
begins "Note: ..." keeps its first paragraph.

:func:`blank_mail_transport` does the same to many ASCII texts at once, for the batch encoder: a
compiled pass that overwrites with spaces, in place, what :func:`strip_mail` drops, leaving the
same runs of letters (about 6.5 us for a 1.9 kB post on two cores, against 37.5 us for
:func:`strip_mail`: ``git show 8e056d1:BENCHMARKS.md``, "Mail and news text"); ``tests/test_mail.py``
holds it to :func:`strip_mail`.

>>> strip_mail("From: jdoe@cs.cmu.edu (John Doe)\\nSubject: Re: Shuttle launch\\n"
...            "Organization: Carnegie Mellon\\n\\nIn article <1993Apr5.1@nasa.gov>, "
...            "bob@nasa.gov writes:\\n> It flew.\\nSee http://nasa.gov/sts or mail me@x.org.")
'Re: Shuttle launch\\n\\n\\n> It flew.\\nSee  or mail '
>>> strip_mail("Note: meeting moved\\nto Friday\\n\\nDetails follow.")
'Note: meeting moved\\nto Friday\\n\\nDetails follow.'
"""

from __future__ import annotations

import re

import numpy as np
from numba import njit, prange

# Fields whose presence makes a leading block of "Name: value" lines a mail or news header.
MAIL_FIELDS = frozenset({"from", "to", "cc", "subject", "date", "newsgroups", "message-id", "path",
                         "received", "return-path", "reply-to", "references", "in-reply-to", "sender"})
# Header fields whose values are written by the author about the content: they are kept.
CONTENT_FIELDS = ("subject", "keywords", "summary")
# Chunks (between whitespace) that name an address rather than say something.
ADDRESS_MARKERS = ("@", "://", "www.")

_HEADER_LINE = re.compile(r"([A-Za-z][!-9;-~]*):[ \t]?(.*)")  # a field name: printable ASCII but the colon
_EMPTY_LINE = re.compile(r"\n\r?\n")
# Lines that only say who wrote what follows: "... writes:", "... wrote:", "In article <...>".
ATTRIBUTION_ENDINGS = ("writes:", "wrote:", "Writes:", "Wrote:")
ATTRIBUTION_START = "In article"
# Lines this long without a space are encoded data, not words (uuencode's are 61 characters).
ENCODED_LINE = 60
QUOTE_MARKS = " \t>|:"  # what may precede a quoted attribution
_WHITESPACE = (" ", "\n", "\t", "\r")


def strip_mail(text: str) -> str:
    """``text`` without its mail header block (but its subject), attribution lines, e-mail
    addresses, URLs and encoded lines (see the module docstring)."""
    text = _without_header_block(text)
    spans = _encoded_lines(text) + _attribution_lines(text) + _address_chunks(text)
    if not spans:
        return text
    spans.sort()
    pieces, at = [], 0
    for start, stop in spans:
        if start > at:
            pieces.append(text[at:start])
        at = max(at, stop)
    pieces.append(text[at:])
    return "".join(pieces)  # every span ends at whitespace or a line end: no words join


def _without_header_block(text: str) -> str:
    if _HEADER_LINE.match(text) is None and text[:1] not in (" ", "\t"):  # an archive may cut a folded field
        return text
    end = _EMPTY_LINE.search(text)
    head, body = (text, "") if end is None else (text[:end.start()], text[end.start():])
    kept, is_mail = [], False
    for line in head.split("\n"):
        line = line.removesuffix("\r")
        if not line or line[:1] in (" ", "\t"):  # a folded header line continues the previous field
            continue
        field = _HEADER_LINE.match(line)
        if field is None:
            return text  # not a header block after all
        name = field.group(1).lower()
        is_mail = is_mail or name in MAIL_FIELDS
        if name in CONTENT_FIELDS:
            kept.append(field.group(2))
    return "\n".join(kept) + body if is_mail else text


def _encoded_lines(text: str) -> list[tuple[int, int]]:
    """Spans of the lines that are encoded data (uuencode, base64, PGP signatures): at least
    :data:`ENCODED_LINE` characters between their indentation and their CRs, none of them a
    space, tab or CR."""
    spans, start = [], 0
    for line in text.split("\n"):
        stop = start + len(line)
        if len(line) >= ENCODED_LINE:  # most lines are shorter: one comparison each
            content = line.rstrip("\r").lstrip(" \t")
            if len(content) >= ENCODED_LINE and not any(space in content for space in " \t\r"):
                spans.append((start, stop))
        start = stop + 1
    return spans


def _attribution_lines(text: str) -> list[tuple[int, int]]:
    """Spans of the lines ending in "writes:"/"wrote:" or starting "In article <id>" or "In article ... @"."""
    spans = []
    for ending in ATTRIBUTION_ENDINGS:
        at = text.find(ending)
        while at >= 0:
            stop = text.find("\n", at)
            stop = len(text) if stop < 0 else stop
            if not text[at + len(ending):stop].strip():
                spans.append((text.rfind("\n", 0, at) + 1, stop))
            at = text.find(ending, at + len(ending))
    at = text.find(ATTRIBUTION_START)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        stop = text.find("\n", at)
        stop = len(text) if stop < 0 else stop
        if not text[start:at].strip(QUOTE_MARKS) and ("<" in text[at:stop] or "@" in text[at:stop]):
            spans.append((start, stop))
        at = text.find(ATTRIBUTION_START, stop)
    return spans


def _address_chunks(text: str) -> list[tuple[int, int]]:
    """Spans of the whitespace-separated chunks that hold an e-mail address (an ``@`` after the
    chunk's first character with a ``.`` after it: not a decorator or a handle such as
    ``@total_ordering``) or a URL (``://``, ``www.``)."""
    spans = []
    for marker in ADDRESS_MARKERS:
        at = text.find(marker)
        while at >= 0:
            start = max(text.rfind(space, 0, at) for space in _WHITESPACE) + 1
            stops = [stop for stop in (text.find(space, at) for space in _WHITESPACE) if stop >= 0]
            stop = min(stops) if stops else len(text)
            if marker == "@" and (at == start or "." not in text[at + 1:stop]):
                at = text.find(marker, at + 1)  # not an address; a later "@" of the chunk may be
                continue
            spans.append((start, stop))
            at = text.find(marker, stop)
    return spans


# The same for many ASCII texts in one compiled pass: what the batch encoder tokenizes.

def _field_table(names, kinds):
    """The field names as one byte array with offsets (numba takes no set of strings), and kinds."""
    encoded = [name.encode("ascii") for name in names]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(name) for name in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), np.uint8).copy(), offsets, np.array(kinds, np.int64)


_ENDINGS = tuple(np.frombuffer(ending.encode("ascii"), np.uint8).copy() for ending in ATTRIBUTION_ENDINGS)
_IN_ARTICLE = np.frombuffer(ATTRIBUTION_START.encode("ascii"), np.uint8).copy()
MAIL, CONTENT = 1, 2  # bits of a field's kind
_FIELDS = sorted(MAIL_FIELDS | set(CONTENT_FIELDS))
_FIELD_NAMES, _FIELD_OFFSETS, _FIELD_KINDS = _field_table(
    _FIELDS, [MAIL * (name in MAIL_FIELDS) + CONTENT * (name in CONTENT_FIELDS) for name in _FIELDS])


def blank_mail_transport(data: np.ndarray, starts: np.ndarray) -> None:
    """Overwrite with spaces, in place, what :func:`strip_mail` drops from each ASCII text
    ``data[starts[d]:starts[d + 1] - 1]`` (texts joined by one separator byte), so that the runs
    of letters left are exactly those of ``strip_mail(text)``: the batch encoder's pre-pass."""
    _blank_all(data, starts, _FIELD_NAMES, _FIELD_OFFSETS, _FIELD_KINDS, _ENDINGS, _IN_ARTICLE)


@njit(cache=True, nogil=True, parallel=True)
def _blank_all(data, starts, names, offsets, kinds, endings, in_article):
    for d in prange(starts.size - 1):
        start, end = starts[d], starts[d + 1] - 1
        _blank_header_block(data, start, end, names, offsets, kinds)
        _blank_encoded_lines(data, start, end, ENCODED_LINE)  # before any blanking adds spaces
        _blank_attributions(data, start, end, endings, in_article)
        _blank_addresses(data, start, end)


@njit(cache=True, nogil=True)
def _is_letter(c):
    return 65 <= c <= 90 or 97 <= c <= 122


@njit(cache=True, nogil=True)
def _field_kind(data, start, end, names, offsets, kinds):
    """MAIL/CONTENT bits of the field named ``data[start:end]`` (any case), 0 if unknown."""
    for f in range(kinds.size):
        a, b = offsets[f], offsets[f + 1]
        if b - a == end - start:
            same = True
            for p in range(b - a):
                c = data[start + p]
                if (c | 32 if _is_letter(c) else c) != names[a + p]:
                    same = False
                    break
            if same:
                return kinds[f]
    return 0


@njit(cache=True, nogil=True)
def _line_stop(data, a, end):
    """Where the line starting at ``a`` ends: its newline, or ``end``."""
    b = a
    while b < end and data[b] != 10:
        b += 1
    return b


@njit(cache=True, nogil=True)
def _blank_header_block(data, start, end, names, offsets, kinds):
    if start == end or not (_is_letter(data[start]) or data[start] == 32 or data[start] == 9):
        return
    head_end = end  # the first empty line ("\n\n" or "\n\r\n") ends the block
    for p in range(start, end - 1):
        if data[p] == 10 and (data[p + 1] == 10 or (p + 2 < end and data[p + 1] == 13 and data[p + 2] == 10)):
            head_end = p
            break
    is_mail = False
    for check in range(2):  # first decide, then blank all but the content fields' values
        a = start
        while a <= head_end:
            b = _line_stop(data, a, head_end)
            line_end = b - 1 if b > a and data[b - 1] == 13 else b
            if line_end > a and data[a] != 32 and data[a] != 9:
                colon = a + 1
                while colon < line_end and data[colon] != 58 and 33 <= data[colon] <= 126:
                    colon += 1
                if not _is_letter(data[a]) or colon == line_end or data[colon] != 58:
                    return  # a line that is no field: not a header block
                kind = _field_kind(data, a, colon, names, offsets, kinds)
                if check == 0:
                    is_mail = is_mail or kind & MAIL != 0
                elif kind & CONTENT != 0:
                    data[a:colon + 1] = 32  # a content field keeps its value
                else:
                    data[a:b] = 32
            elif check == 1:
                data[a:b] = 32
            a = b + 1
        if not is_mail:
            return


@njit(cache=True, nogil=True)
def _is_space(c):  # what str.strip() removes, within ASCII
    return c == 32 or 9 <= c <= 13 or 28 <= c <= 31


@njit(cache=True, nogil=True)
def _ends_with(data, start, stop, word):
    """Whether ``data[start:stop]`` ends with the bytes ``word``."""
    n = word.size
    if stop - start < n:
        return False
    for p in range(n):
        if data[stop - n + p] != word[p]:
            return False
    return True


@njit(cache=True, nogil=True)
def _blank_encoded_lines(data, start, end, min_length):
    a = start
    while a < end:
        b = _line_stop(data, a, end)
        line_end = b
        while line_end > a and data[line_end - 1] == 13:  # CR line ends, however many
            line_end -= 1
        first = a
        while first < line_end and (data[first] == 32 or data[first] == 9):
            first += 1
        encoded = line_end - first >= min_length
        p = first
        while encoded and p < line_end:  # no space, tab or CR within
            encoded = data[p] != 32 and data[p] != 9 and data[p] != 13
            p += 1
        if encoded:
            data[a:b] = 32
        a = b + 1


@njit(cache=True, nogil=True)
def _blank_attributions(data, start, end, endings, in_article):
    a = start
    while a < end:
        b = _line_stop(data, a, end)
        stripped = b
        while stripped > a and _is_space(data[stripped - 1]):
            stripped -= 1
        attribution = False
        for ending in endings:
            attribution = attribution or _ends_with(data, a, stripped, ending)
        q = a
        while q < b and (data[q] == 32 or data[q] == 9 or data[q] == 62 or data[q] == 124 or data[q] == 58):
            q += 1
        if not attribution and _ends_with(data, q, min(b, q + in_article.size), in_article):
            for p in range(q, b):
                if data[p] == 60 or data[p] == 64:  # "<" or "@": a message id or an address follows
                    attribution = True
                    break
        if attribution:
            data[a:b] = 32
        a = b + 1


@njit(cache=True, nogil=True)
def _blank_addresses(data, start, end):
    a = start
    while a < end:
        while a < end and (data[a] == 32 or data[a] == 10 or data[a] == 9 or data[a] == 13):
            a += 1
        b, address, at_seen = a, False, False
        while b < end and not (data[b] == 32 or data[b] == 10 or data[b] == 9 or data[b] == 13):
            c = data[b]
            if c == 64:  # "@", an address once a "." follows (not as the chunk's first character)
                at_seen = at_seen or b > a
            elif c == 46 and at_seen:
                address = True
            elif c == 58 and b + 2 < end and data[b + 1] == 47 and data[b + 2] == 47:  # "://"
                address = True
            elif c == 119 and b + 3 < end and data[b + 1] == 119 and data[b + 2] == 119 and data[b + 3] == 46:
                address = True  # "www."
            b += 1
        if address:
            data[a:b] = 32
        a = b
