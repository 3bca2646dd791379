"""Markdown tables and PNG plots from the results JSON."""

from __future__ import annotations

import math
from pathlib import Path

SHORT = {"ours": "streamtopics (ours)", "gensim": "gensim LdaModel online", "sklearn": "scikit-learn LDA online",
         "river": "river LDA", "tomotopy": "tomotopy LDA (batch Gibbs)"}


def _fmt(x, spec):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def setting_table(setting: dict, rows: list[dict]) -> str:
    semi = setting["kind"] == "semi"
    head = ["system", "documents learned", "fit s (final step)", "documents/s (runs)", "peak RSS MB (Δ over data)"]
    if semi:
        head.append("matched L1 ↓")
    head += ["held-out LL/token ↑", "NPMI top-10 ↑", "uniqueness ↑", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {SHORT[r['system']]} | failed: {r['error'][:120]} |" + " |" * (len(head) - 2))
            continue
        notes = []
        if r.get("stopped_early"):
            notes.append(f"cut at the {r['budget_s']:.0f} s budget: {r['docs']:,} of {r['stream_docs']:,} documents")
        if r["system"] == "tomotopy":
            notes.append(f"{r.get('iterations')} Gibbs iterations over all documents")
        runs = r.get("runs", [r["docs_per_s"]])
        cells = [SHORT[r["system"]], f"{r['docs']:,}", f"{r['fit_s']:.1f} ({r['finish_s']:.1f})",
                 f"{r['docs_per_s_median']:,.0f} ({len(runs)})",
                 f"{r['peak_rss_mb']:.0f} ({r['peak_rss_mb'] - r['rss_before_mb']:+.0f})"]
        if semi:
            cells.append(_fmt(r.get("l1"), ".3f"))
        cells += [_fmt(r.get("heldout_ll"), ".3f"), _fmt(r.get("npmi"), ".3f"), _fmt(r.get("uniqueness"), ".2f"),
                  "; ".join(notes)]
        lines.append("| " + " | ".join(cells) + " |")
    curves = [r for r in rows if r.get("curve")]
    if semi and curves:
        points = sorted({n for r in curves for n, _ in r["curve"]})
        lines += ["", "Matched L1 against documents seen (the L1 plot's data; a system cut by its budget stops early):", "",
                  "| system | " + " | ".join(f"{n:,}" for n in points) + " |", "|---|" + "---|" * len(points)]
        for r in curves:
            at = dict((n, l1) for n, l1 in r["curve"])
            lines.append(f"| {SHORT[r['system']]} | " + " | ".join(_fmt(at.get(n), ".3f") for n in points) + " |")
    ours = next((r for r in rows if r["system"] == "ours" and "error" not in r), None)
    if ours is not None and ours.get("learn_s"):
        lines.append("")
        lines.append(f"Ours without the final refresh (ingest only): {ours['docs'] / ours['learn_s']:,.0f} documents/s; "
                     f"the refresh took {ours['finish_s']:.1f} s.")
    ratios = _ratios(rows)
    if ratios:
        lines.append("")
        lines.append("Throughput of ours relative to each peer (documents/s, median): " + ", ".join(ratios) + ".")
    return "\n".join(lines)


def _ratios(rows):
    ours = next((r for r in rows if r["system"] == "ours" and "error" not in r), None)
    if ours is None:
        return []
    return [f"{ours['docs_per_s_median'] / r['docs_per_s_median']:,.1f}x {r['system']}"
            for r in rows if r["system"] != "ours" and "error" not in r]


def write_markdown(path: Path, suite: str, header: dict, settings: list[dict], results: dict) -> None:
    parts = [f"# Peer comparison: {suite} suite", "",
             f"Command: `{header['command']}`  ",
             f"Date: {header['date']} (total wall time {header.get('wall_s', float('nan')) / 60:.1f} min)  ",
             f"Machine: {header['machine']}  ",
             f"Versions: {', '.join(header['versions'])}  ",
             "", header["protocol"], ""]
    if header.get("caveats"):
        parts += [header["caveats"], ""]
    for setting in settings:
        rows = results.get(setting["name"], [])
        if not rows:
            parts += [f"## {setting['name']}", "", "Not run.", ""]
            continue
        parts += [f"## {setting['name']}", "", setting["note"], "", setting_table(setting, rows), ""]
    not_run = [s["name"] for s in settings if not results.get(s["name"])] + header.get("not_run", [])
    if not_run:
        parts += ["Settings of this suite not run (no results in this file): " + ", ".join(not_run) + ".", ""]
    path.write_text("\n".join(parts))


def plots(out: Path, suite: str, settings: list[dict], results: dict) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    semi = [s for s in settings if s["kind"] == "semi" and results.get(s["name"])]
    if semi:
        cols = min(len(semi), 4)
        rows_n = math.ceil(len(semi) / cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.6 * cols, 2.9 * rows_n), squeeze=False)
        for ax, s in zip(axes.ravel(), semi):
            for r in results[s["name"]]:
                curve = r.get("curve")
                if not curve:
                    continue
                x, y = zip(*curve)
                ax.plot(x, y, "o-" if len(x) > 1 else "s", label=r["system"], ms=3)
            ax.set_xscale("log")
            ax.set_title(s["name"], fontsize=8)
            ax.set_xlabel("documents seen", fontsize=7)
            ax.set_ylabel("matched L1", fontsize=7)
            ax.tick_params(labelsize=6)
            ax.grid(alpha=0.3)
        for ax in axes.ravel()[len(semi):]:
            ax.axis("off")
        axes.ravel()[0].legend(fontsize=6)
        fig.tight_layout()
        path = out / f"l1-vs-documents-{suite}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    ran = [s for s in settings if results.get(s["name"])]
    if ran:
        systems = sorted({r["system"] for s in ran for r in results[s["name"]] if "error" not in r},
                         key=["ours", "gensim", "sklearn", "river", "tomotopy"].index)
        fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(ran) + 2), 3.2))
        width = 0.8 / max(len(systems), 1)
        for i, system in enumerate(systems):
            values = []
            for s in ran:
                r = next((r for r in results[s["name"]] if r["system"] == system and "error" not in r), None)
                values.append(r["docs_per_s_median"] if r else 0)
            ax.bar([j + i * width for j in range(len(ran))], values, width, label=system)
        ax.set_yscale("log")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ran))])
        ax.set_xticklabels([s["name"] for s in ran], fontsize=6, rotation=20, ha="right")
        ax.set_ylabel("documents/s (log)", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6, ncol=min(len(systems), 5))
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        path = out / f"throughput-{suite}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written
