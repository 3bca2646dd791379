"""Every command shown in README.md and docs/*.md runs as written.

The pages keep their code in fenced blocks whose language says what they are: ``bash`` (commands),
``python`` (self-contained programs), ``toml`` (a file the commands use, named after the language:
```` ```toml consume.toml ````) and ``text`` (output, never run). The quick checks:

* every fence has one of those languages and there is no indented code block (nothing escapes);
* every ``streamtopics ...`` command is parsed by the real click command tree, down to its
  subcommand (unknown options, bad choices, bad values and missing arguments fail); paths that
  click requires to exist are created in a temporary directory first; ``consume`` lines are also
  run with ``--show-config`` (which loads and checks the whole consumer config, no broker needed),
  and their ``--model-option`` keys must be model settings;
* ``python -m X`` names an importable module, ``python FILE`` an existing file, and argparse
  programs parse their documented arguments; ``bash FILE`` an existing script; ``pip install``
  names existing extras; every other program is one the pages are allowed to use;
* every Python block compiles; the configuration page's table lists every ``ModelConfig`` setting
  with its default.

The slow checks run documented commands end to end in a temporary directory beside a link to
``../shared`` (a small replay, its topics, events and mixtures, a stop and resume compared byte for
byte with the uninterrupted run, the Dask replay) and every Python block.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED = ROOT.parent / "shared"
LANGUAGES = {"bash", "python", "toml", "text"}
#: programs the pages may show besides streamtopics, python, bash, pip and dask
PLAIN_PROGRAMS = {"echo", "curl"}
PROGRAM_SUBSTITUTION = re.compile(r"\$\((openssl rand -hex \d+)\)")


@dataclass
class Block:
    page: Path
    line: int
    language: str
    name: str  # the word after the language (a toml block's file name)
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Command:
    block: Block
    line: str  # the whole logical line, continuations joined
    argv: list[str]
    env: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.block.where}: {self.line}"


def read_blocks(page: Path) -> list[Block]:
    blocks, current, lines = [], None, page.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if line.startswith("```"):
            if current is None:
                words = line[3:].split()
                current = Block(page, number, words[0] if words else "", " ".join(words[1:]), "")
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.text += line + "\n"
    assert current is None, f"{page.name}: a fence opened at line {blocks and blocks[-1].line} is never closed"
    return blocks


BLOCKS = [block for page in PAGES for block in read_blocks(page)]


def logical_lines(text: str) -> list[str]:
    out, pending = [], ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def split_commands(block: Block) -> list[Command]:
    """The simple commands of a bash block: pipelines and lists split, comments dropped,
    ``VAR=value`` prefixes kept as the command's environment."""
    commands = []
    for line in logical_lines(block.text):
        lexer = shlex.shlex(PROGRAM_SUBSTITUTION.sub("0123456789abcdef", line), posix=True,
                            punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        segment: list[str] = []
        segments = [segment]
        for token in lexer:
            if token in ("|", "||", "&&", ";", "&"):
                segment = []
                segments.append(segment)
            else:
                segment.append(token)
        for tokens in segments:
            env = {}
            while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tokens[0]):
                key, _, value = tokens.pop(0).partition("=")
                env[key] = value
            if tokens:
                commands.append(Command(block, line, tokens, env))
    return commands


COMMANDS = [command for block in BLOCKS if block.language == "bash" for command in split_commands(block)]


def program(command: Command) -> str:
    return Path(command.argv[0]).name if command.argv[0].startswith(".venv/bin/") else command.argv[0]


def by_program(*names: str) -> list[Command]:
    return [c for c in COMMANDS if program(c) in names]


def ids(commands) -> list[str]:
    return [f"{c.block.page.name}:{c.block.line}:{' '.join(c.argv)[:60]}" for c in commands]


# ---------------------------------------------------------------------------------- the pages


def test_the_pages_exist_and_the_readme_is_a_front_door():
    names = {page.name for page in PAGES}
    for page in ("replay.md", "kafka.md", "scale-out.md", "monitoring.md", "configuration.md", "design.md",
                 "choices.md"):
        assert page in names
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for page in PAGES:
        if page.parent.name == "docs":
            assert f"docs/{page.name}" in readme, f"README does not link {page.name}"
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "shared/DESIGN" not in text and "shared/papers" not in text, page.name


def test_every_code_block_says_what_it_is():
    for block in BLOCKS:
        assert block.language in LANGUAGES, f"{block.where}: fence language {block.language!r}"
        if block.language == "toml":
            assert block.name, f"{block.where}: a toml block names its file (```toml NAME)"
    for page in PAGES:
        in_fence, previous = False, ""
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith("```"):
                in_fence = not in_fence
            elif not in_fence and line.startswith("    ") and not previous.strip() and line.strip():
                pytest.fail(f"{page.name}:{number}: an indented code block; use a fenced one")
            previous = line


def test_the_pages_show_commands():
    assert len(by_program("streamtopics")) >= 30
    assert by_program("python") and by_program("bash")


def test_local_links_point_at_files():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: link to {target}"


# ------------------------------------------------------------------ streamtopics: the click tree


def _path_values(command: click.Command, args: list[str]):
    """(value, Path type) of every option of ``command`` in ``args`` whose type must exist."""
    for param in command.params:
        if not (isinstance(param, click.Option) and isinstance(param.type, click.Path) and param.type.exists):
            continue
        for i, arg in enumerate(args):
            for opt in param.opts:
                if arg == opt and i + 1 < len(args):
                    yield args[i + 1], param.type
                elif arg.startswith(opt + "="):
                    yield arg[len(opt) + 1:], param.type


def _create(value: str, kind: click.Path) -> None:
    path = Path(value)
    if path.is_absolute() or path.exists():
        return
    if kind.dir_okay and not kind.file_okay:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def parse_streamtopics(args: list[str]) -> tuple[list[str], click.Command]:
    """Parse ``streamtopics ARGS`` with the real command tree, as far as the innermost
    subcommand; returns the command's path and the command. Raises click's errors."""
    from consumers.cli import main

    ctx = main.make_context("streamtopics", list(args))
    command, names = main, []
    while isinstance(command, click.Group):
        pending = list(getattr(ctx, "_protected_args", None) or []) + list(ctx.args)
        name, sub, rest = command.resolve_command(ctx, pending)
        for value, kind in _path_values(sub, rest):
            _create(value, kind)
        ctx = sub.make_context(name, rest, parent=ctx)
        command, names = sub, names + [name]
    return names, command


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """A working directory holding the pages' toml files."""
    monkeypatch.chdir(tmp_path)
    for block in BLOCKS:
        if block.language == "toml":
            (tmp_path / block.name).write_text(block.text, encoding="utf-8")
    return tmp_path


STREAMTOPICS = by_program("streamtopics")


@pytest.mark.parametrize("command", STREAMTOPICS, ids=ids(STREAMTOPICS))
def test_streamtopics_commands_parse(command, in_tmp):
    try:
        names, _ = parse_streamtopics(command.argv[1:])
    except click.exceptions.Exit as stop:  # --help, --version
        pytest.fail(f"{command}: the pages show no --help/--version runs (exit {stop.exit_code})")
    except click.ClickException as error:
        pytest.fail(f"{command}: {error.format_message()}")
    assert names, f"{command}: no subcommand"
    if names == ["consume"]:
        from consumers.cli import main
        from streamtopics.config import ModelConfig

        settings = {f.name for f in dataclasses.fields(ModelConfig)}
        args = command.argv[1:]
        for i, arg in enumerate(args[:-1]):
            if arg == "--model-option":
                assert args[i + 1].partition("=")[0] in settings, f"{command}: {args[i + 1]} is no model setting"
        env = {key: value for key, value in os.environ.items() if not key.startswith("STREAMTOPICS_")}
        env.update(command.env)
        result = CliRunner().invoke(main, [*args, "--show-config"], env=env)
        assert result.exit_code == 0, f"{command}: {result.output}"
        json.loads(result.output)


def test_toml_files_are_valid_consumer_configs(in_tmp):
    from consumers.consumer_config import ConsumerConfig
    from streamtopics.config import ModelConfig

    settings = {f.name for f in dataclasses.fields(ModelConfig)}
    for block in BLOCKS:
        if block.language == "toml":
            table = tomllib.loads(block.text)
            config = ConsumerConfig.load(block.name, environ={})
            assert set(table.get("consume", table).get("model_options", {})) <= settings, block.where
            assert config.topics or config.pattern


def test_the_parse_check_catches_mistakes(in_tmp):
    for args in (["replay", "x.jsonl", "--snapshot-evry", "5"], ["replay", "x.jsonl", "--format", "xml"],
                 ["produce", "x.jsonl"], ["group", "status"], ["serve"], ["replay", "x", "--snapshot-interval", "7x"],
                 ["nonsense"]):
        with pytest.raises(click.ClickException):
            parse_streamtopics(args)
    parse_streamtopics(["group", "status", "--store", "made/by/the/check"])  # created, then parsed
    assert Path("made/by/the/check").is_dir()


# -------------------------------------------------------------------------- python, bash, pip


def _python_target(command: Command) -> tuple[str, str, list[str]]:
    """("module" | "file", its name, its arguments)."""
    args = command.argv[1:]
    if args[:1] == ["-m"]:
        return "module", args[1], args[2:]
    assert args and not args[0].startswith("-"), f"{command}: python runs a file or -m MODULE"
    return "file", args[0], args[1:]


def _source(kind: str, name: str) -> Path | None:
    if kind == "file":
        return ROOT / name
    sys.path.insert(0, str(ROOT))
    try:
        spec = importlib.util.find_spec(name)
    finally:
        sys.path.remove(str(ROOT))
    if spec is None:
        return None
    origin = Path(spec.origin)
    if spec.submodule_search_locations:  # a package: python -m runs its __main__
        origin = Path(next(iter(spec.submodule_search_locations))) / "__main__.py"
    return origin


#: runs a program until argparse has parsed its arguments, then stops: exit 0 if they parsed
_ARGPARSE_ONLY = """
import argparse, runpy, sys
class Parsed(BaseException): pass
original = argparse.ArgumentParser.parse_args
def parse_args(self, args=None, namespace=None):
    original(self, args, namespace)
    raise Parsed
argparse.ArgumentParser.parse_args = parse_args
kind, name = sys.argv[1], sys.argv[2]
sys.argv = [name, *sys.argv[3:]]
try:
    runpy.run_module(name, run_name="__main__") if kind == "module" else runpy.run_path(name, run_name="__main__")
except Parsed:
    sys.exit(0)
sys.exit(3)  # never parsed
"""

PYTHON = by_program("python", "python3")


@pytest.mark.parametrize("command", PYTHON, ids=ids(PYTHON))
def test_python_commands_name_what_exists(command):
    kind, name, args = _python_target(command)
    source = _source(kind, name)
    assert source is not None and source.exists(), f"{command}: no {kind} {name}"
    if name == "pytest" or "argparse" not in source.read_text(encoding="utf-8"):
        return
    result = subprocess.run([sys.executable, "-c", _ARGPARSE_ONLY, kind, name, *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"


BASH = by_program("bash")


@pytest.mark.parametrize("command", BASH, ids=ids(BASH))
def test_bash_scripts_exist(command):
    assert len(command.argv) >= 2 and (ROOT / command.argv[1]).is_file(), str(command)


def test_pip_installs_name_real_extras():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for command in by_program("pip"):
        assert command.argv[1] == "install", str(command)
        for target in command.argv[2:]:
            match = re.fullmatch(r"(?:\.|streamtopics)\[([a-z,]+)\]", target)
            if match:
                assert set(match.group(1).split(",")) <= extras, str(command)


def test_other_programs_are_known():
    known = {"streamtopics", "python", "python3", "bash", "pip", "dask", *PLAIN_PROGRAMS}
    for command in COMMANDS:
        assert program(command) in known, f"{command}: unknown program {command.argv[0]}"
    for command in by_program("dask"):
        assert command.argv[1] in ("scheduler", "worker"), str(command)
        assert (Path(sys.executable).parent / "dask").exists() or importlib.util.find_spec("distributed")


# ----------------------------------------------------------------------------- python blocks

PYTHON_BLOCKS = [block for block in BLOCKS if block.language == "python"]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.where for b in PYTHON_BLOCKS])
def test_python_blocks_compile(block):
    compile(block.text, block.where, "exec")


def test_the_configuration_table_is_config_py():
    from streamtopics.config import ModelConfig

    from consumers.consumer_config import ConsumerConfig

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    model_part, _, consumer_part = text.partition("## The Kafka consumer")
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", model_part, flags=re.M))
    assert list(rows) == [f.name for f in dataclasses.fields(ModelConfig)], "configuration.md: the model's settings"
    for f in dataclasses.fields(ModelConfig):
        assert rows[f.name] == repr(f.default), f"configuration.md: {f.name} should say {f.default!r}"
    keys = re.findall(r"^\| `(\w+)` \| `--", consumer_part, flags=re.M)
    assert keys == [f.name for f in dataclasses.fields(ConsumerConfig)], "configuration.md: the consumer's keys"


# --------------------------------------------------------------------------------- end to end


def documented(page: str, line: str) -> str:
    """``line``, after checking that it is a command of a bash block of ``page``."""
    lines = [c.line for c in COMMANDS if c.block.page.name == page]
    assert line in lines, f"{page} no longer shows: {line}"
    return line


@pytest.fixture
def checkout(tmp_path):
    """A working directory whose ``../shared`` is the real one, with the venv's commands first
    on PATH."""
    if not (SHARED / "data").is_dir():
        pytest.fail(f"no corpora at {SHARED / 'data'} (../shared/data beside the checkout)", pytrace=False)
    (tmp_path / "shared").symlink_to(SHARED)
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return work


def run(line: str, cwd: Path, timeout: float = 300) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return result.stdout


@pytest.mark.slow
def test_replay_topics_events_infer_and_resume(checkout):
    replay = documented("replay.md", "streamtopics replay ../shared/data/gensim-lee/lee_background.cor.gz --out "
                                     "runs/lee --n-topics 5 --warmup-documents 100 --snapshot-every 100")
    assert replay in [c.line for c in COMMANDS if c.block.page.name == "README.md"]
    assert "replayed 300 documents" in run(replay, checkout)
    snapshots = sorted((checkout / "runs/lee").glob("snapshot-*.json"))
    assert len(snapshots) == 3

    assert "snapshot 3" in run(documented("replay.md", "streamtopics topics runs/lee"), checkout)
    run(documented("replay.md", "streamtopics events runs/lee --json"), checkout)
    mixtures = run(documented("replay.md", "echo 'the government announced new taxes on petrol' | "
                                           "streamtopics infer --model runs/lee"), checkout)
    assert json.loads(mixtures)["topics"]
    lines = run(documented("replay.md", "streamtopics infer --model runs/lee ../shared/data/gensim-lee/lee.cor.gz "
                                        "--top 2"), checkout).splitlines()
    assert len(lines) >= 40 and all(len(json.loads(line)["topics"]) <= 2 for line in lines)

    stopped = run(documented("replay.md", "streamtopics replay ../shared/data/gensim-lee/lee_background.cor.gz "
                                          "--out runs/lee-resumed --n-topics 5 --warmup-documents 100 --snapshot-every 100 "
                                          "--stop-after 150"), checkout)
    assert "stopped after 150 documents" in stopped
    run(documented("replay.md", "streamtopics replay --resume --out runs/lee-resumed"), checkout)
    resumed = sorted((checkout / "runs/lee-resumed").glob("snapshot-*.json"))
    assert [p.name for p in resumed] == [p.name for p in snapshots]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(snapshots, resumed))

    assert "refresh" in run(documented("replay.md", "streamtopics bench --documents 2000"), checkout)


@pytest.mark.slow
def test_the_dask_replay_on_one_machine(checkout):
    pytest.importorskip("distributed")
    line = documented("scale-out.md", "streamtopics replay ../shared/data/bbc-news/bbc-news.jsonl.gz --out "
                                      "runs/bbc-dask --snapshot-every 1000 --dask local:2")
    assert "replayed 2,225 documents" in run(line, checkout)
    assert len(list((checkout / "runs/bbc-dask").glob("snapshot-*.json"))) == 3


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.where for b in PYTHON_BLOCKS])
def test_python_blocks_run(block, tmp_path):
    if "pandas" in block.text:
        pytest.importorskip("pandas")
    result = subprocess.run([sys.executable, "-c", block.text], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, f"{block.where}\n{result.stderr[-3000:]}"
