"""``consume``: run the Kafka consumer service (:mod:`consumers.kafka_consumer`) until stopped.

::

    streamtopics consume --topic news --n-topics 20 --checkpoint-dir state/ --snapshot-dir snapshots/
    streamtopics consume --config consume.toml

Every option is also a key of the config file (``--config``, TOML or JSON; the option name with
underscores, optionally inside a ``[consume]`` table) and an environment variable
(``STREAMTOPICS_`` + the key in capitals). Flags win over the environment, which wins over the
file. SIGTERM or Ctrl-C stops it gracefully: the batch is finished, a checkpoint written, offsets
committed. ``--workers N`` scales out over the consumer group instead: N worker processes and
one refresher sharing a state store (:mod:`consumers.group`, :mod:`consumers.cli.group`). The
options are generated from :class:`~consumers.consumer_config.ConsumerConfig`, so the two never
disagree.
"""

from __future__ import annotations

import functools
import json
import logging
import typing
from dataclasses import MISSING, fields

import click

from ..consumer_config import ENV_PREFIX, ConsumerConfig, field_kinds
from ..signals import ignore_stop_signals
from .group import group_options, setup_logging
from .options import Command, Option

_HINTS = typing.get_type_hints(ConsumerConfig)


def _kind(name: str) -> type:
    kinds, _ = field_kinds(_HINTS[name])
    return kinds[0] if len(kinds) == 1 else str  # "auto" or a number: parsed by ConsumerConfig


def _default(f) -> str:
    value = f.default if f.default is not MISSING else f.default_factory()
    return "none" if value in (None, [], {}) else str(value)


def _click_option(f):
    """The click option of one config field (its default stays None: 'not given'); a renamed
    field's former flag is still accepted (:class:`~consumers.cli.options.Command`)."""
    kind = _kind(f.name)
    flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
    help_text = f"{f.metadata['help']} [default: {_default(f)}; env {ENV_PREFIX}{f.name.upper()}]"
    old = ("--" + f.metadata["old"].replace("_", "-"),) if "old" in f.metadata else ()
    option = functools.partial(click.option, cls=Option, old=old, help=help_text)
    if kind is bool:
        return option(f"{flag}/--no-{flag[2:]}", f.name, default=None)
    if kind in (list, dict):
        metavar = "KEY=VALUE" if kind is dict else "NAME"
        return option(flag, f.name, multiple=True, metavar=metavar)
    click_type = click.Choice(f.metadata["choices"]) if "choices" in f.metadata else {
        int: click.INT, float: click.FLOAT}.get(kind, click.STRING)
    return option(flag, f.name, type=click_type, default=None)


def _config_options(command):
    for f in reversed(fields(ConsumerConfig)):
        command = _click_option(f)(command)
    return command


def _key_values(name: str, pairs) -> dict:
    """``("a=1", "b=x")`` -> ``{"a": 1, "b": "x"}`` (values parsed as JSON when they are JSON)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=name)
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def _overrides(settings: dict) -> dict:
    """The settings given on the command line, in ConsumerConfig's types."""
    out = {}
    for name, value in settings.items():
        if value is None or value == ():
            continue
        kind = _kind(name)
        out[name] = _key_values(name, value) if kind is dict else list(value) if kind is list else value
    return out


@click.command("consume", cls=Command, context_settings={"max_content_width": 110})
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="Settings file (TOML or JSON).")
@click.option("--show-config", is_flag=True, help="Print the effective settings as JSON and exit.")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@group_options
@_config_options
def consume(config_file, show_config, log_level, workers, member_prefix, group_store, refresh_interval, **settings):
    """Consume Kafka topics into a streaming topic model: exactly-once model state (checkpoint,
    then commit), snapshots to a topic and a directory, per-document topic mixtures, dead letters."""
    from ..group import run_group
    from ..kafka_consumer import TopicModelConsumer
    from ..kernel_cache import announce_first_compile

    try:
        config = ConsumerConfig.load(config_file, **_overrides(settings))
    except (ValueError, TypeError, OSError) as error:
        raise click.UsageError(str(error)) from error
    if show_config:
        click.echo(json.dumps(config.to_dict(), indent=2))
        return
    setup_logging(log_level)
    if workers:
        try:
            raise SystemExit(run_group(config, workers, group_store, refresh_interval, log_level,
                               member_prefix=member_prefix))
        except ValueError as error:
            raise click.UsageError(str(error)) from error
    announce_first_compile(logging.getLogger("streamtopics.consume").info)
    service = TopicModelConsumer(config)
    service.install_signal_handlers()
    metrics = service.run()
    ignore_stop_signals()
    click.echo(json.dumps(metrics.as_dict()))
