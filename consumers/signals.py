"""Graceful stop on SIGTERM/SIGINT for the long-running services and the command line.

:func:`install_graceful_stop`: the first signal asks the service to stop (finish the batch,
checkpoint, commit, close); a second one of the same kind ends the process at once.
:func:`on_stop_signals`: while a command's block runs, each signal asks it to stop (the command
line's replay and dashboards). Once a service has stopped cleanly,
:func:`ignore_stop_signals` keeps a late signal from killing the exiting process: Python's
interpreter shutdown restores the default handlers, so a SIGTERM landing in that window would
otherwise turn a clean exit (status 0) into death by signal (status -15).
"""

from __future__ import annotations

import logging
import signal
from contextlib import contextmanager
from typing import Callable

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install_graceful_stop(stop: Callable[[], None], what: str = "stopping") -> None:
    """Call ``stop`` on the first SIGTERM/SIGINT; restore the default for a second (main thread only)."""
    def handler(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        log.info("signal %d: %s", signum, what)
        stop()

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)


def ignore_stop_signals() -> None:
    """The work is done and saved: a stop request while the process exits is moot."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextmanager
def on_stop_signals(stop: Callable[[int], None]):
    """While the block runs, SIGTERM/SIGINT call ``stop(signum)`` (and nothing else); the
    previous handlers come back afterwards. For commands that end their work cleanly on a
    signal, every time it arrives (a replay saves a checkpoint; a dashboard stops serving)."""
    previous = {signum: signal.signal(signum, lambda signum, frame: stop(signum)) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
