"""The monitoring service: every endpoint, readiness, 4xx answers, the token, Prometheus metrics."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import time
import warnings
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx still works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import consumers
from consumers.metrics import ServiceMetrics
from consumers.run_record import RUN_RECORD, read_run_record
from consumers.service import (
    MAX_LIMIT, MAX_TOP_N, LiveSource, SnapshotDirectorySource, create_app, openapi_schema, parse_address,
    serve_in_thread,
)
from consumers.service.server import MAX_PIPELINED
from consumers.service.topic_source import REPRESENTATIVE_CHARS
from run_helpers import EMPTY_DOCUMENTS, MALFORMED_LINES, add_labels, finished_run
from streamtopics import StreamingTopicModel, TopicSnapshot
from streamtopics.synthetic import sample_documents, separable_topics, topic_proportions

N_WORDS, N_TOPICS = 60, 4
TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def corpus():
    topics = separable_topics(N_WORDS, N_TOPICS, anchors_per_topic=2, seed=1)
    proportions = topic_proportions(3000, N_TOPICS, alpha=0.3, seed=2)
    return sample_documents(topics.topic_word, proportions, 40, seed=3)


def new_model() -> StreamingTopicModel:
    # burn_in=0: the first snapshot announces its topics, so the event routes have events at once
    return StreamingTopicModel(N_TOPICS, vocabulary=[f"w{i}" for i in range(N_WORDS)], anchor_min_df=5, burn_in=0)


def metric_samples(text: str) -> dict:
    """{(sample name, sorted labels): value} from Prometheus text format."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.fixture
def live(corpus):
    """A LiveSource over a model that has absorbed 1,000 documents but not refreshed yet."""
    model = new_model()
    source = LiveSource(stall_after=30)
    model.learn_many(corpus[:1000])
    source.update_metrics(model=model)
    return model, source


def publish(model, source, documents):
    model.learn_many(documents)
    snapshot = model.refresh()
    source.publish(snapshot)
    source.update_metrics(model=model)
    return snapshot


# ----------------------------------------------------------------------------- health, readiness
def test_health_and_readiness_follow_the_live_stream(live, corpus):
    model, source = live
    client = TestClient(create_app(source))
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["reasons"] == ["no snapshot yet"]
    assert client.get("/api/snapshot").status_code == 503
    assert client.get("/api/topics/0").status_code == 503

    publish(model, source, corpus[1000:1500])
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] and ready.json()["version"] == 1

    source.stall_after = 0.05  # no heartbeat for longer than this: stalled, not ready
    time.sleep(0.1)
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["stalled"]
    assert "stalled" in ready.json()["reasons"][0]
    assert client.get("/healthz").status_code == 200  # still alive
    source.heartbeat()
    assert client.get("/readyz").status_code == 200
    source.finish()  # an ended stream is never stalled
    time.sleep(0.1)
    assert client.get("/readyz").json() == {**client.get("/readyz").json(), "ready": True, "finished": True}


def test_directory_source_readiness_changes_as_snapshots_appear(tmp_path, corpus):
    source = SnapshotDirectorySource(tmp_path, min_poll_interval=0)
    client = TestClient(create_app(source))
    assert client.get("/readyz").status_code == 503
    assert client.get("/api/status").json()["version"] is None

    model = new_model()
    model.learn_many(corpus[:1000])
    model.refresh().save(tmp_path / "snapshot-000001.json")
    (tmp_path / "checkpoint.json").write_text("{}")  # other files are ignored
    assert client.get("/readyz").status_code == 200
    assert client.get("/api/snapshot").json()["version"] == 1

    model.learn_many(corpus[1000:2000])
    model.refresh().save(tmp_path / "snapshot-000002.json")
    snap = client.get("/api/snapshot").json()
    assert snap["version"] == 2 and snap["documents_seen"] == 2000
    history = client.get("/api/history").json()["versions"]
    assert [h["version"] for h in history] == [1, 2]
    births = client.get("/api/events", params={"type": "birth"}).json()["events"]
    assert len(births) == N_TOPICS and {e["version"] for e in births} == {1}

    # an unreadable file is skipped and reported, the rest keeps working
    (tmp_path / "snapshot-000003.json").write_text("{not json")
    assert client.get("/api/snapshot").json()["version"] == 2
    assert "snapshot-000003.json" in source.unreadable

    # stalled: no new snapshot file for longer than stall_after
    source.stall_after = 0.01
    time.sleep(0.05)
    assert client.get("/readyz").status_code == 503

    # a run started over in the same directory: the source starts over too
    for f in tmp_path.glob("snapshot-*.json"):
        f.unlink()
    source.stall_after = None
    assert client.get("/readyz").status_code == 503
    assert client.get("/api/history").json()["versions"] == []


def test_directory_source_only_polls_now_and_then(tmp_path, corpus):
    source = SnapshotDirectorySource(tmp_path, min_poll_interval=60)
    client = TestClient(create_app(source))
    assert client.get("/readyz").status_code == 503  # first request polls
    model = new_model()
    model.learn_many(corpus[:500])
    model.refresh().save(tmp_path / "snapshot-000001.json")
    assert client.get("/readyz").status_code == 503  # within the interval: not re-read
    source.poll(force=True)
    assert client.get("/readyz").status_code == 200


# ----------------------------------------------------------------------------- the JSON API
@pytest.fixture
def served(live, corpus):
    model, source = live
    publish(model, source, corpus[1000:1500])
    model.learn_one("")  # a rejection
    publish(model, source, corpus[1500:2500])
    return model, source, TestClient(create_app(source))


def test_snapshot_lists_top_words_and_caps_top_n(served):
    model, source, client = served
    body = client.get("/api/snapshot", params={"top_n": 3}).json()
    assert body["version"] == 2 and body["n_topics"] == N_TOPICS and body["vocabulary_size"] == N_WORDS
    assert body["documents_seen"] == 2500 and body["forming"] is False  # burn_in=0
    expected = model.snapshot.top_words(3)
    for topic in body["topics"]:
        assert [w for w, _ in topic["top_words"]] == [w for w, _ in expected[topic["id"]]]
        assert topic["anchor"] in model.snapshot.anchors
    assert len(client.get("/api/snapshot").json()["topics"][0]["top_words"]) == 10
    assert len(client.get("/api/snapshot", params={"top_n": MAX_TOP_N}).json()["topics"][0]["top_words"]) == N_WORDS
    for bad in ("0", str(MAX_TOP_N + 1), "abc", "-3", "1e3"):
        response = client.get("/api/snapshot", params={"top_n": bad})
        assert response.status_code == 400, bad
        assert "top_n" in response.json()["error"]


def test_topic_detail_has_probabilities_anchor_and_history(served):
    model, source, client = served
    topic = model.snapshot.topic_ids[0]
    body = client.get(f"/api/topics/{topic}", params={"top_n": 5}).json()
    assert body["id"] == topic and body["anchor"] == model.snapshot.anchors[0]
    words = body["top_words"]
    assert len(words) == 5 and all(set(w) == {"word", "probability"} for w in words)
    probabilities = [w["probability"] for w in words]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1
    assert [h["version"] for h in body["history"]] == [1, 2]
    assert body["history"][-1]["prevalence"] == pytest.approx(float(model.snapshot.prevalence[0]), abs=1e-6)
    assert body["rank"] >= 1 and any(e["type"] == "birth" for e in body["events"])
    assert len(client.get(f"/api/topics/{topic}", params={"history": 1}).json()["history"]) == 1
    listing = client.get("/api/topics").json()
    assert [t["id"] for t in listing["topics"]] == model.snapshot.topic_ids

    assert client.get("/api/topics/999999").status_code == 404
    for bad in ("abc", "-1", "1.5", "0x1", "9" * 40):
        assert client.get(f"/api/topics/{bad}").status_code == 400, bad
    assert client.get("/api/topics/..%2F..%2Fetc%2Fpasswd").status_code == 404  # no route, no file
    assert client.get(f"/api/topics/{topic}", params={"history": 0}).status_code == 400
    assert client.get(f"/api/topics/{topic}", params={"history": MAX_LIMIT + 1}).status_code == 400


def test_events_and_history_filters_and_bounds(served):
    model, source, client = served
    events = client.get("/api/events").json()["events"]
    assert events and all({"version", "documents_seen", "type", "topic"} <= set(e) for e in events)
    assert all(e["type"] == "birth" for e in client.get("/api/events?type=birth").json()["events"])
    assert client.get("/api/events", params={"since_version": 1}).json()["events"] == [
        e for e in events if e["version"] > 1]
    assert len(client.get("/api/events", params={"limit": 1}).json()["events"]) == 1
    assert client.get("/api/events", params={"type": "explosion"}).status_code == 400
    assert client.get("/api/events", params={"limit": MAX_LIMIT + 1}).status_code == 400
    assert client.get("/api/events", params={"since_version": "x"}).status_code == 400
    history = client.get("/api/history", params={"limit": 1}).json()["versions"]
    assert len(history) == 1 and history[0]["version"] == 2
    assert set(history[0]["prevalence"]) == {str(t) for t in model.snapshot.topic_ids}
    assert client.get("/api/history", params={"limit": 0}).status_code == 400


def test_history_kept_is_bounded(corpus):
    model, source = new_model(), LiveSource(history_kept=3, events_kept=5)
    for a in range(0, 2500, 500):
        publish(model, source, corpus[a:a + 500])
    client = TestClient(create_app(source))
    assert [h["version"] for h in client.get("/api/history?limit=1000").json()["versions"]] == [3, 4, 5]
    assert len(client.get("/api/events?limit=1000").json()["events"]) <= 5


def test_status_dashboard_static_and_openapi(served):
    model, source, client = served
    status = client.get("/api/status").json()
    assert status["ready"] and status["version"] == 2 and status["source"] == "live"
    metrics = status["metrics"]
    assert metrics["documents_absorbed"] == 2500 and metrics["rejected"] == {"empty": 1}
    assert metrics["vocabulary_size"] == N_WORDS and metrics["memory_bytes"] > 0

    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="topics"' in page.text and "/static/dashboard.js" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert client.get("/static/dashboard.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/dashboard.css").status_code == 200
    for bad in ("/static/../service.py", "/static/service.py", "/static/%2e%2e/service.py", "/nope"):
        assert client.get(bad).status_code == 404, bad

    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.") and schema == openapi_schema()
    routed = {route.path for route in client.app.routes} - {"/static/dashboard.js", "/static/dashboard.css"}
    assert routed <= set(schema["paths"])


def test_only_reads_are_allowed(served):
    client = served[2]
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response = client.request(method, "/api/snapshot")
        assert response.status_code == 405 and "GET" in response.headers["allow"]
    assert client.head("/api/snapshot").status_code == 200


# ----------------------------------------------------------------------------- token, binding
def test_a_token_is_required_when_set(served):
    source = served[1]
    client = TestClient(create_app(source, token=TOKEN))
    for path in ("/api/status", "/api/snapshot", "/api/topics", "/api/events", "/readyz", "/metrics",
                 "/openapi.json", "/api/topics/0"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert client.get(path, headers={"Authorization": "Bearer wrong-token-123"}).status_code == 401
        assert client.get(path, headers={"Authorization": TOKEN}).status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/api/snapshot", headers=auth).status_code == 200
    assert client.get("/metrics", headers=auth).status_code == 200
    assert client.get("/openapi.json", headers=auth).json()["security"] == [{"bearer": []}]
    # the liveness probe and the dashboard's static shell (no data in it) stay open
    for path in ("/healthz", "/", "/static/dashboard.js"):
        assert client.get(path).status_code == 200
    with pytest.raises(ValueError):
        create_app(source, token="short")


def test_binding_over_real_http(served):
    source = served[1]
    app = create_app(source)
    with pytest.raises(PermissionError):
        serve_in_thread(app, "0.0.0.0", 0)
    with serve_in_thread(app, "127.0.0.1", 0) as handle:
        assert handle.url.startswith("http://127.0.0.1:")
        assert httpx.get(handle.url + "api/snapshot").json()["version"] == 2
        # DNS rebinding guard: a loopback service answers only to loopback host names
        assert httpx.get(handle.url + "healthz", headers={"Host": "evil.example"}).status_code == 421
    remote = create_app(source, token=TOKEN)
    with serve_in_thread(remote, "0.0.0.0", 0, allow_remote=True) as handle:
        url = f"http://127.0.0.1:{handle.port}/"
        assert httpx.get(url + "api/status").status_code == 401
        assert httpx.get(url + "api/status", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert not handle.thread.is_alive()


def _closed_by_server(sock: socket.socket, wait: float) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) within ``wait`` seconds."""
    readable, _, _ = select.select([sock], [], [], max(0.0, wait))
    if not readable:
        return False
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def test_half_sent_requests_are_bounded_in_number_and_time(served):
    """Issue 15, item 7: connections that never finish their request headers (slowloris) are
    capped in number -- one more closes the one waiting longest -- and closed after the header
    timeout, while a normal request is still answered. Loopback only, 200 connections."""
    source = served[1]
    cap, header_timeout, n = 20, 3.0, 200
    with serve_in_thread(create_app(source), "127.0.0.1", 0, header_timeout=header_timeout,
                         max_connections=cap) as handle:
        half = []
        try:
            for i in range(n):
                sock = socket.create_connection(("127.0.0.1", handle.port), timeout=10)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * i)  # never ends
                half.append(sock)
            last_opened = time.monotonic()
            response = httpx.get(handle.url + "api/snapshot", timeout=10)  # a real request gets through
            assert response.status_code == 200 and response.json()["version"] == 2
            # at most `cap` are open at once: the others were closed as newer ones came
            closed = [sock for sock in half if _closed_by_server(sock, 0.5)]
            assert len(closed) >= n - cap, len(closed)
            # and every one is closed within the header timeout (a little slack for a busy machine)
            deadline = last_opened + header_timeout + 5.0
            still_open = [sock for sock in half if sock not in closed
                          and not _closed_by_server(sock, deadline - time.monotonic())]
            assert not still_open, f"{len(still_open)} half-sent connections outlived the header timeout"
            assert httpx.get(handle.url + "healthz", timeout=10).status_code == 200
        finally:
            for sock in half:
                sock.close()


def test_a_request_head_over_16_kb_is_refused_even_in_one_write(served):
    """Issue 47, item 2: h11 bounds only an incomplete head; one sent whole was served."""
    with serve_in_thread(create_app(served[1]), "127.0.0.1", 0) as handle:
        for padding, status in ((15_000, b"200"), (100_000, b"400")):
            with socket.create_connection(("127.0.0.1", handle.port), timeout=10) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"x" * padding + b"\r\n\r\n")
                assert sock.recv(4096).split(b" ")[1] == status, padding


UNREAD_REQUEST = b"GET /static/dashboard.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # a 23 kB reply


def _non_reader(port: int) -> socket.socket:
    """A connection that never reads its replies (a 4 kB receive buffer: they back up soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


def _stalled(handle) -> list:
    """The service's connections whose replies wait unsent (their peers do not read)."""
    return [c for c in list(handle.server.server_state.connections) if c.transport.get_write_buffer_size()]


def _within(seconds: float, condition) -> bool:
    """Whether ``condition()`` holds within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _send_until_stalled(handle, socks, timeout: float = 30.0) -> None:
    """Send each connection bursts of 8 requests, 50 ms apart (not pipelined: each burst finds its
    predecessor answered), reading nothing, until every one's replies back up in the service."""
    for sock in socks:
        sock.setblocking(False)
    deadline = time.monotonic() + timeout
    while len(_stalled(handle)) < len(socks):
        assert time.monotonic() < deadline, f"{len(_stalled(handle))} of {len(socks)} connections stalled"
        for sock in socks:
            try:
                sock.send(UNREAD_REQUEST * 8)
            except BlockingIOError:
                pass
        time.sleep(0.05)


def test_pipelined_requests_never_read_do_not_lock_out_the_service(served):
    """Issue 47, item 2: connections that each sent hundreds of pipelined requests and read no
    reply filled the connection cap for good (their replies stuck, the connections busy, not
    evictable): no normal request was served. Each now answers at most MAX_PIPELINED in a row."""
    cap = 20
    with serve_in_thread(create_app(served[1]), "127.0.0.1", 0, max_connections=cap) as handle:
        attackers = [_non_reader(handle.port) for _ in range(cap)]
        try:
            for sock in attackers:
                sock.sendall(UNREAD_REQUEST * 400)  # ~9 MB of replies each: more than the socket buffers hold
            time.sleep(1.0)  # all accepted: the cap is full
            answered = []
            for _ in range(10):
                try:
                    answered.append(httpx.get(handle.url + "healthz", timeout=5).status_code)
                except httpx.TransportError as error:
                    answered.append(type(error).__name__)
            assert answered == [200] * 10, answered
            # and the pipelining connections are gone, not left holding the cap
            assert _within(5.0, lambda: not handle.server.server_state.connections)
            assert handle.server.server_state.total_requests <= cap * (MAX_PIPELINED + 1) + len(answered)
        finally:
            for sock in attackers:
                sock.close()


def test_a_peer_that_does_not_read_its_replies_is_evicted_then_timed_out(served):
    """Issue 47, item 2: replies backed up unsent held a connection forever: no write timeout,
    and the cap either passed it over (busy with a request) or closed it gracefully, which waits
    for the peer to read. Now one more connection drops it at once, and the write timeout drops
    the others."""
    cap, write_timeout = 2, 6.0  # a stalled connection must outlive the stalling of the other on a loaded machine
    with serve_in_thread(create_app(served[1]), "127.0.0.1", 0, max_connections=cap,
                         write_timeout=write_timeout) as handle:
        readers = [_non_reader(handle.port) for _ in range(cap)]
        try:
            _send_until_stalled(handle, readers)
            assert httpx.get(handle.url + "healthz", timeout=5).status_code == 200  # evicts one
            assert len(_stalled(handle)) == cap - 1
            assert _within(write_timeout + 2.0, lambda: not handle.server.server_state.connections)
        finally:
            for sock in readers:
                sock.close()


def test_parse_address():
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address("localhost") == ("localhost", 8765)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for bad in ("a:b:c", "host:99999"):
        with pytest.raises(ValueError):
            parse_address(bad)


# ----------------------------------------------------------------------------- metrics
def test_metrics_parse_and_move_with_the_stream(live, corpus):
    model, source = live
    client = TestClient(create_app(source))
    first = metric_samples(client.get("/metrics").text)
    assert first[("streamtopics_documents_absorbed_total", ())] == 1000
    assert first[("streamtopics_refreshes_total", ())] == 0
    assert ("streamtopics_snapshot_version", ()) not in first

    model.learn_one("")
    model.learn_one(b"\xff\xfe not utf-8")
    publish(model, source, corpus[1000:2000])
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    second = metric_samples(response.text)
    assert second[("streamtopics_documents_absorbed_total", ())] == 2000
    assert len(model.rejections) == 2  # two reasons
    for reason, count in model.rejections.items():
        assert second[("streamtopics_documents_rejected_total", (("reason", reason),))] == count == 1
    assert second[("streamtopics_refreshes_total", ())] == 1
    assert second[("streamtopics_refresh_duration_seconds_count", ())] == 1
    assert second[("streamtopics_refresh_duration_seconds_sum", ())] == pytest.approx(model.last_refresh["total_s"])
    assert second[("streamtopics_snapshot_version", ())] == 1
    assert second[("streamtopics_vocabulary_size", ())] == N_WORDS
    assert second[("streamtopics_topics", ())] == N_TOPICS
    assert second[("streamtopics_stalled", ())] == 0
    assert second[("streamtopics_memory_resident_bytes", ())] > 0
    assert second[("streamtopics_ingest_rate_documents_per_second", ())] > 0

    source.update_metrics(lag={"news-0": 7, "news-1": 5})
    publish(model, source, corpus[2000:2500])
    third = metric_samples(client.get("/metrics").text)
    assert third[("streamtopics_documents_absorbed_total", ())] == 2500
    assert third[("streamtopics_refreshes_total", ())] == 2
    assert third[("streamtopics_refresh_duration_seconds_count", ())] == 2
    assert third[("streamtopics_consumer_lag_messages", (("partition", "news-0"),))] == 7
    assert third[("streamtopics_consumer_lag_messages_total", ())] == 12


def test_metrics_from_a_kafka_consumer_and_a_directory(tmp_path, corpus):
    metrics = ServiceMetrics(process_metrics=False)
    metrics.update_from_consumer({"documents_absorbed": 40, "rejected": {"not_utf8": 2}, "refreshes": 3,
                                  "last_refresh_seconds": 0.2, "snapshot_version": 3, "lag": {"t-0": 9},
                                  "malformed": {"malformed_json": 4}})
    samples = metric_samples(metrics.render().decode())
    assert samples[("streamtopics_records_malformed_total", (("reason", "malformed_json"),))] == 4
    assert samples[("streamtopics_documents_rejected_total", (("reason", "not_utf8"),))] == 2
    assert samples[("streamtopics_consumer_lag_messages", (("partition", "t-0"),))] == 9
    assert samples[("streamtopics_refreshes_total", ())] == 3

    source = SnapshotDirectorySource(tmp_path, min_poll_interval=0)
    client = TestClient(create_app(source))
    model = new_model()
    for version, end in enumerate((800, 1600), start=1):
        model.learn_many(corpus[end - 800:end])
        model.refresh().save(tmp_path / f"snapshot-{version:06d}.json")
        samples = metric_samples(client.get("/metrics").text)
        assert samples[("streamtopics_snapshot_version", ())] == version
        assert samples[("streamtopics_refreshes_total", ())] == version
        assert samples[("streamtopics_documents_absorbed_total", ())] == end


def test_two_services_do_not_share_metrics(corpus):
    a, b = LiveSource(), LiveSource()
    a.update_metrics(documents_absorbed=5)
    assert metric_samples(b.metrics.render().decode())[("streamtopics_documents_absorbed_total", ())] == 0
    assert np.isfinite(a.metrics.ingest_rate())


# ----------------------------------------------------------------------------- a finished run, labels
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A replay that has ended (its run.json written), and its summary."""
    out = tmp_path_factory.mktemp("finished") / "run"
    return out, finished_run(out)


def test_serving_a_finished_replay_reports_the_figures_it_recorded(finished):
    out, summary = finished
    assert sum(summary.rejected.values()) == EMPTY_DOCUMENTS and sum(summary.malformed.values()) == MALFORMED_LINES
    source = SnapshotDirectorySource(out, min_poll_interval=0)
    client = TestClient(create_app(source))
    status = client.get("/api/status").json()
    assert status["finished"] and status["ready"]
    metrics = status["metrics"]
    assert metrics["documents_absorbed"] == summary.absorbed
    assert metrics["rejected"] == dict(summary.rejected) and metrics["documents_rejected"] == EMPTY_DOCUMENTS
    assert metrics["malformed"] == dict(summary.malformed) and metrics["documents_malformed"] == MALFORMED_LINES
    assert metrics["ingest_rate"] == 0  # nothing is being ingested now: the run is over
    run = metrics["run"]
    assert run["ingest_rate"] == pytest.approx(summary.ingest_rate) and run["ingest_rate"] > 0
    assert run["documents"] == summary.documents and run["stopped"] is False

    samples = metric_samples(client.get("/metrics").text)
    for reason, count in summary.rejected.items():
        assert samples[("streamtopics_documents_rejected_total", (("reason", reason),))] == count
    for reason, count in summary.malformed.items():
        assert samples[("streamtopics_records_malformed_total", (("reason", reason),))] == count
    assert samples[("streamtopics_documents_absorbed_total", ())] == summary.absorbed
    assert samples[("streamtopics_ingest_rate_documents_per_second", ())] == 0
    assert samples[("streamtopics_run_ingest_rate_documents_per_second", ())] == pytest.approx(summary.ingest_rate)
    assert samples[("streamtopics_run_finished", ())] == 1


def test_a_live_service_beside_a_replay_reports_the_run_once_it_ends(tmp_path):
    live = LiveSource()
    summary = finished_run(tmp_path / "run", n_topics=6, live=live)
    metrics = TestClient(create_app(live)).get("/api/status").json()["metrics"]
    assert metrics["rejected"] == dict(summary.rejected) and metrics["malformed"] == dict(summary.malformed)
    assert metrics["documents_absorbed"] == summary.absorbed and metrics["ingest_rate"] == 0
    assert metrics["run"]["ingest_rate"] == pytest.approx(summary.ingest_rate)


def test_a_replay_has_no_record_while_it_runs_and_leaves_one_when_it_ends(tmp_path):
    out = tmp_path / "run"
    finished_run(out, n_topics=4, n_documents=600)
    assert read_run_record(out)["documents"] == 600 + EMPTY_DOCUMENTS

    class Probe(LiveSource):
        seen: list = []

        def on_progress(self, replay):
            super().on_progress(replay)
            self.seen.append((out / RUN_RECORD).exists())

    probe = Probe()
    finished_run(out, n_topics=4, n_documents=900, live=probe)  # a new run in the same directory
    assert probe.seen and not any(probe.seen)  # the earlier run's record went when this one started
    record = read_run_record(out)
    assert record["documents"] == 900 + EMPTY_DOCUMENTS and record["stopped"] is False
    assert record["rejected"] == {"empty": EMPTY_DOCUMENTS}


def test_a_run_record_that_does_not_describe_the_newest_snapshot_is_ignored(finished, tmp_path):
    out, summary = finished
    copy = tmp_path / "run"
    copy.mkdir()
    for file in [*out.glob("snapshot-*.json"), out / RUN_RECORD]:
        shutil.copy2(file, copy / file.name)
    source = SnapshotDirectorySource(copy, min_poll_interval=0)
    client = TestClient(create_app(source))
    assert client.get("/api/status").json()["finished"]
    newest = sorted(copy.glob("snapshot-*.json"))[-1]
    data = json.loads(newest.read_text())
    data["version"] += 1
    (copy / f"snapshot-{data['version']:06d}.json").write_text(json.dumps(data))  # the run goes on
    status = client.get("/api/status").json()
    assert not status["finished"] and status["metrics"]["run"] is None and status["metrics"]["rejected"] == {}
    assert metric_samples(client.get("/metrics").text)[("streamtopics_run_finished", ())] == 0
    (copy / RUN_RECORD).write_text('{"format": "streamtopics-run", "documents": -1}')  # damaged: ignored
    assert client.get("/api/status").json()["metrics"]["run"] is None


def test_the_ingest_rate_of_a_directory_comes_from_when_the_snapshots_were_written(finished, tmp_path):
    """Reading a backlog of snapshot files in milliseconds is no ingest rate: each file's
    documents count is dated by its write time."""
    out, _ = finished
    copy = tmp_path / "run"
    copy.mkdir()
    files = sorted(out.glob("snapshot-*.json"))[:2]
    seen = [json.loads(f.read_text())["documents_seen"] for f in files]
    now = time.time()
    for file, written in zip(files, (now - 4.0, now - 2.0)):
        shutil.copy(file, copy / file.name)
        os.utime(copy / file.name, (written, written))
    source = SnapshotDirectorySource(copy, min_poll_interval=0)
    rate = TestClient(create_app(source)).get("/api/status").json()["metrics"]["ingest_rate"]
    assert rate == pytest.approx((seen[1] - seen[0]) / 2.0, rel=0.05)
    for file in copy.glob("snapshot-*.json"):
        os.utime(file, (now - 600, now - 600))
    old = SnapshotDirectorySource(copy, min_poll_interval=0)
    assert TestClient(create_app(old)).get("/api/status").json()["metrics"]["ingest_rate"] == 0


def test_labels_coherence_and_representatives_pass_through_when_present(finished, tmp_path):
    out, _ = finished
    newest = sorted(out.glob("snapshot-*.json"))[-1]
    old = tmp_path / "old"  # a snapshot written before the library had them
    old.mkdir()
    data = json.loads(newest.read_text())
    for name in ("labels", "coherence", "representatives"):
        data.pop(name, None)
        for topic in data["topics"]:
            topic.pop(name.rstrip("s"), None)
            topic.pop(name, None)
    (old / newest.name).write_text(json.dumps(data))
    # the label the library gives such a snapshot when it loads it, if any (None before it had labels)
    labels = getattr(TopicSnapshot.load(old / newest.name), "labels", None)
    client = TestClient(create_app(SnapshotDirectorySource(old, min_poll_interval=0)))
    topics = client.get("/api/snapshot").json()["topics"]
    assert [t["label"] for t in topics] == (labels or [None] * len(topics))
    assert all(t["coherence"] is None for t in topics)
    detail = client.get(f"/api/topics/{topics[0]['id']}").json()
    assert detail["coherence"] is None and detail["representatives"] == []

    copy = tmp_path / "run"
    copy.mkdir()
    shutil.copy(newest, copy / newest.name)
    extras = add_labels(copy / newest.name)
    client = TestClient(create_app(SnapshotDirectorySource(copy, min_poll_interval=0)))
    topics = client.get("/api/snapshot").json()["topics"]
    assert {t["id"]: (t["label"], t["coherence"]) for t in topics} == {
        t: (e["label"], e["coherence"]) for t, e in extras.items()}
    for topic, expected in extras.items():
        detail = client.get(f"/api/topics/{topic}").json()
        assert detail["label"] == expected["label"] and detail["coherence"] == expected["coherence"]
        assert detail["representatives"] == expected["representatives"]

    # in-process: a snapshot object that has them as attributes (per topic, in topic order)
    snapshot = TopicSnapshot.load(copy / newest.name)
    snapshot.labels = [extras[t]["label"] for t in snapshot.topic_ids]
    snapshot.coherence = np.array([extras[t]["coherence"] for t in snapshot.topic_ids])
    snapshot.representatives = [["plain text " * 100, {"text": "x", "id": 7, "score": "nan"}, 42, {"key": "no text"}]
                                for _ in snapshot.topic_ids]  # a list in topic order, not by id
    live = LiveSource()
    live.publish(snapshot)
    client = TestClient(create_app(live))
    topic = snapshot.topic_ids[0]
    detail = client.get(f"/api/topics/{topic}").json()
    assert detail["label"] == extras[topic]["label"] and detail["coherence"] == pytest.approx(extras[topic]["coherence"])
    long, short = detail["representatives"]  # what is no document (42, no text nor words) is left out
    assert len(long["text"]) == REPRESENTATIVE_CHARS and long["key"] is None  # texts are bounded
    assert short == {"text": "x", "words": [], "key": "7", "score": None}


# ----------------------------------------------------------------------------- the Grafana dashboard
GRAFANA = Path(consumers.__file__).parent / "static" / "grafana-dashboard.json"
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
                   "bool"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: its identifiers less function names, label
    names (in matchers and by/without/on lists), durations, strings and keywords."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    return set(re.findall(r"\b[A-Za-z_:][A-Za-z0-9_:]*\b(?!\s*\()", expr)) - PROMQL_KEYWORDS


def exported_names(metrics_text: str) -> set[str]:
    """The sample names of every family in a /metrics answer (a counter's ``_total``, a
    histogram's ``_bucket``/``_sum``/``_count``), whether or not it has samples yet."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
    names = set()
    for family in text_string_to_metric_families(metrics_text):
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def test_the_grafana_dashboard_queries_only_metrics_the_service_exports(finished):
    out, _ = finished
    dashboard = json.loads(GRAFANA.read_text())
    with serve_in_thread(create_app(SnapshotDirectorySource(out)), "127.0.0.1", 0) as handle:
        exported = exported_names(httpx.get(handle.url + "metrics").text)
    assert "streamtopics_documents_rejected_total" in exported and "streamtopics_run_finished" in exported
    assert promql_metric_names('sum by (le) (rate(x_bucket{a="b(c)"}[5m])) / y offset 1h') == {"x_bucket", "y"}

    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    variables = [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert len(queries) >= 10 and variables
    read = set()
    for expr in queries:
        names = promql_metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r} reads {sorted(names - exported)}, which /metrics does not export"
        read |= names
    for definition in variables:
        metric = re.fullmatch(r"label_values\((\w+),\s*\w+\)", definition).group(1)
        assert metric in exported
    # and the dashboard shows every family the service exports under its own prefix
    ours = {name for name in exported if name.startswith("streamtopics_")}
    histogram = {"streamtopics_refresh_duration_seconds_" + s for s in ("bucket", "sum", "count")}
    assert ours - histogram <= read and histogram & read
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])


def test_a_snapshot_in_the_burn_in_says_its_topics_are_forming(tmp_path, corpus):
    model = StreamingTopicModel(N_TOPICS, vocabulary=[f"w{i}" for i in range(N_WORDS)], anchor_min_df=5)  # burn_in 4
    model.learn_many(corpus[:1000])
    model.refresh().save(tmp_path / "snapshot-000001.json")
    body = TestClient(create_app(SnapshotDirectorySource(tmp_path, min_poll_interval=0))).get("/api/snapshot").json()
    assert body["forming"] is True and body["events"] == []
