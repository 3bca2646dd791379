"""``serve``: the dashboard, JSON API and Prometheus metrics over a run directory."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..extras import require
from .console import BadInput
from .options import parse_duration


@click.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs --allow-remote.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --host (then set STREAMTOPICS_TOKEN: requests without "
                   "'Authorization: Bearer TOKEN' get 401).")
@click.option("--stall-after", type=parse_duration, metavar="DURATION",
              help="Report not ready (/readyz 503) when no snapshot has been written for this long: 90s, 15m.")
def serve(path, host, port, allow_remote, stall_after):
    """Serve the dashboard, JSON API and Prometheus metrics over a run directory.

    PATH is a directory that a replay or consumer writes snapshot-*.json files to; new ones are
    picked up as they appear. Open http://HOST:PORT/ in a browser; the API is described at
    /openapi.json. The bearer token, if any, is read from $STREAMTOPICS_TOKEN.
    """
    require("serve", "streamtopics serve")
    from ..service import SnapshotDirectorySource, check_bind, create_app, serve as run_service

    if not path.is_dir():
        raise BadInput(f"no such directory: {path}")
    token = os.environ.get("STREAMTOPICS_TOKEN") or None
    try:
        app = create_app(SnapshotDirectorySource(path, stall_after=stall_after), token=token,
                         title=f"snapshots in {path}")
        check_bind(app, host, allow_remote)
        click.echo(f"dashboard: http://{host}:{port}/  (snapshots from {path}; Ctrl-C to stop)")
        run_service(app, host, port, allow_remote=allow_remote)
    except (PermissionError, ValueError) as error:
        raise BadInput(str(error)) from None
    except OSError as error:
        raise BadInput(f"cannot serve on {host}:{port}: {error.strerror or error}") from None
