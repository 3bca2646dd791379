"""One spelling per setting: every command spells a model setting as its ModelConfig field and
takes its default and help from there; former spellings still work, each with one deprecation
line on stderr, and are hidden from --help."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from consumers.cli import main
from consumers.consumer_config import ConsumerConfig
from streamtopics.config import ModelConfig, default, doc

MODEL_SETTINGS = {f.name for f in dataclasses.fields(ModelConfig)}
#: flags named like a model setting that are another part's: infer's documents per call, and the
#: consumer's own wall-clock refresh trigger (the consumer schedules refreshes; its model's is off)
NOT_MODEL_SETTINGS = {("infer", "batch_size"), ("consume", "refresh_every_wall_seconds")}
#: (command, former spelling, spelling now, a value)
RENAMED = [
    ("replay", "--topics", "--n-topics", "7"),
    ("replay", "--warmup", "--warmup-documents", "50"),
    ("replay", "--min-df", "--anchor-min-df", "3"),
    ("bench", "--topics", "--n-topics", "7"),
    ("bench", "--warmup", "--warmup-documents", "50"),
    ("demo", "--topics", "--n-topics", "7"),
    ("consume", "--refresh-every-seconds", "--refresh-every-wall-seconds", "5"),
    ("consume", "--checkpoint-every-seconds", "--checkpoint-every-wall-seconds", "5"),
]


def commands(group: click.Group = main, prefix: str = ""):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix}{name} ")
        else:
            yield prefix + name, command


def parsed(name: str, args: list[str], capsys) -> tuple[dict, str]:
    """The parameters ``name`` parses from ``args`` (without running it) and what went to stderr."""
    with main.commands[name].make_context(name, list(args)) as ctx:
        params = dict(ctx.params)
    return params, capsys.readouterr().err


def test_every_model_setting_option_is_spelled_defaulted_and_documented_as_the_model_says():
    found = set()
    for path, command in commands():
        for param in command.params:
            if (isinstance(param, click.Option) and param.name in MODEL_SETTINGS
                    and (path, param.name) not in NOT_MODEL_SETTINGS):
                found.add((path, param.name))
                assert param.opts == ["--" + param.name.replace("_", "-")], (path, param.opts)
                if path != "consume":  # consume's defaults stay None ('not given'): ConsumerConfig has them
                    assert param.default == default(param.name), (path, param.name)
                assert param.help.startswith(doc(param.name)), (path, param.name)
    assert {("replay", "n_topics"), ("replay", "warmup_documents"), ("replay", "anchor_min_df"),
            ("replay", "match_threshold"), ("replay", "burn_in"), ("demo", "n_topics"), ("bench", "n_topics"),
            ("consume", "n_topics"), ("consume", "anchor_min_df")} <= found


def test_no_option_of_any_command_is_a_model_setting_under_another_name():
    """A flag spelled like a setting is that setting (under its own name), and no command declares
    a former spelling (--topics, --warmup, --min-df) as a flag of its own."""
    spelled = {"--" + name.replace("_", "-"): name for name in MODEL_SETTINGS}
    former = {old for _, old, _, _ in RENAMED}
    for path, command in commands():
        for param in command.params:
            if not isinstance(param, click.Option) or (path, param.name) in NOT_MODEL_SETTINGS:
                continue
            for flag in param.opts:
                assert spelled.get(flag, param.name) == param.name, (path, flag, param.name)
                assert flag not in former, (path, flag)


@pytest.mark.parametrize("command, old, new, value", RENAMED)
def test_a_former_spelling_still_works_and_says_so_once(command, old, new, value, capsys):
    required = ["--topic", "news"] if command == "consume" else []
    by_old, err_old = parsed(command, [*required, old, value], capsys)
    by_new, err_new = parsed(command, [*required, new, value], capsys)
    assert by_old == by_new
    assert err_old == f"{old} is deprecated; use {new}\n"
    assert err_new == ""
    by_equals, err_equals = parsed(command, [*required, f"{old}={value}"], capsys)
    assert by_equals == by_new and err_equals == err_old


def test_a_former_spelling_after_a_double_dash_is_left_alone(capsys):
    params, err = parsed("replay", ["--", "--topics"], capsys)
    assert params["source"] == "--topics" and params["n_topics"] == default("n_topics") and err == ""


@pytest.mark.parametrize("command", sorted({c for c, *_ in RENAMED}))
def test_help_shows_only_the_spellings_of_now(command):
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    for renamed_command, old, new, _ in RENAMED:
        if renamed_command == command:
            assert new in result.output
            assert not re.search(re.escape(old) + r"(?![\w-])", result.output), old


def test_consume_options_are_the_config_keys_and_old_keys_still_load(tmp_path, capsys):
    result = CliRunner().invoke(main, ["consume", "--topic", "news", "--refresh-every-seconds", "5", "--show-config"])
    assert result.exit_code == 0, result.output
    assert '"refresh_every_wall_seconds": 5.0' in result.stdout
    assert result.stderr == "--refresh-every-seconds is deprecated; use --refresh-every-wall-seconds\n"
    config_file = tmp_path / "consume.toml"
    config_file.write_text('topics = ["news"]\nrefresh_every_seconds = 30\n'
                           'checkpoint_every_seconds = 8\ncheckpoint_every_wall_seconds = 9\n')
    config = ConsumerConfig.load(config_file, environ={"STREAMTOPICS_REFRESH_EVERY_SECONDS": "3"})
    assert config.refresh_every_wall_seconds == 3.0  # the environment over the file, as for any setting
    assert config.checkpoint_every_wall_seconds == 9.0  # the new name over the old
    assert capsys.readouterr().err.splitlines() == [
        "STREAMTOPICS_REFRESH_EVERY_SECONDS is deprecated; use STREAMTOPICS_REFRESH_EVERY_WALL_SECONDS",
        "refresh_every_seconds is deprecated; use refresh_every_wall_seconds",
        "checkpoint_every_seconds is deprecated; use checkpoint_every_wall_seconds"]
    assert "refresh_every_seconds" not in config.to_dict()


def test_a_former_name_as_a_python_keyword_warns():
    with pytest.warns(DeprecationWarning, match="refresh_every_seconds is deprecated; use refresh_every_wall_seconds"):
        config = dataclasses.replace(ConsumerConfig(topics=["news"]), refresh_every_seconds=2.5)
    assert config.refresh_every_wall_seconds == 2.5


def test_an_unknown_model_option_fails_before_kafka(monkeypatch):
    def connect(*args, **kwargs):
        raise AssertionError("the consumer was built")

    monkeypatch.setattr("consumers.kafka_consumer.TopicModelConsumer", connect)  # consume imports them when it runs
    monkeypatch.setattr("consumers.group.run_group", connect)
    for workers in ("0", "2"):
        result = CliRunner().invoke(main, ["consume", "--topic", "news", "--bootstrap-servers", "127.0.0.1:9",
                                           "--workers", workers, "--model-option", "refine_sweps=1",
                                           "--model-option", "bogus=1"])
        assert result.exit_code == 2, result.output
        assert ("unknown model settings: 'bogus', 'refine_sweps' (did you mean 'refine_sweeps'?)"
                in result.stderr)


def test_an_unknown_consumer_setting_is_named_with_the_nearest():
    with pytest.raises(ValueError, match=re.escape("unknown consumer setting: 'n_topic' (did you mean 'n_topics'?)")):
        ConsumerConfig.from_dict({"topics": ["news"], "n_topic": 3})


def test_the_documentation_shows_only_the_spellings_of_now():
    root = Path(__file__).resolve().parent.parent
    former = sorted({old for _, old, _, _ in RENAMED})
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if "streamtopics " in line or "STREAMTOPICS_" in line:
                for old in former:
                    assert not re.search(re.escape(old) + r"(?![\w-])", line), f"{page.name}:{number}: {old}"
