"""``demo``: replay the built-in stream (the standard library's docstrings) and watch topics form."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from streamtopics import StreamingTopicModel

from .. import builtin_corpus
from ..replay import Replay
from .console import Console, topic_table
from .options import live_service, serve_options, serve_until_interrupted
from .replay import _prepare_out, run_replay


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/demo"),
              show_default=True, help="Where the snapshots go (earlier demo output there is replaced).")
@click.option("--topics", "n_topics", type=click.IntRange(min=2), default=20, show_default=True)
@click.option("--snapshot-every", type=click.IntRange(min=1), default=500, show_default=True, metavar="N")
@click.option("-q", "--quiet", is_flag=True, help="Only the final topics and the summary.")
@serve_options
def demo(out, n_topics, snapshot_every, quiet, serve_at, allow_remote):
    """The main job: replay the built-in stream and watch topics form.

    The stream is the documentation of the Python standard library that ships with every
    Python (one docstring per document, about 4,000; see consumers/builtin_corpus.py). No
    network, no broker. Prints events as topics are born, die and change, then the final
    topics, and leaves the snapshots, a checkpoint and the model in --out.
    """
    console = Console(quiet)
    version = ".".join(map(str, sys.version_info[:3]))
    console.echo(f"streamtopics demo: replaying the docstrings of the Python {version} standard library "
                 f"({n_topics} topics, a snapshot every {snapshot_every} documents) into {out}")
    _prepare_out(out, force=True)
    model = StreamingTopicModel(n_topics, vocabulary_size=3000, warmup_documents=800,
                                tokenizer=builtin_corpus.tokenizer())
    engine = Replay(model, builtin_corpus.BuiltinCorpus(), out, every_documents=snapshot_every)
    with live_service(console, serve_at, allow_remote, "demo: Python standard library docstrings") as service:
        run_replay(console, engine, "demo", None, False, 8, out, live=service[0] if service else None)
        _demo_epilogue(console, model, out)
        if service:
            serve_until_interrupted(console, service[1])


def _demo_epilogue(console, model, out) -> None:
    console.echo("")
    console.echo("final topics:")
    for row in topic_table(model.snapshot, 8):
        console.echo("  " + row)
    console.echo("")
    console.echo(f"snapshots, checkpoint and model are in {out}; next:")
    console.echo(f"  streamtopics topics {out}        # the latest topics")
    console.echo(f"  streamtopics events {out}        # births, deaths and changes across the snapshots")
    console.echo(f"  echo 'open a socket and send bytes' | streamtopics infer --model {out}")
    console.echo(f"  streamtopics serve {out}         # the dashboard over these snapshots")
    console.echo(f"  streamtopics plot {out} --out prevalence.png")
