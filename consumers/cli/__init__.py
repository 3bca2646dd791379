"""The ``streamtopics`` command line: one click group, one module per command.

::

    consumers/cli/
      __init__.py   the group (``main``, the ``streamtopics`` entry point): errors -> exit codes
      console.py    what commands print (progress, topic tables, events) and their exceptions
      options.py    options shared by several commands, one spelling per setting; --serve
      replay.py     replay        an archive through a model (consumers.replay)
      demo.py       demo          the built-in stream
      serve.py      serve         the dashboard over a run directory (consumers.service)
      inspect.py    topics, events, plot
      infer.py      infer         topic mixtures under a saved model
      produce.py    produce       an archive into a Kafka topic
      bench.py      bench         a quick ingest benchmark
      consume.py    consume       the Kafka consumer service (consumers.kafka_consumer)
      group.py      group         scale-out roles: worker, refresher, status (consumers.group)

Each command is a thin layer over the library and the consumers: it parses options, prints
progress (a tqdm bar, only when stdout is a terminal), events and tables, and turns failures
into one line on stderr and an exit code (see ``EXIT_CODES``). Signals: :mod:`consumers.signals`.
"""

from __future__ import annotations

import os
import sys

import click

from ..extras import MissingExtra
from .bench import bench
from .console import BadInput, Failure
from .consume import consume
from .demo import demo
from .group import group
from .infer import infer
from .inspect import events, plot, topics
from .produce import produce
from .replay import replay
from .serve import serve

#: The library's errors that mean bad input (exit 2), by module. Looked up in ``sys.modules``: an
#: error can only be one of these if its module is loaded, and ``--help`` should not load them.
BAD_INPUT_ERRORS = {
    "consumers.records": "SourceError",
    "consumers.replay": "CheckpointError",
    "streamtopics.state": "CorruptStateError",
    "streamtopics.refresh.anchor_selection": "NotEnoughCandidatesError",
}

EXIT_CODES = """\b
Exit codes:
  0    success (malformed records are reported and counted, not fatal)
  1    runtime failure (an unexpected error, a broker that stops answering)
  2    usage error or bad input: bad path, format, field name, option or checkpoint
  130  interrupted (replay saves a checkpoint first: continue with --resume)
"""


class _Group(click.Group):
    """Maps library errors to one line and an exit code (STREAMTOPICS_DEBUG=1: traceback)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:  # the reader (e.g. `| head`) has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except Exception as error:
            if os.environ.get("STREAMTOPICS_DEBUG"):
                raise
            if _is_bad_input(error):
                raise BadInput(str(error)) from None
            if isinstance(error, FileNotFoundError) and error.filename:  # e.g. a run's model file, deleted
                raise BadInput(f"{error.filename}: no such file") from None
            if isinstance(error, MissingExtra):
                raise Failure(str(error)) from None
            if isinstance(error, OSError) and error.filename:  # e.g. no space left on the run directory's disk
                raise Failure(f"{error.filename}: {error.strerror}") from None
            raise Failure(f"{type(error).__name__}: {error}") from None


def _is_bad_input(error: Exception) -> bool:
    """Whether ``error`` is one of :data:`BAD_INPUT_ERRORS`."""
    return any(isinstance(error, getattr(sys.modules.get(module), name, ()))
               for module, name in BAD_INPUT_ERRORS.items())


@click.group(cls=_Group, epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="streamtopics")
def main():
    """Streaming topic models: replay archived streams, watch topics form and change.

    Start with `streamtopics demo`: it replays the Python standard library's documentation
    (built in, no download) and leaves snapshots in ./runs/demo.
    """


for _command in (replay, demo, serve, plot, topics, events, infer, produce, bench, consume, group):
    main.add_command(_command)
