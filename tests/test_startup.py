"""The command line starts fast: its help and version load none of the heavy modules (numba,
scipy, Kafka, the model, the service); a command loads them when it runs (issue 48 item 8)."""

import json
import subprocess
import sys

HEAVY = ("numba", "scipy", "kafka", "tqdm", "prometheus_client", "starlette", "uvicorn", "threadpoolctl",
         "streamtopics.model", "consumers.replay", "consumers.kafka_consumer")

# Every command's --help (subcommands of groups included), then --version, in one interpreter.
SCRIPT = """
import json, sys
import click
from consumers.cli import main

def every_help(command, path):
    yield [*path, "--help"]
    for name, sub in getattr(command, "commands", {}).items():
        yield from every_help(sub, [*path, name])

for args in [*every_help(main, []), ["--version"]]:
    try:
        main(args, prog_name="streamtopics")
    except SystemExit as stop:
        assert stop.code == 0, (args, stop.code)
print(json.dumps(sorted(sys.modules)))
"""


def test_help_and_version_of_every_command_load_no_heavy_module():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout.splitlines()[-1])
    assert [m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY] == []
