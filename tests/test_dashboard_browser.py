"""The dashboard in a real browser: headless Debian Chromium driven by Playwright (no browser
download) loads the page while a model keeps learning and publishing snapshots, and must show the
topics and follow new snapshots without reloading.

The screenshot is saved under the test's tmp_path (printed); with STREAMTOPICS_UPDATE_SCREENSHOT=1
it also replaces docs/dashboard.png, the picture the README shows.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from consumers.service import LiveSource, create_app, serve_in_thread
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import sample_documents

DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "dashboard.png"

THEMES = {
    "football": "goal match striker league keeper penalty referee midfield stadium coach transfer derby",
    "markets": "shares stocks investors earnings bond yields inflation dividend rally nasdaq futures hedge",
    "weather": "storm rain forecast winds flooding temperatures snow humidity hurricane drought frost sunny",
    "software": "python compiler kernel release bug patch github library runtime debugger thread commit",
    "cooking": "recipe oven garlic butter flour simmer pasta roast sauce dough onion saffron",
    "space": "rocket orbit nasa launch satellite astronaut lunar telescope mars capsule booster comet",
    "elections": "ballot voters polls senate campaign candidate turnout debate primary governor swing district",
}
COMMON = "the said new year people time report today week says also more one first make".split()


def themed_topics() -> tuple[list[str], np.ndarray]:
    """Readable topics: each theme's words (Zipf weights) plus a little shared filler."""
    words = list(COMMON)
    columns = []
    for theme in THEMES.values():
        start = len(words)
        words += theme.split()
        columns.append((start, len(theme.split())))
    topic_word = np.zeros((len(words), len(columns)))
    for k, (start, n) in enumerate(columns):
        topic_word[start:start + n, k] = 1.0 / np.arange(1, n + 1) ** 0.8
        topic_word[: len(COMMON), k] = 0.02
    return words, topic_word / topic_word.sum(axis=0)


class Stream(threading.Thread):
    """Learns chunks of themed documents whose mixture drifts, refreshing and publishing after
    each (the same calls a replay makes with --serve); the 'elections' theme appears midway."""

    def __init__(self, source: LiveSource, chunks: int = 40, chunk: int = 400, pause: float = 0.25):
        super().__init__(daemon=True)
        self.source, self.chunks, self.chunk, self.pause = source, chunks, chunk, pause
        self.words, self.topic_word = themed_topics()
        self.model = StreamingTopicModel(6, vocabulary=self.words, anchor_min_df=5, seed=0)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self):
        try:
            rng = np.random.default_rng(7)
            for i in range(self.chunks):
                if self.stop_event.is_set():
                    return
                phase = i / self.chunks
                weights = np.array([1.6 - phase, 0.6 + phase, 1.0 + 0.6 * np.sin(6 * phase), 0.9, 0.5,
                                    0.8 + 0.4 * np.cos(5 * phase), 0.0 if i < 8 else 0.4 + 2 * phase])
                weights[4 if i >= 8 else 6] = 0.0  # from chunk 8 on, elections replace cooking
                proportions = rng.dirichlet(0.2 + 2 * weights / weights.sum() + 1e-9, self.chunk)
                proportions[:, weights == 0] = 0.0
                documents = sample_documents(self.topic_word, proportions, 30, seed=rng)
                self.model.learn_many(documents)
                self.model.learn_one("")  # a bad record now and then, visible as a rejection
                self.source.publish(self.model.refresh())
                remaining = (self.chunks - i - 1) * self.chunk
                self.source.update_metrics(model=self.model, lag={"archive": remaining})
                self.stop_event.wait(self.pause)
            self.source.finish()
        except BaseException as error:  # surfaced by the test
            self.error = error


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail("Debian's chromium is needed for the dashboard test (apt-get install chromium)")
    return path


def wait_until(page, expression: str, timeout: float) -> None:
    """Poll a JS expression from Python (the page's Content-Security-Policy forbids the string
    eval that Playwright's wait_for_function uses; page.evaluate goes through the debugger)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for: {expression}")
        time.sleep(0.1)


def test_dashboard_renders_topics_and_follows_new_snapshots(tmp_path):
    from playwright.sync_api import sync_playwright

    source = LiveSource(stall_after=30)
    stream = Stream(source)
    handle = serve_in_thread(create_app(source, title="synthetic news stream"), "127.0.0.1", 0)
    stream.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                errors = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.goto(handle.url, wait_until="domcontentloaded")
                page.wait_for_selector(".topic-card", timeout=20_000)
                assert page.locator(".topic-card").count() == 6
                first_card = page.locator(".topic-card").first
                assert first_card.locator(".word").count() == 10
                assert first_card.locator(".card-anchor").inner_text().strip() in stream.words
                assert page.locator("#prevalence-chart svg path.series").count() >= 6
                assert page.locator("#events li.ev-birth").count() >= 6

                # no reload: a marker set on this window survives the update
                page.evaluate("window.__stillTheSamePage = true")
                version = int(page.inner_text("#version"))
                wait_until(page, f"Number(document.getElementById('version').textContent) > {version} "
                                 f"&& Number(document.body.dataset.version) > {version}", 15)
                assert page.evaluate("window.__stillTheSamePage === true")
                assert int(page.inner_text("#version")) > version
                wait_until(page, "Number(document.body.dataset.version) >= 14", 30)
                assert page.locator(".topic-card .spark path").count() >= 6
                assert int(page.inner_text("#documents").replace(",", "")) > 0
                assert page.inner_text("#state-pill").strip().startswith(("live", "finished"))
                assert not errors, errors

                stream.stop_event.set()  # hold still for the picture: let the last update and its highlight settle
                stream.join(10)
                time.sleep(1.6)
                shot = tmp_path / "dashboard.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"dashboard screenshot: {shot}")
                assert shot.stat().st_size > 10_000
                if os.environ.get("STREAMTOPICS_UPDATE_SCREENSHOT"):
                    DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
                    shutil.copyfile(shot, DOCS_SCREENSHOT)
            finally:
                browser.close()
    finally:
        stream.stop_event.set()
        stream.join(10)
        handle.stop()
    assert stream.error is None, stream.error


def test_dashboard_sends_the_token_from_the_url_fragment():
    from playwright.sync_api import sync_playwright

    token = "browser-token-0123456789"
    source = LiveSource()
    words, topic_word = themed_topics()
    model = StreamingTopicModel(6, vocabulary=words, anchor_min_df=5, seed=0)
    model.learn_many(sample_documents(topic_word, np.full((800, 7), 1 / 7), 30, seed=1))
    source.publish(model.refresh(), model=model)
    with serve_in_thread(create_app(source, token=token), "127.0.0.1", 0) as handle:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                page = browser.new_page()
                page.goto(handle.url, wait_until="domcontentloaded")  # no token: the page says so
                page.wait_for_selector("#auth:not(.hidden)", timeout=10_000)
                assert page.locator(".topic-card").count() == 0
                page.goto(handle.url + "#token=" + token, wait_until="domcontentloaded")
                page.wait_for_selector(".topic-card", timeout=10_000)
                assert page.locator(".topic-card").count() == 6
                assert "token" not in page.url  # taken out of the address bar (and never sent)
                assert page.locator("#auth").is_hidden()
            finally:
                browser.close()
