"""The OpenAPI 3.0 description of the monitoring service (hand-written: the API is small)."""

from __future__ import annotations

from .topic_source import DEFAULT_EVENTS, DEFAULT_HISTORY, DEFAULT_TOP_N, EVENT_TYPES, MAX_LIMIT, MAX_TOP_N



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
    label = {"type": "string", "nullable": True, "description": "short label (absent in older runs: null)"}
    coherence = {"type": "number", "nullable": True, "description": "NPMI coherence (absent in older runs: null)"}
    document = {"type": "object", "properties": {
        "text": {"type": "string", "nullable": True, "description": "its beginning; null when the model saw no text"},
        "words": {"type": "array", "items": {"type": "string"}}, "key": {"type": "string", "nullable": True},
        "score": {"type": "number", "nullable": True, "description": "its weight on the topic"}}}
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
                "summary": "One topic: top words with probabilities, anchor, label, coherence, representative "
                           "documents, prevalence history, events",
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
                "summary": "Topic births, topics found, deaths, topics lost, returns and changes (oldest first)",
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
                "forming": {"type": "boolean", "description": "the first topics still form (the burn-in): no events yet"},
                "missing": {"type": "array", "items": {"type": "integer"},
                            "description": "announced topics absent here, within their death grace"},
                "topics": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "anchor": {"type": "string"}, "prevalence": {"type": "number"},
                    "alpha": {"type": "number"}, "label": label, "coherence": coherence,
                    "anchor_shown": {"type": "string", "nullable": True,
                                     "description": "the anchor when among the topic's 20 most relevant words, else null"},
                    "tentative": {"type": "boolean",
                                  "description": "within its birth grace: announced as born if it lasts"},
                    "stopped": {"type": "boolean",
                                "description": "its subject stopped: announced dead while the model still holds it"},
                    "top_words": {"type": "array", "description": "[word, probability] pairs",
                                  "items": {"type": "array", "items": {}}}}}}}},
            "Topic": {"type": "object", "properties": {
                "id": {"type": "integer"}, "version": {"type": "integer"}, "anchor": {"type": "string"},
                "prevalence": {"type": "number"}, "alpha": {"type": "number"}, "rank": {"type": "integer"},
                "label": label, "coherence": coherence,
                "anchor_shown": {"type": "string", "nullable": True,
                                 "description": "the anchor when among the topic's 20 most relevant words, else null"},
                "tentative": {"type": "boolean", "description": "within its birth grace: announced as born if it lasts"},
                "stopped": {"type": "boolean",
                            "description": "its subject stopped: announced dead while the model still holds it"},
                "representatives": {"type": "array", "items": document,
                                    "description": "a few documents typical of the topic (empty in older runs)"},
                "top_words": {"type": "array", "items": word},
                "history": {"type": "array", "items": {"type": "object"}},
                "events": {"type": "array", "items": {"type": "object"}}}},
        }},
    }
    if with_token:
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema["security"] = [{"bearer": []}]
    return schema
