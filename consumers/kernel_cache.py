"""Whether numba's on-disk cache holds any of the library's compiled kernels yet, so that the
command line can say "compiling kernels, once" on a first run and stay quiet afterwards, and, on
a first run, a helper process compiling half of them alongside (:func:`compile_ahead`).

The library's hot loops are ``@njit(cache=True)`` kernels: the first run compiles them (about
35 s on two cores) and numba keeps the machine code in an index (``*.nbi``) and data files in
its cache directory (``__pycache__`` beside the module, or ``$NUMBA_CACHE_DIR``). Looking for
those index files costs a few milliseconds and compiles nothing. An index older than its source
does not count: numba recompiles then.

    >>> import streamtopics.model
    >>> len(kernels()) > 10
    True
"""

from __future__ import annotations

import atexit
import inspect
import subprocess
import sys
from pathlib import Path

from numba.core.caching import CompileResultCacheImpl
from numba.core.dispatcher import Dispatcher

COMPILING_MESSAGE = "compiling kernels, once, ~35 s (numba caches them on disk for the next runs)"


def kernels() -> list[Dispatcher]:
    """The numba kernels of the library's imported modules (``import streamtopics.model`` imports
    all of them)."""
    found = []
    for name, module in list(sys.modules.items()):
        if name == "streamtopics" or name.startswith("streamtopics."):
            found += [v for v in vars(module).values() if isinstance(v, Dispatcher) and v.__module__ == name]
    return found


def _cache_of(kernel: Dispatcher) -> CompileResultCacheImpl | None:
    """numba's on-disk cache for ``kernel``; None where there is no writable cache location
    (numba then compiles on every run)."""
    try:
        return CompileResultCacheImpl(kernel.py_func)
    except RuntimeError:
        return None


def is_cached(kernel: Dispatcher) -> bool:
    """Whether numba's cache has an index for ``kernel`` that is newer than its source."""
    cache = _cache_of(kernel)
    if cache is None:
        return False
    index = Path(cache.locator.get_cache_path()) / f"{cache.filename_base}.nbi"
    source = Path(inspect.getfile(kernel.py_func))
    try:
        return index.stat().st_mtime >= source.stat().st_mtime
    except OSError:
        return False


def compile_ahead() -> subprocess.Popen | None:
    """On a first run (:func:`first_compile`), start a helper process that compiles the
    refinement's kernels (:mod:`streamtopics.kernel_warmup`, about half of the compile time) while
    this one compiles the text, ingest and recovery kernels: its first refresh then loads them
    from numba's cache. On two cores the demo's first run took 0.5-0.6 times as long (medians
    38.5 / 43.7 s against 75.4 / 72.5 s, AMD EPYC, 2026-11-27: ``python -m benchmarks.first_run``).
    The helper is stopped when this process exits. None on later runs, where numba has no
    writable cache (nothing to share) or where no interpreter can be started."""
    return _start_helper() if first_compile() else None


def announce_first_compile(say) -> None:
    """On a first run, ``say`` the compile message and start the helper (:func:`compile_ahead`):
    what the commands that refresh do before they start."""
    if first_compile():
        say(COMPILING_MESSAGE)
        _start_helper()


def _start_helper() -> subprocess.Popen | None:
    if not sys.executable or _cache_of(kernels()[0]) is None:
        return None
    try:
        helper = subprocess.Popen([sys.executable, "-c", "from streamtopics.kernel_warmup import "
                                   "compile_refinement_kernels; compile_refinement_kernels()"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:  # no interpreter to start (an embedded Python): the run compiles everything itself
        return None
    atexit.register(_stop, helper)
    return helper


def _stop(helper: subprocess.Popen) -> None:
    if helper.poll() is None:
        helper.kill()
        helper.wait()


def first_compile() -> bool:
    """True when no kernel of the library is cached yet: this run compiles them."""
    import streamtopics.model  # noqa: F401  (the model imports, and so registers, every kernel module)

    return not any(is_cached(kernel) for kernel in kernels())
