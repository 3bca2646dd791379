"""``group``: the roles of a scale-out group, one at a time (``streamtopics group worker|refresher|status``),
and the ``--workers`` options that ``consume`` uses to start them all (:mod:`consumers.group`)."""

from __future__ import annotations

import json
import logging
import sys

import click

from ..consumer_config import ConsumerConfig
from ..signals import ignore_stop_signals


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))


@click.group("group")
def group():
    """Roles of a scale-out group (normally started by ``streamtopics consume --workers N``)."""


@group.command("worker")
@click.option("--config", "config_file", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--store", required=True, type=click.Path(file_okay=False))
@click.option("--member", required=True, help="Member name: its checkpoints are STORE/members/NAME.")
@click.option("--log-level", default="INFO")
def worker_command(config_file, store, member, log_level):
    """One worker: absorb the assigned partitions into partial statistics, checkpoint to the store."""
    from ..group import Worker
    from ..store import DirectoryStateStore

    setup_logging(log_level)
    service = Worker(ConsumerConfig.load(config_file), DirectoryStateStore(store), member)
    service.install_signal_handlers()
    metrics = service.run()
    ignore_stop_signals()
    click.echo(json.dumps(metrics.as_dict()))


@group.command("refresher")
@click.option("--config", "config_file", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--store", required=True, type=click.Path(file_okay=False))
@click.option("--interval", default=10.0, show_default=True, help="Seconds between refresh rounds.")
@click.option("--log-level", default="INFO")
def refresher_command(config_file, store, interval, log_level):
    """The refresher: merge the newest partial states, refresh, publish."""
    from ..group import Refresher
    from ..kernel_cache import announce_first_compile
    from ..store import DirectoryStateStore

    setup_logging(log_level)
    announce_first_compile(logging.getLogger("streamtopics.refresher").info)
    refresher = Refresher(ConsumerConfig.load(config_file), DirectoryStateStore(store), interval)
    refresher.install_signal_handlers()
    refresher.run()
    ignore_stop_signals()


@group.command("status")
@click.option("--store", required=True, type=click.Path(exists=True, file_okay=False))
def status_command(store):
    """The store's partial states: documents, offsets covered, overlaps (must be none)."""
    from ..store import DirectoryStateStore, coverage, overlaps

    partials = DirectoryStateStore(store).partials()
    out = {"partials": [{"member": p.member, "sequence": p.checkpoint.sequence,
                         "offsets": {f"{t}/{q}": o for (t, q), o in sorted(p.checkpoint.offsets.items())}}
                        for p in partials],
           "coverage": {f"{t}/{q}": r for (t, q), r in sorted(coverage(partials).items())},
           "overlaps": overlaps(partials)}
    click.echo(json.dumps(out, indent=1))


#: options to add to ``consume`` (see :func:`group_options`)
def group_options(command):
    """Decorate the ``consume`` command with ``--workers``, ``--member-prefix``, ``--group-store``,
    ``--refresh-interval``."""
    command = click.option("--refresh-interval", type=float, default=10.0, show_default=True,
                           help="With --workers: seconds between the refresher's merge+refresh rounds.")(command)
    command = click.option("--group-store", type=click.Path(file_okay=False), default=None,
                           help="With --workers: the group's shared state store directory "
                                "[default: the checkpoint directory].")(command)
    command = click.option("--member-prefix", default=None,
                           help="With --workers: this machine's worker names are PREFIX-0 .. PREFIX-N-1; keep it "
                                "stable and unique per machine [default: the host name].")(command)
    command = click.option("--workers", type=click.IntRange(min=0), default=0, show_default=True,
                           help="Scale out: run N worker processes in the consumer group and one refresher "
                                "that merges their partial statistics (needs --vocabulary).")(command)
    return command
