"""streamtopics: anchor-word topic models kept fresh over live document streams.

>>> from streamtopics import StreamingTopicModel
>>> model = StreamingTopicModel(n_topics=20)   # learns its vocabulary from the stream

The names below load their module on first use (PEP 562), so that importing a light submodule
(``streamtopics.config``, ``streamtopics.text.rejection``) does not load the model, scipy and
numba: the command line's ``--help`` needs none of them.
"""

import importlib

_MODULES = {
    "CorruptStateError": ".state",
    "DocumentBatch": ".text.documents",
    "Rejection": ".text.rejection",
    "StreamingTopicModel": ".model",
    "Tokenizer": ".text.tokenizer",
    "TopicSnapshot": ".snapshot",
    "Vocabulary": ".text.vocabulary",
}
__all__ = sorted(_MODULES)
__version__ = "0.1.0"


def __getattr__(name):
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULES[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_MODULES])
