"""The built-in stream: the Python standard library's own documentation.

Every Python installation carries the source of its standard library, and with it thousands of
docstrings written by people: what a module is for, what a class models, what a function does.
That is real English text on a few dozen recognisable subjects (networking, e-mail, XML, dates,
numbers, files, concurrency, testing, GUI widgets, ...), so it makes a topic stream that every
machine has, with no download and no dependency on anything outside Python.

One document is the docstring of one module, class or function, preceded by its dotted name
(``json.decoder JSONDecoder.decode``), taken from the ``.py`` files of the standard library
(``sysconfig`` ``stdlib`` path) without importing them. Test suites, the per-codec boilerplate in
``encodings``, ``pydoc_data``, ``idlelib``, ``lib2to3`` and the demos are left out, and so are
docstrings of fewer than 12 words. Modules come in a fixed pseudo-random order (a hash of their
name), so the first documents are a fair sample of the whole and the vocabulary the model
learns from them covers every subject; within a module documents follow the source. The stream
is the same on every run with the same Python installation (4,279 documents for CPython 3.11.7).
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
from pathlib import Path
from typing import Iterator

from streamtopics import Tokenizer
from streamtopics.text.tokenizer import english_stop_words

from .records import Record, Source

SKIPPED = frozenset({"test", "tests", "idle_test", "idlelib", "turtledemo", "encodings", "pydoc_data",
                     "site-packages", "dist-packages", "__pycache__", "__phello__", "lib2to3"})
#: Words that every docstring uses whatever its subject; dropped on top of the English list.
DOCSTRING_STOP_WORDS = frozenset("""
    also always argument arguments call called calls can cannot class classes currently default
    else error example exception exceptions false first function functions given however instance
    instances instead keyword like list may method methods module modules must name names never new
    none note number object objects one optional otherwise raise raised raises return returned
    returns see self set specified specifies specify string strings true two type types unless use
    used uses using value values way whether will within without
""".split())
MIN_WORDS = 12  # shorter docstrings ("Return self.") say nothing about a subject
_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def module_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """``(module name, path)`` of every included standard-library file, in stream order."""
    root = root or stdlib_root()
    modules = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if SKIPPED.intersection(parts):
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules.append((name, path))
    return sorted(modules, key=lambda item: (hashlib.blake2b(item[0].encode(), digest_size=8).digest(), item[0]))


def docstrings(module: str, source: bytes) -> Iterator[tuple[str, str]]:
    """``(qualified name, docstring)`` for the module and every class and function in it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    doc = ast.get_docstring(tree)
    if doc:
        yield module, doc
    stack = [("", node) for node in reversed(tree.body)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, _DEFINITIONS):
            name = f"{prefix}{node.name}"
            doc = ast.get_docstring(node)
            if doc:
                yield f"{module}:{name}", doc
            stack.extend((f"{name}.", child) for child in reversed(node.body))
        elif isinstance(node, _BLOCKS):
            children = node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                children += handler.body
            stack.extend((prefix, child) for child in reversed(children))


def tokenizer() -> Tokenizer:
    """The tokenizer for this corpus: English stop words plus :data:`DOCSTRING_STOP_WORDS`."""
    return Tokenizer(stop_words=english_stop_words() | DOCSTRING_STOP_WORDS)


class BuiltinCorpus(Source):
    """The standard library's docstrings as a :class:`~consumers.records.Source`.

    Records are keyed by ``module:Qualified.name`` (``#2``, ``#3`` for a name defined again,
    e.g. a property's setter); position = documents consumed.

    >>> corpus = BuiltinCorpus()
    >>> record = next(iter(corpus))
    >>> isinstance(record.document, str) and ":" in (record.key + ":")
    True
    """

    def __init__(self, start: int = 0):
        self.position = int(start)
        self.spec = {"path": "builtin", "format": "builtin"}
        self._modules = module_files()
        self._done = 0

    def __iter__(self) -> Iterator[Record]:
        count = 0
        for self._done, (module, path) in enumerate(self._modules, 1):
            try:
                source = path.read_bytes()
            except OSError:
                continue
            seen: dict[str, int] = {}
            for name, doc in docstrings(module, source):
                if len(doc.split()) < MIN_WORDS:
                    continue
                count += 1
                seen[name] = seen.get(name, 0) + 1
                if count <= self.position:
                    continue
                self.position = count
                key = name if seen[name] == 1 else f"{name}#{seen[name]}"
                yield Record(f"{name.replace(':', ' ')}\n\n{doc}", key)

    def progress(self):
        return self._done, len(self._modules), "modules"

    @property
    def name(self) -> str:
        return "the built-in stream (Python standard library docstrings)"
