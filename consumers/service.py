"""The monitoring service: a read-only JSON API, a live dashboard and Prometheus metrics.

Run it beside a replay or a consumer (a :class:`LiveSource` fed in-process) or standalone over a
snapshot directory (a :class:`SnapshotDirectorySource` that re-reads it as snapshots appear)::

    source = LiveSource()
    handle = serve_in_thread(create_app(source), "127.0.0.1", 8765)
    ...                                   # on the thread that feeds the model:
    source.publish(snapshot)              # after every refresh
    source.update_metrics(model=model)    # every few hundred documents (also a heartbeat)
    ...
    source.finish(); handle.stop()

    # standalone
    serve(create_app(SnapshotDirectorySource("runs/demo")), "127.0.0.1", 8765)

Endpoints (all GET; ``/openapi.json`` describes them):

=====================  ============================================================================
``/``                  the dashboard (HTML; polls the API every second)
``/healthz``           liveness: 200 while the process serves
``/readyz``            readiness: 200 when a snapshot exists and the stream is not stalled, else 503
``/api/status``        source state, throughput, lag, refreshes, memory (what the dashboard shows)
``/api/snapshot``      the latest snapshot with each topic's ``top_n`` words (``?top_n=`` <= 100)
``/api/topics/{id}``   one topic: top words with probabilities, anchor, prevalence history, events
``/api/history``       prevalence of every topic at each snapshot (``?limit=`` <= 1000)
``/api/events``        births, deaths and changes (``?limit=``, ``?type=``, ``?since_version=``)
``/metrics``           Prometheus text format (:mod:`consumers.metrics`)
``/openapi.json``      OpenAPI 3.0 description
=====================  ============================================================================

Safety: only read endpoints; every response is bounded (``top_n``, ``limit`` and the kept history
are capped; out-of-range parameters get 400, unknown topics 404, other methods 405); no part of
a request is ever used to build a file path (the directory is fixed when the source is made, the
static files are read once at start-up); :func:`serve` and :func:`serve_in_thread` bind
127.0.0.1 unless ``allow_remote=True`` is given for another address. With a ``token`` every
endpoint except ``/healthz`` and the dashboard's static shell requires ``Authorization: Bearer
<token>`` (401 otherwise); the dashboard takes the token from the page address's fragment
(``http://host:port/#token=...``, never sent to the server) and sends it as that header.
"""

from __future__ import annotations

import bisect
import hmac
import ipaddress
import json
import logging
import math
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamtopics import TopicSnapshot

from .metrics import CONTENT_TYPE, ServiceMetrics
from .snapshot_directory import SnapshotDirectory

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
MAX_TOP_N = 100           # words per topic in any response
DEFAULT_TOP_N = 10
MAX_LIMIT = 1000          # history entries / events in any response
DEFAULT_HISTORY = 200
DEFAULT_EVENTS = 100
HISTORY_KEPT = 1000       # snapshots remembered (prevalence only; the full matrix of the latest)
EVENTS_KEPT = 5000
EVENT_TYPES = ("birth", "death", "change")
STATIC = Path(__file__).with_name("static")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


# ----------------------------------------------------------------------------- sources
def _summary(version: int, documents_seen: int, stream_time, topic_ids, prevalence) -> dict:
    return {"version": int(version), "documents_seen": int(documents_seen), "stream_time": stream_time,
            "prevalence": {str(t): round(float(p), 6) for t, p in zip(topic_ids, prevalence)}}


class TopicSource:
    """What the service reads: the latest snapshot, a bounded prevalence history, the events,
    a :class:`~consumers.metrics.ServiceMetrics` and whether the stream is alive.

    Subclasses feed :meth:`_add`; :meth:`poll` is called before every request (a no-op for
    sources that are pushed to)."""

    kind = "source"

    def __init__(self, *, stall_after: float | None = None, history_kept: int = HISTORY_KEPT,
                 events_kept: int = EVENTS_KEPT, metrics: ServiceMetrics | None = None):
        self.stall_after = stall_after
        self.metrics = metrics or ServiceMetrics()
        self._lock = threading.RLock()
        self._snapshot: TopicSnapshot | None = None
        self._history: list[dict] = []           # sorted by version
        self._history_kept = int(history_kept)
        self._events: deque = deque(maxlen=int(events_kept))
        self._top: tuple[int, dict] | None = None  # (version, top MAX_TOP_N words by topic id)
        self.finished = False

    # -- writers
    def _add(self, summary: dict, events: list[dict], snapshot: TopicSnapshot | None) -> None:
        with self._lock:
            versions = [h["version"] for h in self._history]
            at = bisect.bisect_left(versions, summary["version"])
            if at < len(versions) and versions[at] == summary["version"]:
                self._history[at] = summary
            else:
                self._history.insert(at, summary)
            del self._history[: max(0, len(self._history) - self._history_kept)]
            stamp = {"version": summary["version"], "documents_seen": summary["documents_seen"],
                     "stream_time": summary["stream_time"]}
            self._events.extend({**stamp, **event} for event in events)
            if snapshot is not None and (self._snapshot is None or snapshot.version >= self._snapshot.version):
                self._snapshot = snapshot
                self._top = None

    def _reset(self) -> None:
        with self._lock:
            self._snapshot, self._history, self._top = None, [], None
            self._events.clear()

    # -- readers
    def poll(self) -> None:
        """Bring the source up to date (sources that are pushed to have nothing to do)."""

    def snapshot(self) -> TopicSnapshot | None:
        with self._lock:
            return self._snapshot

    def top_words(self) -> tuple[TopicSnapshot | None, dict]:
        """The latest snapshot and its topics' :data:`MAX_TOP_N` top words (computed once per
        snapshot, on the reading thread, so publishing costs the stream nothing)."""
        with self._lock:
            snapshot, top = self._snapshot, self._top
        if snapshot is None:
            return None, {}
        if top is None or top[0] != snapshot.version:
            top = (snapshot.version, snapshot.top_words(min(MAX_TOP_N, len(snapshot.vocabulary))))
            with self._lock:
                if self._snapshot is snapshot:
                    self._top = top
        return snapshot, top[1]

    def history(self, limit: int) -> list[dict]:
        with self._lock:
            return list(self._history[-limit:])

    def events(self, limit: int, types=None, since_version: int | None = None, topic: int | None = None) -> list[dict]:
        with self._lock:
            chosen = [e for e in self._events
                      if (not types or e["type"] in types)
                      and (since_version is None or e["version"] > since_version)
                      and (topic is None or e.get("topic") == topic)]
        return chosen[-limit:]

    def stalled(self) -> bool:
        return False

    def state(self) -> dict:
        """Readiness and why not."""
        snapshot = self.snapshot()
        stalled = self.stalled()
        self.metrics.set_stalled(stalled)
        reasons = []
        if snapshot is None:
            reasons.append("no snapshot yet")
        if stalled:
            reasons.append(f"stalled: no progress for more than {self.stall_after:g} s")
        return {"source": self.kind, "ready": not reasons, "reasons": reasons, "stalled": stalled,
                "finished": self.finished, "version": None if snapshot is None else snapshot.version}


class LiveSource(TopicSource):
    """A source fed in-process by whatever runs the model (a replay, a Kafka consumer).

    Call :meth:`publish` after each refresh and :meth:`update_metrics` (or :meth:`heartbeat`)
    regularly from the feeding thread; with no sign of life for ``stall_after`` seconds the
    source counts as stalled (readiness fails) until the next one. :meth:`finish` says the
    stream ended normally: it is then never stalled. Everything here is cheap (no JSON, no
    sorting), so the stream hardly pays for being watched.
    """

    kind = "live"

    def __init__(self, *, stall_after: float | None = 60.0, **options):
        super().__init__(stall_after=stall_after, **options)
        self._beat = time.monotonic()

    def publish(self, snapshot: TopicSnapshot, model=None) -> None:
        """A new snapshot (its ``events`` are the changes since the previous one); with the
        ``model`` that made it, the metrics are refreshed too (refresh duration included)."""
        self._add(_summary(snapshot.version, snapshot.documents_seen, snapshot.stream_time,
                           snapshot.topic_ids, snapshot.prevalence), list(snapshot.events), snapshot)
        self.metrics.update(snapshot_version=snapshot.version, n_topics=snapshot.n_topics,
                            vocabulary_size=len(snapshot.vocabulary))
        if model is not None:
            self.metrics.update_from_model(model)
        self.heartbeat()

    # hooks for consumers.replay.Replay: on_snapshot=live.on_snapshot, run(on_progress=live.on_progress)
    def on_snapshot(self, snapshot: TopicSnapshot, path=None, model=None) -> None:
        self.publish(snapshot, model)

    def on_progress(self, replay) -> None:
        self.update_metrics(model=replay.model)

    def update_metrics(self, model=None, *, consumer: dict | None = None, lag: dict | None = None,
                       **values) -> None:
        """Refresh the metrics from a :class:`~streamtopics.StreamingTopicModel` and/or a
        summary dict of :meth:`ServiceMetrics.as_dict` (another process's),
        ``lag`` per partition, or explicit ``values`` (:meth:`ServiceMetrics.update`). Also a
        heartbeat."""
        if model is not None:
            self.metrics.update_from_model(model, lag=lag)
        if consumer is not None:
            self.metrics.update_from_consumer(consumer)
        if values or (lag is not None and model is None):
            self.metrics.update(lag=lag, **values)
        self.heartbeat()

    def heartbeat(self) -> None:
        self._beat = time.monotonic()

    def finish(self) -> None:
        """The stream has ended (the service may keep serving the last snapshot)."""
        self.finished = True

    def stalled(self) -> bool:
        return (self.stall_after is not None and not self.finished
                and time.monotonic() - self._beat > self.stall_after)


class SnapshotDirectorySource(TopicSource):
    """The snapshots a replay or consumer writes to ``path`` (a :class:`SnapshotDirectory`),
    re-read when new files appear (checked at most every ``min_poll_interval`` seconds, when a
    request comes). With ``stall_after`` the source counts as stalled when no snapshot file has
    been written for that many seconds (leave it None for a finished run). Only the latest
    snapshot is kept whole; of older ones (at most ``history_kept``, the newest) the prevalence
    and events."""

    kind = "directory"

    def __init__(self, path, *, stall_after: float | None = None, min_poll_interval: float = 0.5, **options):
        super().__init__(stall_after=stall_after, **options)
        self.path = Path(path)
        self.snapshots = SnapshotDirectory(self.path)
        self.min_poll_interval = float(min_poll_interval)
        self._seen: dict[str, float] = {}   # file name -> mtime when read
        self._polled = -math.inf
        self._newest_mtime: float | None = None
        self._poll_lock = threading.Lock()
        self.unreadable: dict[str, str] = {}

    def _files(self) -> list[tuple[int, str, float]]:
        files = []
        for path in self.snapshots.files():
            try:
                files.append((SnapshotDirectory.version_of(path), path.name, path.stat().st_mtime))
            except OSError:
                continue
        return files

    def poll(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._polled < self.min_poll_interval:
            return
        with self._poll_lock:
            if not force and now - self._polled < self.min_poll_interval:
                return
            self._polled = now
            files = self._files()
            present = {name: mtime for _, name, mtime in files}
            if any(name not in present or present[name] != mtime for name, mtime in self._seen.items()):
                self._reset()  # a run started over in this directory (or rewrote a snapshot)
                self._seen = {}
                self.metrics.refreshes = 0
            new = [f for f in files if f[1] not in self._seen and f[1] not in self.unreadable][-self._history_kept:]
            if files:
                self._newest_mtime = files[-1][2]
            for i, (_, name, mtime) in enumerate(new):
                try:
                    data = json.loads((self.path / name).read_bytes())
                    latest = i == len(new) - 1
                    snapshot = TopicSnapshot.from_dict(data) if latest else None
                    summary = _summary(data["version"], data["documents_seen"], data.get("stream_time"),
                                       [t["id"] for t in data["topics"]], [t["prevalence"] for t in data["topics"]])
                    events = list(data.get("events") or [])
                except (OSError, ValueError, KeyError, TypeError) as error:
                    self.unreadable[name] = f"{type(error).__name__}: {error}"
                    log.warning("skipping %s: %s", self.path / name, self.unreadable[name])
                    continue
                self._seen[name] = mtime
                self._add(summary, events, snapshot)
                self.metrics.observe_snapshot(summary["version"], summary["documents_seen"],
                                              len(data["topics"]), len(data.get("vocabulary") or ()))

    def stalled(self) -> bool:
        if self.stall_after is None or self.finished:
            return False
        if self._newest_mtime is None:
            return False  # nothing written yet: "no snapshot yet" says it
        return time.time() - self._newest_mtime > self.stall_after


# ----------------------------------------------------------------------------- the app
def _int_param(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise HTTPException(400, f"{name} must be between {low} and {high}, got {value}")
    return value


def _no_snapshot() -> HTTPException:
    return HTTPException(503, "no snapshot yet")


def _topic_entry(snapshot: TopicSnapshot, top: dict, k: int, top_n: int, pairs: bool) -> dict:
    topic = snapshot.topic_ids[k]
    words = top[topic][:top_n]
    return {
        "id": topic, "anchor": snapshot.anchors[k], "prevalence": float(snapshot.prevalence[k]),
        "alpha": float(snapshot.alpha[k]),
        "top_words": ([[w, round(p, 6)] for w, p in words] if pairs
                      else [{"word": w, "probability": round(p, 6)} for w, p in words]),
    }


def create_app(source: TopicSource, token: str | None = None, *, title: str = "streamtopics",
               allowed_hosts=None) -> Starlette:
    """The Starlette application over ``source``. ``token``: require ``Authorization: Bearer
    <token>`` on the API. ``allowed_hosts``: answer only requests whose Host header names one of
    these (a guard against DNS rebinding; :func:`serve` sets it for loopback binds)."""
    if token is not None and (not isinstance(token, str) or len(token) < 8):
        raise ValueError("a token must be a string of at least 8 characters")
    assets = {name: (STATIC / name).read_bytes() for name in ("dashboard.html", "dashboard.js", "dashboard.css")}

    def current(request: Request):
        source.poll()
        return source

    def dashboard(request: Request):
        return Response(assets["dashboard.html"], media_type="text/html; charset=utf-8")

    def script(request: Request):
        return Response(assets["dashboard.js"], media_type="text/javascript; charset=utf-8")

    def style(request: Request):
        return Response(assets["dashboard.css"], media_type="text/css; charset=utf-8")

    def healthz(request: Request):
        return JSONResponse({"status": "ok"})

    def readyz(request: Request):
        state = current(request).state()
        return JSONResponse(state, status_code=200 if state["ready"] else 503)

    def status(request: Request):
        src = current(request)
        state = src.state()
        snapshot = src.snapshot()
        state.update({
            "title": title,
            "documents_seen": None if snapshot is None else snapshot.documents_seen,
            "stream_time": None if snapshot is None else snapshot.stream_time,
            "position": None if snapshot is None else snapshot.position,
            "metrics": src.metrics.as_dict(),
        })
        return JSONResponse(state)

    def snapshot_view(request: Request):
        top_n = _int_param(request, "top_n", DEFAULT_TOP_N, 1, MAX_TOP_N)
        snapshot, top = current(request).top_words()
        if snapshot is None:
            raise _no_snapshot()
        return JSONResponse({
            "version": snapshot.version, "documents_seen": snapshot.documents_seen,
            "position": snapshot.position, "stream_time": snapshot.stream_time,
            "n_topics": snapshot.n_topics, "vocabulary_size": len(snapshot.vocabulary),
            "events": snapshot.events,
            "topics": [_topic_entry(snapshot, top, k, top_n, True) for k in range(snapshot.n_topics)],
        })

    def topic_view(request: Request):
        raw = request.path_params["topic_id"]
        if not re.fullmatch(r"\d{1,9}", raw):
            raise HTTPException(400, f"a topic id is a non-negative integer, got {raw[:40]!r}")
        topic = int(raw)
        top_n = _int_param(request, "top_n", 20, 1, MAX_TOP_N)
        limit = _int_param(request, "history", DEFAULT_HISTORY, 1, MAX_LIMIT)
        src = current(request)
        snapshot, top = src.top_words()
        if snapshot is None:
            raise _no_snapshot()
        if topic not in snapshot.topic_ids:
            raise HTTPException(404, f"no topic {topic} in snapshot {snapshot.version}")
        k = snapshot.topic_ids.index(topic)
        entry = _topic_entry(snapshot, top, k, top_n, False)
        key = str(topic)
        entry["version"] = snapshot.version
        entry["rank"] = int(sum(p > snapshot.prevalence[k] for p in snapshot.prevalence)) + 1
        entry["history"] = [{"version": h["version"], "documents_seen": h["documents_seen"],
                             "stream_time": h["stream_time"], "prevalence": h["prevalence"][key]}
                            for h in src.history(MAX_LIMIT) if key in h["prevalence"]][-limit:]
        entry["events"] = src.events(DEFAULT_EVENTS, topic=topic)
        return JSONResponse(entry)

    def topics_view(request: Request):
        snapshot = current(request).snapshot()
        if snapshot is None:
            raise _no_snapshot()
        return JSONResponse({"version": snapshot.version, "topics": [
            {"id": t, "anchor": a, "prevalence": float(p)}
            for t, a, p in zip(snapshot.topic_ids, snapshot.anchors, snapshot.prevalence)]})

    def history_view(request: Request):
        limit = _int_param(request, "limit", DEFAULT_HISTORY, 1, MAX_LIMIT)
        return JSONResponse({"versions": current(request).history(limit)})

    def events_view(request: Request):
        limit = _int_param(request, "limit", DEFAULT_EVENTS, 1, MAX_LIMIT)
        since = _int_param(request, "since_version", None, 0, 2**62)
        types = request.query_params.getlist("type")
        bad = [t for t in types if t not in EVENT_TYPES]
        if bad:
            raise HTTPException(400, f"type must be one of {', '.join(EVENT_TYPES)}, got {bad[0][:40]!r}")
        return JSONResponse({"events": current(request).events(limit, types, since)})

    def metrics_view(request: Request):
        src = current(request)
        src.state()  # updates the stalled gauge
        return Response(src.metrics.render(), media_type=CONTENT_TYPE)

    def openapi(request: Request):
        return JSONResponse(openapi_schema(token is not None))

    routes = [
        Route("/", dashboard), Route("/static/dashboard.js", script), Route("/static/dashboard.css", style),
        Route("/healthz", healthz), Route("/readyz", readyz), Route("/api/status", status),
        Route("/api/snapshot", snapshot_view), Route("/api/topics", topics_view),
        Route("/api/topics/{topic_id}", topic_view), Route("/api/history", history_view),
        Route("/api/events", events_view), Route("/metrics", metrics_view), Route("/openapi.json", openapi),
    ]

    async def http_error(request: Request, error: HTTPException):
        headers = dict(error.headers or {})
        return JSONResponse({"error": error.detail, "status": error.status_code}, error.status_code, headers=headers)

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.source = source
    app.state.token = token
    app.state.allowed_hosts = None if allowed_hosts is None else set(allowed_hosts)
    app.add_middleware(_Guard, app_state=app.state)
    return app


PUBLIC_PATHS = {"/", "/static/dashboard.js", "/static/dashboard.css", "/healthz"}
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
     b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
]


class _Guard:
    """ASGI middleware: read-only methods, Host check, bearer token, security headers."""

    def __init__(self, app, app_state):
        self.app, self.state = app, app_state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        allowed = self.state.allowed_hosts
        if allowed is not None:
            host = headers.get(b"host", b"").decode("latin-1").lower()
            if host not in allowed:
                return await _reply(send, 421, {"error": "unexpected Host header", "status": 421})
        if scope["method"] not in ("GET", "HEAD"):
            return await _reply(send, 405, {"error": "read-only service: GET only", "status": 405},
                                [(b"allow", b"GET, HEAD")])
        token = self.state.token
        if token is not None and scope["path"] not in PUBLIC_PATHS:
            given = headers.get(b"authorization", b"")
            expected = b"Bearer " + token.encode("utf-8")
            if not hmac.compare_digest(given, expected):
                return await _reply(send, 401, {"error": "missing or wrong bearer token", "status": 401},
                                    [(b"www-authenticate", b'Bearer realm="streamtopics"')])

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": list(message.get("headers", [])) + SECURITY_HEADERS}
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _reply(send, status: int, body: dict, extra=()) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *extra, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": payload})


def openapi_schema(with_token: bool = False) -> dict:
    """The OpenAPI 3.0 description of the service (hand-written: the API is small)."""
    def param(name, description, schema, location="query", required=False):
        return {"name": name, "in": location, "required": required, "description": description, "schema": schema}

    def json_response(description, schema_ref=None):
        content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}
                                        if schema_ref else {"type": "object"}}}
        return {"description": description, "content": content}

    errors = {"400": json_response("bad parameter", "Error"), "401": json_response("token required", "Error"),
              "503": json_response("no snapshot yet", "Error")}
    top_n = param("top_n", f"words per topic (1..{MAX_TOP_N})",
                  {"type": "integer", "minimum": 1, "maximum": MAX_TOP_N, "default": DEFAULT_TOP_N})
    limit = param("limit", f"entries (1..{MAX_LIMIT}), the newest",
                  {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT})
    word = {"type": "object", "properties": {"word": {"type": "string"}, "probability": {"type": "number"}}}
    schema = {
        "openapi": "3.0.3",
        "info": {"title": "streamtopics monitoring API", "version": "1",
                 "description": "Read-only view of a streaming topic model: the latest topics, their history, "
                                "events, health and metrics."},
        "paths": {
            "/healthz": {"get": {"summary": "Liveness", "security": [],
                                 "responses": {"200": json_response("the process serves")}}},
            "/readyz": {"get": {"summary": "Readiness: a snapshot exists and the stream is not stalled",
                                "responses": {"200": json_response("ready", "State"),
                                              "503": json_response("not ready", "State")}}},
            "/api/status": {"get": {"summary": "Source state, throughput, lag, refreshes, memory",
                                    "responses": {"200": json_response("status")}}},
            "/api/snapshot": {"get": {"summary": "The latest snapshot with each topic's top words",
                                      "parameters": [top_n],
                                      "responses": {"200": json_response("snapshot", "Snapshot"), **errors}}},
            "/api/topics": {"get": {"summary": "Topic ids, anchors and prevalences of the latest snapshot",
                                    "responses": {"200": json_response("topics"), "503": errors["503"]}}},
            "/api/topics/{topic_id}": {"get": {
                "summary": "One topic: top words with probabilities, anchor, prevalence history, events",
                "parameters": [param("topic_id", "topic id", {"type": "integer", "minimum": 0}, "path", True),
                               {**top_n, "schema": {**top_n["schema"], "default": 20}},
                               param("history", f"history entries (1..{MAX_LIMIT})",
                                     {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                                      "default": DEFAULT_HISTORY})],
                "responses": {"200": json_response("topic", "Topic"), "404": json_response("no such topic", "Error"),
                              **errors}}},
            "/api/history": {"get": {"summary": "Prevalence of every topic at each snapshot (oldest first)",
                                     "parameters": [{**limit, "schema": {**limit["schema"], "default": DEFAULT_HISTORY}}],
                                     "responses": {"200": json_response("history"), "400": errors["400"]}}},
            "/api/events": {"get": {
                "summary": "Topic births, deaths and changes (oldest first)",
                "parameters": [{**limit, "schema": {**limit["schema"], "default": DEFAULT_EVENTS}},
                               param("type", "only these event types (repeatable)",
                                     {"type": "string", "enum": list(EVENT_TYPES)}),
                               param("since_version", "only events of later snapshots", {"type": "integer"})],
                "responses": {"200": json_response("events"), "400": errors["400"]}}},
            "/metrics": {"get": {"summary": "Prometheus metrics (text format 0.0.4)",
                                 "responses": {"200": {"description": "metrics",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "This description", "responses": {"200": json_response("OpenAPI")}}},
            "/": {"get": {"summary": "The dashboard (HTML)", "security": [],
                          "responses": {"200": {"description": "HTML page",
                                                "content": {"text/html": {"schema": {"type": "string"}}}}}}},
        },
        "components": {"schemas": {
            "Error": {"type": "object", "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}},
            "State": {"type": "object", "properties": {
                "source": {"type": "string"}, "ready": {"type": "boolean"},
                "reasons": {"type": "array", "items": {"type": "string"}}, "stalled": {"type": "boolean"},
                "finished": {"type": "boolean"}, "version": {"type": "integer", "nullable": True}}},
            "Snapshot": {"type": "object", "properties": {
                "version": {"type": "integer"}, "documents_seen": {"type": "integer"},
                "stream_time": {"type": "number", "nullable": True}, "n_topics": {"type": "integer"},
                "vocabulary_size": {"type": "integer"}, "events": {"type": "array", "items": {"type": "object"}},
                "topics": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "anchor": {"type": "string"}, "prevalence": {"type": "number"},
                    "alpha": {"type": "number"},
                    "top_words": {"type": "array", "description": "[word, probability] pairs",
                                  "items": {"type": "array", "items": {}}}}}}}},
            "Topic": {"type": "object", "properties": {
                "id": {"type": "integer"}, "version": {"type": "integer"}, "anchor": {"type": "string"},
                "prevalence": {"type": "number"}, "alpha": {"type": "number"}, "rank": {"type": "integer"},
                "top_words": {"type": "array", "items": word},
                "history": {"type": "array", "items": {"type": "object"}},
                "events": {"type": "array", "items": {"type": "object"}}}},
        }},
    }
    if with_token:
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema["security"] = [{"bearer": []}]
    return schema


# ----------------------------------------------------------------------------- serving
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
