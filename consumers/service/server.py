"""Serving the monitoring service: parse and check the address (loopback unless allowed),
bind, and run uvicorn in this thread (:func:`serve`) or in a background one
(:func:`serve_in_thread`).

Bounds on what clients can hold (uvicorn has no header-read timeout, no write timeout and no
bound on pipelined requests; its ``limit_concurrency`` answers 503 to everyone once slow clients
fill it, so it is not used):

* a client must finish sending a request's headers within ``header_timeout`` seconds
  (:data:`HEADER_TIMEOUT_S`) of connecting or of its previous response, else the connection
  is closed -- a trickle of bytes does not extend it; idle keep-alive connections close after
  :data:`KEEP_ALIVE_S`;
* a connection whose replies wait unsent -- its peer does not read them -- for ``write_timeout``
  seconds (:data:`WRITE_TIMEOUT_S`) is closed;
* a connection answers at most :data:`MAX_PIPELINED` requests in a row that were sent before
  their predecessor's reply (pipelined); the last of them closes it, so a peer that sends
  hundreds of requests and reads nothing costs a bounded amount of work;
* at most ``max_connections`` (:data:`MAX_CONNECTIONS`) connections are open: one more closes,
  in this order, the connection whose replies have waited unsent longest, the one answering
  the longest run of pipelined requests, or the one that has waited longest for its request
  headers (half-sent or idle), so stalled readers, pipeliners and slow or idle clients can
  never lock out a real request; if every other connection is busy with a request its client
  waits for, the new one is closed at once;
* a request head (request line and headers) is at most :data:`MAX_HEADER_BYTES` (larger: 400),
  also when it arrives in one piece.
"""

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
#: Seconds a client has to send a request's headers (after connecting or after a response).
HEADER_TIMEOUT_S = 10.0
#: Most connections open at once (see the module docstring for what happens beyond).
MAX_CONNECTIONS = 100
#: Seconds a connection's replies may wait unsent (its peer not reading them) before it is closed.
WRITE_TIMEOUT_S = 10.0
#: Most pipelined requests a connection answers in a row; the reply to the last closes it.
MAX_PIPELINED = 16
#: Seconds an idle keep-alive connection stays open.
KEEP_ALIVE_S = 5
#: Largest request line and headers, in bytes.
MAX_HEADER_BYTES = 16 * 1024


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


def bounded_protocol(header_timeout: float = HEADER_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                     write_timeout: float = WRITE_TIMEOUT_S):
    """uvicorn's h11 protocol with the header and write timeouts, the pipelining bound, the
    connection cap and the head size of the module docstring (a class to pass as
    ``uvicorn.Config(http=...)``)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if not header_timeout > 0 or not write_timeout > 0 or max_connections < 1:
        raise ValueError("header_timeout and write_timeout must be positive and max_connections at least 1")
    write_check = min(1.0, write_timeout / 4)

    class BoundedH11Protocol(H11Protocol):
        _header_timer = None
        _waiting_since = 0.0
        _write_timer = None
        _unsent_since = None  # when replies were first seen waiting unsent (None: all sent)
        _run = 0  # replies sent in a row without the peer waiting for one

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self.conn.next_event = _bounded_head(self.conn.next_event)
            self._arm()
            open_ = [c for c in self.connections if not c.transport.is_closing()]
            if len(open_) > max_connections:
                ranks = {c: c._eviction_rank() for c in open_ if c is not self and isinstance(c, BoundedH11Protocol)}
                evictable = [c for c, rank in ranks.items() if rank is not None]
                victim = min(evictable, key=ranks.__getitem__) if evictable else self
                log.debug("%d connections open: closing %s", len(open_), victim.client)
                victim._close()

        def _waiting(self) -> bool:
            """Waiting for a request's headers (none yet, some, or idle after a response)."""
            return self.conn.their_state is h11.IDLE

        def _eviction_rank(self):
            """Which connection the cap closes first (the smallest rank): replies waiting unsent
            longest, then the longest pipelined run, then waiting longest for headers; None
            for a connection busy with a request its client waits for."""
            if self.transport.get_write_buffer_size():
                return 0, self.loop.time() if self._unsent_since is None else self._unsent_since
            if self._run and not self._waiting():
                return 1, -self._run
            if self._waiting():
                return 2, self._waiting_since
            return None

        def _arm(self) -> None:
            self._disarm()
            self._waiting_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self._waiting():
                self._close()

        def _close(self) -> None:
            """Close now: at once when replies are still unsent (a graceful close would wait for
            a peer that does not read)."""
            self._disarm()
            if self.transport.get_write_buffer_size():
                self.transport.abort()
            elif not self.transport.is_closing():
                self.transport.close()

        def _watch_writes(self) -> None:
            """Start the write timeout when replies wait unsent (the socket's buffer is full)."""
            if self._unsent_since is None and self.transport.get_write_buffer_size():
                self._unsent_since = self.loop.time()
                self._write_timer = self.loop.call_later(write_check, self._check_writes)

        def _check_writes(self) -> None:
            self._write_timer = None
            if not self.transport.get_write_buffer_size():
                self._unsent_since = None
            elif self.loop.time() - self._unsent_since >= write_timeout:
                log.debug("replies to %s unsent for %.0f s: closing", self.client, write_timeout)
                self.transport.abort()
            else:
                self._write_timer = self.loop.call_later(write_check, self._check_writes)

        def handle_events(self) -> None:
            super().handle_events()
            if not self._waiting():
                self._disarm()  # the headers are in: the request is the app's now

        def on_response_complete(self) -> None:
            self._run += 1
            super().on_response_complete()  # starts the next request if it is already here
            self._watch_writes()
            if self.transport.is_closing():
                return
            if self._waiting():
                self._run = 0  # the peer waited for this reply
                self._arm()  # the next request's headers get the same time
            elif self._run >= MAX_PIPELINED:
                self.cycle.keep_alive = False  # the request just started is the last pipelined one

        def pause_writing(self) -> None:
            super().pause_writing()
            self._watch_writes()

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._write_timer is not None:
                self._write_timer.cancel()
            super().connection_lost(exc)

    def _bounded_head(next_event):
        """h11's ``next_event``, refusing a request whose head is over :data:`MAX_HEADER_BYTES`
        (h11 bounds only a head still incomplete: one sent in a single write got through)."""
        def bounded():
            event = next_event()
            if isinstance(event, h11.Request):
                size = len(event.method) + len(event.target) + sum(len(k) + len(v) + 4 for k, v in event.headers)
                if size > MAX_HEADER_BYTES:
                    raise h11.RemoteProtocolError(f"request head of {size} bytes", error_status_hint=431)
            return event

        return bounded

    return BoundedH11Protocol


def _server(app, host: str, port: int, allow_remote: bool, log_level: str, header_timeout: float = HEADER_TIMEOUT_S,
            max_connections: int = MAX_CONNECTIONS, write_timeout: float = WRITE_TIMEOUT_S):
    import uvicorn

    protocol = bounded_protocol(header_timeout, max_connections, write_timeout)
    check_bind(app, host, allow_remote)
    sock = _bind(host, port)
    port = sock.getsockname()[1]
    if is_loopback(host) and app.state.allowed_hosts is None:
        names = {"localhost", "127.0.0.1", "[::1]"}
        app.state.allowed_hosts = names | {f"{n}:{port}" for n in names}
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2, server_header=False, http=protocol,
                            timeout_keep_alive=KEEP_ALIVE_S, h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    return uvicorn.Server(config), sock, port


def _url(host: str, port: int) -> str:
    shown = host.strip("[]")
    if shown in ("0.0.0.0", "::", ""):
        shown = socket.gethostname()
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def serve_in_thread(app, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, allow_remote: bool = False,
                    log_level: str = "warning", timeout: float = 10.0, header_timeout: float = HEADER_TIMEOUT_S,
                    max_connections: int = MAX_CONNECTIONS, write_timeout: float = WRITE_TIMEOUT_S) -> ServiceHandle:
    """Start uvicorn in a daemon thread (port 0: any free port); returns once it accepts
    connections. Stop it with ``handle.stop()``. ``header_timeout``, ``max_connections`` and
    ``write_timeout``: the bounds of the module docstring."""
    server, sock, port = _server(app, host, port, allow_remote, log_level, header_timeout, max_connections,
                                 write_timeout)
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
          log_level: str = "info", header_timeout: float = HEADER_TIMEOUT_S,
          max_connections: int = MAX_CONNECTIONS, write_timeout: float = WRITE_TIMEOUT_S) -> None:
    """Serve in the foreground until SIGINT/SIGTERM (bounds: the module docstring)."""
    server, sock, port = _server(app, host, port, allow_remote, log_level, header_timeout, max_connections,
                                 write_timeout)
    server.run(sockets=[sock])
