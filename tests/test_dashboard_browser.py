"""The dashboard in a real browser: headless Debian Chromium driven by Playwright (no browser
download) loads the page while a model keeps learning and publishing snapshots, and must show the
topics and follow new snapshots without reloading; a topic's card opens its detail; the legend
names every line drawn; no two topics shown share a colour and a topic keeps its colour; over a
replay that has ended the page shows that run's recorded figures and the topics' labels,
coherence and representative documents.

The screenshot is saved under the test's tmp_path (printed); with STREAMTOPICS_UPDATE_SCREENSHOT=1
it also replaces docs/dashboard.png, the picture docs/monitoring.md shows.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from consumers.service import LiveSource, SnapshotDirectorySource, create_app, serve_in_thread
from run_helpers import EMPTY_DOCUMENTS, MALFORMED_LINES, add_labels, finished_run
from streamtopics import StreamingTopicModel
from streamtopics.synthetic import sample_documents

pytestmark = pytest.mark.browser

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
        self.model = StreamingTopicModel(6, vocabulary=self.words, anchor_min_df=5, seed=0, burn_in=0)  # events at once
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


# read at once (one task of the page, so no update falls between them): the computed colour of
# each topic card by topic id; [topic id or "other", colour] of each line of the prevalence chart
# and of each legend entry
COLOURS = """({
  cards: Object.fromEntries([...document.querySelectorAll('.topic-card')]
    .map(c => [c.dataset.topic, getComputedStyle(c).borderTopColor])),
  lines: [...document.querySelectorAll('#prevalence-chart path.series')]
    .map(p => [p.dataset.topic, getComputedStyle(p).stroke]),
  legend: [...document.querySelectorAll('#legend .legend-item')]
    .map(e => [e.dataset.topic, getComputedStyle(e.querySelector('.swatch')).backgroundColor]),
})"""


def check_colours_and_legend(page) -> dict:
    """No two cards share a colour; the legend has one entry per line, in the line's colour, and
    a topic's line has its card's colour. Returns the cards' colours."""
    seen = page.evaluate(COLOURS)
    cards, lines, legend = seen["cards"], seen["lines"], seen["legend"]
    assert len(set(cards.values())) == len(cards), cards
    assert sorted(lines) == sorted(legend), (lines, legend)
    assert len({topic for topic, _ in lines}) == len(lines)
    for topic, colour in lines:
        if topic != "other":
            assert cards[topic] == colour, (topic, colour, cards[topic])
    return cards


def open_detail(page, card) -> str:
    """Click ``card``; the detail of its topic opens. Returns the topic id."""
    topic = card.get_attribute("data-topic")
    card.click()
    wait_until(page, f"document.getElementById('detail').dataset.topic === '{topic}' "
                     "&& !document.getElementById('detail').classList.contains('hidden')", 10)
    return topic


def launch(p):
    return p.chromium.launch(executable_path=chromium_path(), headless=True,
                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])


def open_dashboard(browser, url: str, errors: list, console_errors: bool = True):
    """A page showing the dashboard at ``url`` once its topic cards are drawn; the page's
    script errors (and console errors) go to ``errors``."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.on("pageerror", lambda e: errors.append(str(e)))
    if console_errors:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(".topic-card", timeout=20_000)
    return page


def test_dashboard_renders_topics_and_follows_new_snapshots(tmp_path):
    from playwright.sync_api import sync_playwright

    source = LiveSource(stall_after=30)
    stream = Stream(source)
    handle = serve_in_thread(create_app(source, title="synthetic news stream"), "127.0.0.1", 0)
    stream.start()
    try:
        with sync_playwright() as p:
            browser = launch(p)
            try:
                errors = []
                page = open_dashboard(browser, handle.url, errors)
                assert page.locator(".topic-card").count() == 6
                first_card = page.locator(".topic-card").first
                assert first_card.locator(".word").count() == 10
                assert first_card.locator(".card-anchor").inner_text().strip() in stream.words
                assert page.locator("#prevalence-chart svg path.series").count() >= 6
                assert page.locator("#events li.ev-birth").count() >= 6
                colours = check_colours_and_legend(page)

                # no reload: a marker set on this window survives the update
                page.evaluate("window.__stillTheSamePage = true")
                version = int(page.inner_text("#version"))
                wait_until(page, f"Number(document.getElementById('version').textContent) > {version} "
                                 f"&& Number(document.body.dataset.version) > {version}", 15)
                assert page.evaluate("window.__stillTheSamePage === true")
                assert int(page.inner_text("#version")) > version
                wait_until(page, "Number(document.body.dataset.version) >= 14", 30)
                # a topic keeps its colour from snapshot to snapshot, and none is shared
                later = check_colours_and_legend(page)
                kept = set(colours) & set(later)
                assert kept and all(colours[t] == later[t] for t in kept), (colours, later)
                assert page.locator(".topic-card .spark path").count() >= 6
                assert int(page.inner_text("#documents").replace(",", "")) > 0
                assert page.inner_text("#state-pill").strip().startswith(("live", "finished"))
                assert not errors, errors

                stream.stop_event.set()  # hold still for the picture: let the last update and its highlight settle
                stream.join(10)
                final = httpx.get(handle.url + "api/snapshot").json()["version"]
                wait_until(page, f"Number(document.body.dataset.version) === {final}", 10)
                time.sleep(1.6)

                shot = tmp_path / "dashboard.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"dashboard screenshot: {shot}")
                assert shot.stat().st_size > 10_000
                if os.environ.get("STREAMTOPICS_UPDATE_SCREENSHOT"):
                    DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
                    shutil.copyfile(shot, DOCS_SCREENSHOT)

                # the timeline names the words of each event: what was born, what died, what came and went
                events = httpx.get(handle.url + "api/events?limit=80").json()["events"]
                texts = page.locator("#events li.ev").all_inner_texts()
                assert len(texts) == len(events)
                checked = 0
                for event, text in zip(reversed(events), texts):
                    assert f"Topic #{event['topic']} " in text
                    for key, prefix in (("words", "was: " if event["type"] == "death" else ""),
                                        ("words_in", "+ "), ("words_out", "− ")):
                        if event.get(key):
                            assert prefix + ", ".join(event[key]) in text, (event, text)
                            checked += 1
                assert checked > 0

                # a card opens its topic's detail: the API's top words, anchor and history
                card = page.locator(".topic-card").first
                topic = open_detail(page, card)
                detail = httpx.get(handle.url + f"api/topics/{topic}?top_n=20").json()
                assert page.locator("#detail-words .dword-text").all_inner_texts() == [
                    w["word"] for w in detail["top_words"]]
                assert page.inner_text("#detail-title") == f"Topic #{topic}" + (
                    f" · {detail['anchor_shown']}" if detail["anchor_shown"] else "")
                assert f"snapshot v{final}" in page.inner_text("#detail-sub")
                assert page.locator("#detail-chart path.series").count() == 1
                # label and representative documents where the library gives them (absent: not shown)
                assert page.locator("#detail-docs-panel").is_hidden() == (not detail["representatives"])
                assert page.inner_text("#detail-label") == ("label: " + detail["label"] if detail["label"] else "")
                page.keyboard.press("Escape")
                wait_until(page, "document.getElementById('detail').classList.contains('hidden')", 5)
                card.focus()
                page.keyboard.press("Enter")  # the keyboard opens it too
                wait_until(page, "!document.getElementById('detail').classList.contains('hidden')", 5)
                page.click("#detail-close")
                wait_until(page, "document.getElementById('detail').classList.contains('hidden')", 5)
                assert not errors, errors
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
            browser = launch(p)
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


def test_dashboard_over_a_finished_replay_shows_its_figures_labels_and_documents(tmp_path):
    """``streamtopics serve DIR`` over a replay that has ended: the page shows the rejections,
    malformed records and ingest rate the run recorded; with more topics than the palette has
    colours none is shared, the small ones are grouped as "other" in the legend; the labels,
    coherence and representative documents of the newest snapshot are on the cards and in the
    detail."""
    from playwright.sync_api import sync_playwright

    out = tmp_path / "run"
    summary = finished_run(out, n_topics=16)
    extras = add_labels(sorted(out.glob("snapshot-*.json"))[-1])
    with serve_in_thread(create_app(SnapshotDirectorySource(out)), "127.0.0.1", 0) as handle:
        with sync_playwright() as p:
            browser = launch(p)
            try:
                errors = []
                page = open_dashboard(browser, handle.url, errors, console_errors=False)
                assert page.locator(".topic-card").count() == len(extras) == 16
                assert page.inner_text("#state-pill").strip().startswith("finished")
                assert page.inner_text("#documents").replace(",", "") == str(summary.absorbed)
                assert page.inner_text("#rejected") == f"{EMPTY_DOCUMENTS} rejected · {MALFORMED_LINES} malformed"
                assert page.inner_text("#rate").replace(",", "") == str(round(summary.ingest_rate))
                assert page.inner_text("#rate-note") == "docs / s while ingesting · finished run"
                rows = dict(r.split("\t") for r in page.locator("#rejected-table tr").all_inner_texts())
                assert rows == {**{k: str(v) for k, v in summary.rejected.items()},
                                **{f"malformed: {k}": str(v) for k, v in summary.malformed.items()}}

                check_colours_and_legend(page)  # 16 topics, 12 palette colours: generated hues
                ever = {t for h in httpx.get(handle.url + "api/history?limit=1000").json()["versions"]
                        for t in h["prevalence"]}
                legend = page.locator("#legend .legend-item").all_inner_texts()
                gone = len(ever) - len(extras)  # the live topics summed are counted, the gone ones named apart
                assert len(legend) == 11 and legend[-1] == (f"other · {len(extras) - 10} topics"
                                                            + (f" (and {gone} gone)" if gone else ""))
                # the named lines set the axis: the sum of the others, larger than any, does not squeeze them
                named = {t for t in page.locator("#legend .legend-item").evaluate_all(
                    "items => items.map(i => i.dataset.topic)") if t != "other"}
                versions = httpx.get(handle.url + "api/history?limit=1000").json()["versions"]
                largest = max(p for h in versions for t, p in h["prevalence"].items() if t in named)
                summed = max(sum(p for t, p in h["prevalence"].items() if t not in named) for h in versions)
                top_tick = page.locator("#prevalence-chart text.tick").nth(4).text_content()
                assert summed > largest and abs(int(top_tick.rstrip("%")) - largest * 108) <= 1

                labels = dict(zip(page.locator(".topic-card").evaluate_all("cs => cs.map(c => c.dataset.topic)"),
                                  page.locator(".topic-card .card-label").all_inner_texts()))
                assert labels == {str(t): e["label"] for t, e in extras.items()}
                card = page.locator(".topic-card").nth(2)
                topic = int(open_detail(page, card))
                assert f"NPMI {extras[topic]['coherence']:.2f}" in card.inner_text()
                assert page.inner_text("#detail-label") == "label: " + extras[topic]["label"]
                assert f"coherence (NPMI) {extras[topic]['coherence']:.3f}" in page.inner_text("#detail-sub")
                with_text, as_tokens = extras[topic]["representatives"]
                assert page.locator("#detail-docs .rep-text").all_inner_texts() == [with_text["text"]]
                assert page.locator("#detail-docs .rep-words").all_inner_texts() == [" ".join(as_tokens["words"])]
                shot = tmp_path / "detail.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"detail screenshot: {shot}")
                assert not errors, errors
            finally:
                browser.close()
