"""``demo``: replay the built-in stream (the standard library's docstrings) and watch topics form."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import click

from ..extras import missing_modules
from .console import Console, topic_table
from .options import Command, live_service, model_option, serve_options, serve_until_interrupted
from .replay import prepare_out, run_replay


@click.command(cls=Command)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/demo"),
              show_default=True, help="Where the snapshots go (earlier demo output there is replaced).")
@model_option("n_topics", click.IntRange(min=2), old=("--topics",))
@click.option("--snapshot-every", type=click.IntRange(min=1), default=500, show_default=True, metavar="N")
@click.option("-q", "--quiet", is_flag=True, help="Only the final topics and the summary.")
@click.option("--pace", type=click.FloatRange(min=0), default=2.0, show_default=True, metavar="SECONDS",
              help="With --serve: pause this long after each snapshot, so that the dashboard can be "
                   "watched changing (0: full speed). Without --serve the demo always runs at full speed.")
@serve_options
def demo(out, n_topics, snapshot_every, quiet, pace, serve_at, allow_remote):
    """The main job: replay the built-in stream and watch topics form.

    The stream is the documentation of the Python standard library that ships with every
    Python (one docstring per document, about 4,000; see consumers/builtin_corpus.py). No
    network, no broker. Prints events as topics are born, die and change, then the final
    topics, and leaves the snapshots, a checkpoint and the model in --out.
    """
    from streamtopics import StreamingTopicModel

    from .. import builtin_corpus
    from ..kernel_cache import announce_first_compile
    from ..replay import Replay

    console = Console(quiet)
    version = ".".join(map(str, sys.version_info[:3]))
    console.echo(f"streamtopics demo: replaying the docstrings of the Python {version} standard library "
                 f"({n_topics} topics, a snapshot every {snapshot_every} documents) into {out}")
    announce_first_compile(console.echo)
    prepare_out(out, force=True)
    model = StreamingTopicModel(n_topics, vocabulary_size=3000, warmup_documents=800,
                                tokenizer=builtin_corpus.tokenizer())
    engine = Replay(model, builtin_corpus.BuiltinCorpus(), out, every_documents=snapshot_every)
    with live_service(console, serve_at, allow_remote, "demo: Python standard library docstrings") as service:
        live = service[0] if service else None
        if live is not None and pace:
            live = PacedLive(live, pace, engine.pause)
        run_replay(console, engine, "demo", None, False, 8, out, live=live)
        _demo_epilogue(console, model, out)
        if service:
            serve_until_interrupted(console, service[1])


class PacedLive:
    """The dashboard's live source, with a pause after each snapshot: at full speed the demo's
    snapshots come a few seconds apart, too fast to watch the page change. ``sleep``: the
    replay's :meth:`~consumers.replay.Replay.pause`, so that the pauses are not counted as
    ingest time."""

    def __init__(self, live, pause: float, sleep):
        self.live, self.pause, self.sleep = live, pause, sleep

    def on_snapshot(self, snapshot, path=None, model=None) -> None:
        self.live.on_snapshot(snapshot, path, model=model)
        self.sleep(self.pause)

    def on_progress(self, replay) -> None:
        self.live.on_progress(replay)

    def finish(self) -> None:
        self.live.finish()


def command_prefix() -> str:
    """How to run ``streamtopics`` again from this shell, as this process was started: the plain
    name when it is on the PATH, else the script's path (``.venv/bin/streamtopics``), or
    ``python -m consumers.cli``."""
    script = Path(sys.argv[0])
    if script.name == "__main__.py":
        return f"{shlex.quote(_relative(Path(sys.executable)))} -m consumers.cli"
    on_path = shutil.which(script.name)
    if on_path and Path(on_path).resolve() == script.resolve():
        return script.name
    return shlex.quote(_relative(script))


def _relative(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (``.venv/bin/x``)."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path.absolute())


def _demo_epilogue(console, model, out) -> None:
    console.echo("")
    console.echo("final topics:")
    for row in topic_table(model.snapshot, 8):
        console.echo("  " + row)
    console.echo("")
    run, where = command_prefix(), shlex.quote(str(out))
    hints = [(f"{run} topics {where}", "the latest topics"),
             (f"{run} events {where}", "births, deaths and changes across the snapshots"),
             (f"echo 'open a socket and send bytes' | {run} infer --model {where}", "")]
    if not missing_modules("serve"):
        hints.append((f"{run} serve {where}", "the dashboard over these snapshots"))
    if not missing_modules("plot"):
        hints.append((f"{run} plot {where} --out prevalence.png", ""))
    width = max(len(command) for command, comment in hints if comment)
    console.echo(f"snapshots, checkpoint and model are in {out}; next:")
    for command, comment in hints:
        console.echo(f"  {command:<{width}}  # {comment}" if comment else f"  {command}")
