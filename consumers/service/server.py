"""Serving the monitoring service: parse and check the address (loopback unless allowed),
bind, and run uvicorn in this thread (:func:`serve`) or in a background one
(:func:`serve_in_thread`)."""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import threading
import time
from dataclasses import dataclass


log = logging.getLogger("consumers.service")

DEFAULT_PORT = 8765
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST``, ``:PORT`` or ``[v6]:PORT`` -> (host, port).

    >>> parse_address("127.0.0.1:8765"), parse_address(":9000"), parse_address("[::1]:80")
    (('127.0.0.1', 8765), ('127.0.0.1', 9000), ('::1', 80))
    """
    text = text.strip()
    match = re.fullmatch(r"\[([0-9a-fA-F:.]+)\](?::(\d+))?|([^:\[\]]*)(?::(\d+))?", text)
    if not match:
        raise ValueError(f"not an address: {text!r} (use HOST:PORT)")
    host = match.group(1) or match.group(3) or "127.0.0.1"
    port = int(match.group(2) or match.group(4) or default_port)
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return host, port


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(app, host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless ``allow_remote``; warn when it has no token."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise PermissionError(f"refusing to bind {host!r}: the service binds loopback addresses only unless "
                              "allow_remote=True (CLI: --allow-remote) is given; set a token too")
    if getattr(app.state, "token", None) is None:
        log.warning("serving on %s without a token: anyone who can reach it can read the topics", host)


@dataclass
class ServiceHandle:
    """A service running in a background thread (:func:`serve_in_thread`)."""

    url: str
    host: str
    port: int
    server: object
    thread: threading.Thread

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _server(app, host: str, port: int, allow_remote: bool, log_level: str):
    import uvicorn

    check_bind(app, host, allow_remote)
    sock = _bind(host, port)
    port = sock.getsockname()[1]
    if is_loopback(host) and app.state.allowed_hosts is None:
        names = {"localhost", "127.0.0.1", "[::1]"}
        app.state.allowed_hosts = names | {f"{n}:{port}" for n in names}
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2, server_header=False)
    return uvicorn.Server(config), sock, port


def _url(host: str, port: int) -> str:
    shown = host.strip("[]")
    if shown in ("0.0.0.0", "::", ""):
        shown = socket.gethostname()
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def serve_in_thread(app, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, allow_remote: bool = False,
                    log_level: str = "warning", timeout: float = 10.0) -> ServiceHandle:
    """Start uvicorn in a daemon thread (port 0: any free port); returns once it accepts
    connections. Stop it with ``handle.stop()``."""
    server, sock, port = _server(app, host, port, allow_remote, log_level)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="streamtopics-service",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the service did not start on {host}:{port}")
        time.sleep(0.01)
    return ServiceHandle(_url(host, port), host, port, server, thread)


def serve(app, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, allow_remote: bool = False,
          log_level: str = "info") -> None:
    """Serve in the foreground until SIGINT/SIGTERM."""
    server, sock, port = _server(app, host, port, allow_remote, log_level)
    server.run(sockets=[sock])
