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

    # standalone; over a replay that has ended, its recorded figures (consumers.run_record)
    serve(create_app(SnapshotDirectorySource("runs/demo")), "127.0.0.1", 8765)

Endpoints (all GET; ``/openapi.json`` describes them):

=====================  ============================================================================
``/``                  the dashboard (HTML; polls the API every second)
``/healthz``           liveness: 200 while the process serves
``/readyz``            readiness: 200 when a snapshot exists and the stream is not stalled, else 503
``/api/status``        source state, throughput, lag, refreshes, memory (what the dashboard shows)
``/api/snapshot``      the latest snapshot with each topic's ``top_n`` words (``?top_n=`` <= 100)
``/api/topics/{id}``   one topic: top words with probabilities, anchor, label, coherence, representative
                       documents (the last three where the snapshot has them), prevalence history,
                       events
``/api/history``       prevalence of every topic at each snapshot (``?limit=`` <= 1000)
``/api/events``        births, topics found, deaths, topics lost, returns and changes (``?limit=``, ``?type=``, ``?since_version=``)
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

The package: :mod:`~consumers.service.topic_source` (what is served),
:mod:`~consumers.service.app` (routes and guard), :mod:`~consumers.service.openapi` (the schema),
:mod:`~consumers.service.server` (address checks, binding, uvicorn).
"""

from __future__ import annotations

from .app import PUBLIC_PATHS, SECURITY_HEADERS, create_app
from .openapi import openapi_schema
from .server import DEFAULT_PORT, ServiceHandle, check_bind, is_loopback, parse_address, serve, serve_in_thread
from .topic_source import (DEFAULT_EVENTS, DEFAULT_HISTORY, DEFAULT_TOP_N, EVENT_TYPES, EVENTS_KEPT, HISTORY_KEPT,
                           MAX_LIMIT, MAX_TOP_N, LiveSource, SnapshotDirectorySource, TopicSource)

__all__ = [
    "DEFAULT_EVENTS", "DEFAULT_HISTORY", "DEFAULT_PORT", "DEFAULT_TOP_N", "EVENT_TYPES", "EVENTS_KEPT", "HISTORY_KEPT",
    "MAX_LIMIT", "MAX_TOP_N", "PUBLIC_PATHS", "SECURITY_HEADERS", "LiveSource", "ServiceHandle",
    "SnapshotDirectorySource", "TopicSource", "check_bind", "create_app", "is_loopback", "openapi_schema",
    "parse_address", "serve", "serve_in_thread",
]
