"""The optional dependencies ("extras" in pyproject.toml) and the one-line error a command gives
when it needs one that is not installed, instead of an ImportError traceback.

The core install (numpy, scipy, numba, river, kafka-python and the command line) runs the
library, replays and the Kafka consumer; the HTTP service, the plots, the peer comparison and
the Dask replay each need an extra::

    >>> require("serve", "streamtopics serve")   # starlette and uvicorn importable: no error
    >>> EXTRAS["plot"]
    ('matplotlib',)
"""

from __future__ import annotations

from importlib import import_module

EXTRAS = {
    "serve": ("starlette", "uvicorn"),
    "plot": ("matplotlib",),
    "bench": ("gensim", "sklearn", "tomotopy"),
    "dask": ("dask", "distributed"),
    "pandas": ("pandas",),
}


class MissingExtra(ImportError):
    """Something needs an extra whose packages cannot be imported; the message names the extra
    and the command that installs it."""


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported (none: the extra is installed)."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` imports; ``what`` names the
    command or option that needs it (``"streamtopics serve"``, ``"--serve"``)."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(f"{what} needs the '{extra}' extra ({', '.join(missing)} not installed): "
                           f"pip install 'streamtopics[{extra}]'")
