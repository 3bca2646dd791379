// streamtopics dashboard: polls the read-only JSON API once a second and redraws in place.
// Vanilla JS, no dependencies, no network access beyond this service. Text from the stream is
// only ever inserted with textContent (never innerHTML).
"use strict";
(function () {
  const POLL_MS = 1000;
  const PALETTE = ["#3566d6", "#1f9d63", "#d98a00", "#9b59b6", "#d64545", "#1a9bb0", "#c2548f",
                   "#6b8e23", "#8c6d31", "#5b6bd6", "#e07b39", "#2f8f83"];
  const SVG = "http://www.w3.org/2000/svg";
  const fmt = new Intl.NumberFormat("en-US");
  const fmt1 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
  const SHOWN_LINES = 10;  // topics drawn as their own line; the rest are summed into one "other" line
  const OTHER_COLOUR = "#9aa4b2";
  const state = { version: null, rates: [], token: null, history: [], detail: null };

  // --- token from the URL fragment (never sent to the server), kept for this tab
  function takeToken() {
    const m = /(?:^#|&)token=([^&]+)/.exec(location.hash || "");
    if (m) {
      sessionStorage.setItem("streamtopics-token", decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    state.token = sessionStorage.getItem("streamtopics-token");
  }
  takeToken();
  window.addEventListener("hashchange", takeToken);  // a token pasted into an open page

  const $ = (id) => document.getElementById(id);
  // A topic keeps its colour from snapshot to snapshot -- also through snapshots it is missing
  // from, since a topic may drop out and come back -- and no two live topics share one. A new
  // topic takes a palette colour never given, else the colour of the topic gone longest, else a
  // generated hue (golden-angle steps), so more topics than the palette has colours still differ.
  const colours = new Map();   // topic id -> colour, the gone ones included until it is needed
  const lastSeen = new Map();  // topic id -> snapshot version it was last live in
  const color = (id) => colours.get(id) || OTHER_COLOUR;
  function generatedHue(i) { return `hsl(${Math.round((i * 137.508 + 17) % 360)}, 62%, 42%)`; }
  function assignColours(liveIds, version) {
    for (const id of liveIds) lastSeen.set(id, version);
    const live = new Set(liveIds);
    for (const id of liveIds) {
      if (colours.has(id)) continue;
      const held = new Set(colours.values());
      let c = PALETTE.find((x) => !held.has(x));
      if (!c) {
        const gone = [...colours.keys()].filter((g) => !live.has(g)).sort((a, b) => lastSeen.get(a) - lastSeen.get(b));
        if (gone.length) { c = colours.get(gone[0]); colours.delete(gone[0]); }
      }
      for (let i = 0; !c; i++) if (!held.has(generatedHue(i))) c = generatedHue(i);
      colours.set(id, c);
    }
  }
  const topicName = (t) => "#" + t.id + " " + (t.label || t.anchor_shown || "");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const c of children) if (c != null) node.append(c);
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }
  function setText(id, text) { const n = $(id); if (n.textContent !== text) n.textContent = text; }

  async function api(path) {
    const headers = state.token ? { Authorization: "Bearer " + state.token } : {};
    const r = await fetch(path, { headers, cache: "no-store" });
    if (r.status === 401) { $("auth").classList.remove("hidden"); throw new Error("unauthorised"); }
    if (r.status === 503) return null;
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  function bytes(n) {
    if (n == null) return "–";
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return fmt1.format(n) + " " + units[i];
  }
  function seconds(s) {
    if (s == null) return "–";
    if (s < 1) return Math.round(s * 1000) + " ms";
    if (s < 90) return fmt1.format(s) + " s";
    return fmt1.format(s / 60) + " min";
  }
  function ago(s) { return s == null ? "" : seconds(s) + " ago"; }
  function streamTime(t) {
    if (t == null) return "";
    return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
  }

  // --- status: every poll
  function renderStatus(st) {
    const m = st.metrics || {};
    const pill = $("state-pill");
    let cls = "pill-wait", text = "waiting for a snapshot";
    if (st.stalled) { cls = "pill-bad"; text = "stalled"; }
    else if (st.ready && st.finished) { cls = "pill-ok"; text = "finished · ready"; }
    else if (st.ready) { cls = "pill-ok"; text = "live · ready"; }
    pill.className = "pill " + cls;
    pill.textContent = text;
    setText("subtitle", (st.title || "streamtopics") + " · " + (st.source === "directory" ? "snapshot directory" : "live stream")
      + (st.stream_time != null ? " · stream time " + streamTime(st.stream_time) : ""));
    setText("version", st.version == null ? "–" : String(st.version));
    setText("snapshot-age", m.snapshot_age_seconds == null ? "" : "published " + ago(m.snapshot_age_seconds));
    setText("documents", fmt.format(m.documents_absorbed || 0));
    setText("rejected", fmt.format(m.documents_rejected || 0) + " rejected"
      + (m.documents_malformed ? " · " + fmt.format(m.documents_malformed) + " malformed" : ""));
    const run = m.run;  // the record of a run that has ended: its own figures, not the idle present
    setText("rate", fmt.format(Math.round(run ? run.ingest_rate : m.ingest_rate || 0)));
    setText("rate-note", run ? "docs / s while ingesting · " + (run.stopped ? "stopped" : "finished") + " run" : "docs / s");
    $("rate-note").title = run ? `the run's documents per second while ingesting (refreshes, checkpoints and pacing `
      + `pauses excluded): ${fmt.format(run.documents_this_run)} documents in ${seconds(run.elapsed_s)} in all`
      + (run.paused_s ? `, ${seconds(run.paused_s)} of it paused` : "") : "";
    setText("lag", fmt.format(m.total_lag || 0));
    const parts = Object.keys(m.lag || {}).length;
    setText("lag-note", parts ? parts + " partition" + (parts > 1 ? "s" : "") : "no partitions");
    setText("refresh", seconds(m.last_refresh_seconds));
    setText("refreshes", fmt.format(m.refreshes || 0) + " refreshes");
    setText("topics-count", m.n_topics == null ? "–" : String(m.n_topics));
    setText("vocab", m.vocabulary_size == null ? "" : fmt.format(m.vocabulary_size) + " words");
    setText("memory", bytes(m.memory_bytes));
    setText("updated", "updated " + new Date().toLocaleTimeString());

    state.rates.push(m.ingest_rate || 0);
    if (state.rates.length > 120) state.rates.shift();
    lineChart($("throughput-chart"), [{ values: state.rates.map((v, i) => [i, v]), color: "#3566d6", area: true }],
      { width: 320, height: 110, xTicks: false });
    table($("lag-table"), Object.entries(m.lag || {}).sort(), "no partitions reported");
    table($("rejected-table"), [...Object.entries(m.rejected || {}),
      ...Object.entries(m.malformed || {}).map(([k, v]) => ["malformed: " + k, v])].sort((a, b) => b[1] - a[1]), "none");
  }

  function table(body, rows, emptyText) {
    body.replaceChildren();
    if (!rows.length) { body.append(el("tr", {}, el("td", { class: "empty", colspan: "2", text: emptyText }))); return; }
    for (const [k, v] of rows) body.append(el("tr", {}, el("td", { text: k }), el("td", { class: "num", text: fmt.format(v) })));
  }

  // --- a small SVG line chart: series = [{values: [[x, y]...], color, faint, title, area, unscaled}]; an
  // ``unscaled`` series does not set the y axis: drawn above it, it runs along the top edge
  function lineChart(container, series, opt) {
    const W = opt.width || 800, H = opt.height || 260, L = opt.left || 38, R = 10, T = 8, B = opt.xTicks === false ? 8 : 22;
    let xs = [], ys = [0];
    for (const s of series) for (const [x, y] of s.values) { xs.push(x); if (!s.unscaled) ys.push(y); }
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
    if (!xs.length) { container.replaceChildren(root); return; }
    const x0 = Math.min(...xs), x1 = Math.max(...xs) || 1, y1 = Math.max(...ys) * 1.08 || 1;
    const sx = (x) => L + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - Math.min(y, y1) / y1) * (H - T - B);
    for (let i = 0; i <= 4; i++) {
      const v = (y1 / 4) * i, y = sy(v);
      root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: y, y2: y }));
      const label = svg("text", { class: "tick", x: L - 4, y: y + 3, "text-anchor": "end" });
      label.textContent = opt.percent ? Math.round(v * 100) + "%" : y1 >= 20 ? fmt.format(Math.round(v)) : fmt1.format(v);
      root.append(label);
    }
    if (opt.xTicks !== false) {
      for (let i = 0; i <= 4; i++) {
        const v = x0 + ((x1 - x0) / 4) * i;
        const t = svg("text", { class: "tick", x: sx(v), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" });
        t.textContent = opt.xLabel ? opt.xLabel(v) : fmt.format(Math.round(v));
        root.append(t);
      }
    }
    for (const s of series) {
      if (!s.values.length) continue;
      const d = s.values.map(([x, y], i) => (i ? "L" : "M") + sx(x).toFixed(1) + " " + sy(y).toFixed(1)).join(" ");
      if (s.area) {
        const a = d + ` L${sx(s.values[s.values.length - 1][0]).toFixed(1)} ${sy(0)} L${sx(s.values[0][0]).toFixed(1)} ${sy(0)} Z`;
        root.append(svg("path", { d: a, fill: s.color, opacity: "0.12" }));
      }
      const path = svg("path", { d, class: "series" + (s.faint ? " faint" : ""), stroke: s.color });
      if (s.id != null) path.setAttribute("data-topic", String(s.id));
      if (s.title) { const t = svg("title", {}); t.textContent = s.title; path.append(t); }
      root.append(path);
      if (s.values.length === 1) {
        const [x, y] = s.values[0];
        root.append(svg("circle", { cx: sx(x), cy: sy(y), r: 3, fill: s.color }));
      }
    }
    container.replaceChildren(root);
  }

  function sparkline(values, c) {
    const W = 110, H = 28;
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "spark", "aria-label": "prevalence trend" });
    if (values.length < 2) {
      if (values.length === 1) root.append(svg("circle", { cx: W - 3, cy: H / 2, r: 2.5, fill: c }));
      return root;
    }
    const max = Math.max(...values) || 1, min = Math.min(...values);
    const span = max - min || max || 1;
    const pts = values.map((v, i) => [(i / (values.length - 1)) * (W - 4) + 2, H - 3 - ((v - min) / span) * (H - 6)]);
    const d = pts.map(([x, y], i) => (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1)).join(" ");
    root.append(svg("path", { d: d + ` L${W - 2} ${H} L2 ${H} Z`, fill: c, opacity: "0.15" }));
    root.append(svg("path", { d, fill: "none", stroke: c, "stroke-width": "1.6" }));
    const [lx, ly] = pts[pts.length - 1];
    root.append(svg("circle", { cx: lx, cy: ly, r: 2.2, fill: c }));
    return root;
  }

  // --- snapshot-driven views: only when the version changes
  function renderTopics(snap, history, previousIds) {
    const topics = [...snap.topics].sort((a, b) => b.prevalence - a.prevalence);
    const maxPrev = Math.max(...topics.map((t) => t.prevalence), 1e-9);
    const cards = topics.map((t, rank) => {
      const c = color(t.id);
      const trend = history.map((h) => h.prevalence[String(t.id)]).filter((v) => v != null).slice(-60);
      const bar = el("span");
      bar.style.width = ((t.prevalence / maxPrev) * 100).toFixed(1) + "%";
      const words = el("div", { class: "words" },
        ...t.top_words.map(([w], i) => el("span", { class: "word" + (i < 3 ? " strong" : ""), text: w })));
      const card = el("article", { class: "card topic-card", "data-topic": String(t.id), tabindex: "0", role: "button",
                                   "aria-label": "open topic " + t.id },
        el("div", { class: "card-head" },
          el("span", { class: "card-id", text: "#" + t.id }),
          t.anchor_shown ? el("span", { class: "card-anchor", title: "anchor word", text: t.anchor_shown }) : null,
          el("span", { class: "muted", text: "rank " + (rank + 1) }),
          t.tentative ? el("span", { class: "muted", title: "within its birth grace: announced as born if it lasts",
                                     text: "tentative" }) : null,
          t.stopped ? el("span", { class: "muted", title: "its subject stopped: announced dead, while the model " +
                                   "(whose sums describe the whole stream) still holds it", text: "stopped" }) : null),
        t.label ? el("div", { class: "card-label", title: "label", text: t.label }) : null,
        el("div", { class: "card-row" },
          el("span", { class: "card-prev", text: (t.prevalence * 100).toFixed(1) + "%",
                       title: "share: the mean weight of this topic in the inferred mixtures of the documents " +
                              "the model keeps (what transform gives them, on average)" }),
          t.coherence != null ? el("span", { class: "card-coherence", title: "coherence (NPMI, -1..1)",
                                             text: "NPMI " + t.coherence.toFixed(2) }) : null,
          sparkline(trend, c)),
        el("div", { class: "bar" }, bar),
        words);
      card.style.setProperty("--c", c);
      card.addEventListener("click", () => openDetail(t.id));
      card.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openDetail(t.id); } });
      if (previousIds && !previousIds.has(t.id)) card.classList.add("new");
      return card;
    });
    $("topics").replaceChildren(...cards);
    setText("topics-note", `${snap.n_topics} topics · v${snap.version} · ${fmt.format(snap.documents_seen)} documents`);
  }

  function renderChart(snap, history) {
    const useTime = history.length > 0 && history.every((h) => h.stream_time != null);
    const xOf = (h) => (useTime ? h.stream_time : h.documents_seen);
    // the SHOWN_LINES most prevalent live topics get a line each; every other topic (smaller or
    // dead) is summed into one "other" line, so the legend names every line drawn. The named lines
    // set the axis (the sum, often half the stream, would squeeze them to its bottom), and the
    // legend counts the live topics summed, naming the gone ones apart
    const ranked = [...snap.topics].sort((a, b) => b.prevalence - a.prevalence);
    const shown = ranked.slice(0, SHOWN_LINES);
    const shownIds = new Set(shown.map((t) => t.id));
    const series = shown.map((t) => ({
      id: t.id, color: color(t.id), title: topicName(t),
      values: history.filter((h) => h.prevalence[String(t.id)] != null).map((h) => [xOf(h), h.prevalence[String(t.id)]]),
    }));
    const others = new Set(history.flatMap((h) => Object.keys(h.prevalence).map(Number)).filter((id) => !shownIds.has(id)));
    if (others.size) {
      const live = snap.topics.filter((t) => !shownIds.has(t.id)).length, gone = others.size - live;
      series.unshift({
        id: "other", color: OTHER_COLOUR, faint: true, unscaled: true,
        title: `other · ${live} topics` + (gone > 0 ? ` (and ${gone} gone)` : ""),
        values: history.map((h) => [xOf(h), Object.entries(h.prevalence)
          .filter(([id]) => !shownIds.has(Number(id))).reduce((sum, [, p]) => sum + p, 0)]),
      });
    }
    lineChart($("prevalence-chart"), series, {
      width: 820, height: 250, percent: true,
      xLabel: useTime ? (v) => streamTime(v).slice(0, 10) : (v) => fmt.format(Math.round(v)),
    });
    setText("chart-axis", (useTime ? "x: stream time" : "x: documents seen") + ` · ${history.length} snapshots`);
    const legendOrder = [...series.filter((s) => s.id !== "other"), ...series.filter((s) => s.id === "other")];
    $("legend").replaceChildren(...legendOrder.map((s) => {
      const sw = el("span", { class: "swatch" });
      sw.style.background = s.color;
      return el("span", { class: "legend-item", "data-topic": String(s.id), "data-colour": s.color }, sw,
        el("span", { text: s.title }));
    }));
  }

  // what an event says: a title, and the words it names -- a birth's, a return's and a death's top words
  // (what was born, what died), the words a change brought in and took out
  function describeEvent(e, names) {
    const name = e.label || names.get(e.topic) || e.anchor || e.anchor_after || "";
    const lines = [];
    let title;
    if (e.type === "birth") title = `Topic #${e.topic} born`;
    else if (e.type === "found") title = `Topic #${e.topic} found (in the stream all along)`;
    else if (e.type === "death") title = `Topic #${e.topic} died`;
    else if (e.type === "lost") title = `Topic #${e.topic} lost (its subject goes on)`;
    else if (e.type === "return") title = `Topic #${e.topic} returned`;
    else {
      title = `Topic #${e.topic} changed`;
      let moved = e.anchor_before && e.anchor_after && e.anchor_before !== e.anchor_after
        ? `anchor ${e.anchor_before} → ${e.anchor_after}` : "";
      if (e.distance != null) moved += (moved ? " · " : "") + "moved " + Number(e.distance).toFixed(2);
      if (moved) lines.push(["", moved]);
    }
    if (name) title += " · " + name;
    if (e.words && e.words.length) lines.push(["ev-words", (e.type === "death" || e.type === "lost" ? "was: " : "") + e.words.join(", ")]);
    if (e.words_in && e.words_in.length) lines.push(["ev-words ev-in", "+ " + e.words_in.join(", ")]);
    if (e.words_out && e.words_out.length) lines.push(["ev-words ev-out", "− " + e.words_out.join(", ")]);
    return { title, lines };
  }
  function eventMeta(e) {
    return `v${e.version} · ${fmt.format(e.documents_seen)} docs` + (e.stream_time != null ? " · " + streamTime(e.stream_time) : "");
  }

  function renderEvents(events, snap) {
    const names = new Map(snap.topics.map((t) => [t.id, t.label || t.anchor_shown || ""]));
    const items = [...events].reverse().map((e) => {
      const { title, lines } = describeEvent(e, names);
      return el("li", { class: "ev ev-" + e.type },
        el("span", { class: "dot" }),
        el("div", {}, el("div", { class: "ev-title", text: title }),
          ...lines.map(([cls, text]) => el("div", { class: ("ev-meta " + cls).trim(), text })),
          el("div", { class: "ev-meta", text: eventMeta(e) })));
    });
    if (!items.length) {
      const why = snap.forming ? "topics forming: events wait for the burn-in" : "no events yet";
      items.push(el("li", { class: "empty", text: why }));
    }
    $("events").replaceChildren(...items);
    // announced topics absent now: dead if they stay away past the grace (so the events add up)
    const missing = (snap.missing || []).map((t) => "#" + t).join(", ");
    setText("events-count", [events.length ? events.length + " latest" : "", missing ? "missing " + missing : ""]
      .filter(Boolean).join(" · "));
  }

  // --- a topic's detail (/api/topics/{id}): opened from its card, kept up to date while open
  async function openDetail(id) {
    state.detail = id;
    $("detail").classList.remove("hidden");
    $("detail-backdrop").classList.remove("hidden");
    await loadDetail(id);
    $("detail-close").focus();
  }
  function closeDetail() {
    const id = state.detail;
    state.detail = null;
    $("detail").classList.add("hidden");
    $("detail-backdrop").classList.add("hidden");
    const card = document.querySelector(`.topic-card[data-topic="${id}"]`);
    if (card) card.focus();
  }
  async function loadDetail(id) {
    let t;
    try {
      t = await api("/api/topics/" + encodeURIComponent(id) + "?top_n=20");
    } catch (err) {
      if (!/HTTP 404/.test(String(err.message))) throw err;
      t = null;
    }
    if (state.detail !== id) return;
    const box = $("detail");
    box.style.setProperty("--c", color(id));
    if (!t) {
      setText("detail-title", "Topic #" + id);
      setText("detail-sub", "this topic is no longer in the latest snapshot");
      setText("detail-label", "");
      for (const part of ["detail-words", "detail-docs", "detail-events"]) $(part).replaceChildren();
      $("detail-chart").replaceChildren();
      box.dataset.topic = String(id);
      return;
    }
    setText("detail-title", "Topic #" + t.id + (t.anchor_shown ? " · " + t.anchor_shown : ""));
    setText("detail-sub", `${(t.prevalence * 100).toFixed(1)}% of the stream · rank ${t.rank}`
      + (t.coherence != null ? ` · coherence (NPMI) ${t.coherence.toFixed(3)}` : "") + ` · snapshot v${t.version}`);
    setText("detail-label", t.label ? "label: " + t.label : "");
    const maxP = Math.max(...t.top_words.map((w) => w.probability), 1e-9);
    $("detail-words").replaceChildren(...t.top_words.map((w) => {
      const bar = el("span", { class: "wbar" });
      bar.style.width = ((w.probability / maxP) * 100).toFixed(1) + "%";
      return el("li", { class: "dword" }, el("span", { class: "dword-text", text: w.word }),
        el("span", { class: "dword-bar" }, bar), el("span", { class: "num", text: (w.probability * 100).toFixed(2) + "%" }));
    }));
    const useTime = t.history.length > 0 && t.history.every((h) => h.stream_time != null);
    lineChart($("detail-chart"), [{ values: t.history.map((h) => [useTime ? h.stream_time : h.documents_seen, h.prevalence]),
                                    color: color(id), area: true, title: topicName(t) }],
      { width: 560, height: 170, percent: true,
        xLabel: useTime ? (v) => streamTime(v).slice(0, 10) : (v) => fmt.format(Math.round(v)) });
    setText("detail-chart-note", `prevalence at each of ${t.history.length} snapshots`);
    const docs = t.representatives || [];
    $("detail-docs-panel").classList.toggle("hidden", docs.length === 0);
    $("detail-docs").replaceChildren(...docs.map((d) => el("li", { class: "rep" },
      d.text != null ? el("div", { class: "rep-text", text: d.text })
                     : el("div", { class: "rep-words", text: (d.words || []).join(" ") }),
      d.text != null && d.words && d.words.length ? el("div", { class: "ev-meta", text: "words: " + d.words.join(", ") }) : null,
      d.key != null || d.score != null
        ? el("div", { class: "ev-meta", text: [d.key != null ? "key " + d.key : null,
                                               d.score != null ? "score " + d.score.toFixed(3) : null].filter(Boolean).join(" · ") })
        : null)));
    const names = new Map([[t.id, t.label || t.anchor_shown || ""]]);
    $("detail-events").replaceChildren(...[...t.events].reverse().slice(0, 12).map((e) => {
      const { title, lines } = describeEvent(e, names);
      return el("li", { class: "dev" }, el("div", { class: "ev-title", text: title }),
        ...lines.map(([cls, text]) => el("div", { class: ("ev-meta " + cls).trim(), text })),
        el("div", { class: "ev-meta", text: eventMeta(e) }));
    }));
    box.dataset.topic = String(id);
  }
  $("detail-close").addEventListener("click", closeDetail);  // the script is deferred: the page is parsed
  $("detail-backdrop").addEventListener("click", closeDetail);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape" && state.detail != null) closeDetail(); });

  async function refreshSnapshot() {
    const [snap, hist, ev] = await Promise.all([
      api("/api/snapshot?top_n=10"), api("/api/history?limit=300"), api("/api/events?limit=80"),
    ]);
    if (!snap) return false;
    assignColours(snap.topics.map((t) => t.id), snap.version);
    const previousIds = state.version == null ? null : new Set(state.ids || []);
    const history = (hist && hist.versions) || [];
    renderTopics(snap, history, previousIds);
    renderChart(snap, history);
    renderEvents((ev && ev.events) || [], snap);
    if (state.detail != null) await loadDetail(state.detail);
    state.ids = snap.topics.map((t) => t.id);
    state.version = snap.version;
    document.body.dataset.version = String(snap.version);
    return true;
  }

  async function tick() {
    try {
      const st = await api("/api/status");
      renderStatus(st);
      if (st.version != null && st.version !== state.version) await refreshSnapshot();
      $("error").classList.add("hidden");
      $("auth").classList.add("hidden");
    } catch (err) {
      if (String(err.message) !== "unauthorised") {
        const box = $("error");
        box.textContent = "Cannot reach the service (" + err.message + "); retrying…";
        box.classList.remove("hidden");
      }
    } finally {
      setTimeout(tick, POLL_MS);
    }
  }
  tick();
})();
