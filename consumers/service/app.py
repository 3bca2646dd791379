"""The Starlette application of the monitoring service: routes (the JSON API, the dashboard,
``/metrics``) and the guard middleware (read-only methods, Host check, bearer token, security
headers)."""

from __future__ import annotations

import hmac
import json
import re
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamtopics import TopicSnapshot

from ..metrics import CONTENT_TYPE
from .openapi import openapi_schema
from .topic_source import (DEFAULT_EVENTS, DEFAULT_HISTORY, DEFAULT_TOP_N, EVENT_TYPES, MAX_LIMIT, MAX_TOP_N,
                           TopicSource)


STATIC = Path(__file__).parent.with_name("static")


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


def _topic_entry(snapshot: TopicSnapshot, top: dict, k: int, top_n: int, pairs: bool, extras: dict) -> dict:
    topic = snapshot.topic_ids[k]
    words = top[topic][:top_n]
    return {
        "id": topic, "anchor": snapshot.anchors[k], "prevalence": float(snapshot.prevalence[k]),
        "alpha": float(snapshot.alpha[k]), "label": extras["label"], "coherence": extras["coherence"],
        "anchor_shown": snapshot.shown_anchors()[topic], "tentative": topic in snapshot.tentative,
        "stopped": topic in snapshot.stopped,
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
        src = current(request)
        snapshot, top = src.top_words()
        if snapshot is None:
            raise _no_snapshot()
        return JSONResponse({
            "version": snapshot.version, "documents_seen": snapshot.documents_seen,
            "position": snapshot.position, "stream_time": snapshot.stream_time,
            "n_topics": snapshot.n_topics, "vocabulary_size": len(snapshot.vocabulary),
            "events": snapshot.events, "forming": snapshot.forming, "missing": snapshot.missing,
            "topics": [_topic_entry(snapshot, top, k, top_n, True, src.extras(t))
                       for k, t in enumerate(snapshot.topic_ids)],
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
        extras = src.extras(topic)
        entry = _topic_entry(snapshot, top, k, top_n, False, extras)
        entry["representatives"] = extras["representatives"]
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
