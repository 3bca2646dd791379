"""Results as JSON and Markdown tables, rewritten after every system so partial runs are readable."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.common import machine
from benchmarks.peers.ours import Ours

from .systems import PEERS, describe_peer
from .variants import describe

TOP_WORDS_FOR = ("reuters",)


def _label(system: str, variants: dict) -> str:
    if system in variants:
        return f"ours `{system}` ({describe(variants[system])})"
    return describe_peer(system)


def _seconds(record: dict) -> str:
    if "learn_s" not in record:
        return "| |"
    return f"| {record['learn_s']:.1f} | {record['finish_s']:.1f} |"


def _kept(record: dict) -> str:
    """Ours: the refinement iterate each checkpoint's refresh kept (0 = the anchor seed)."""
    kept = [t.get("refine_kept_iteration", t.get("refine_best_iteration")) for t in record.get("checkpoint_times", [])]
    return ", ".join("-" if k is None else str(k) for k in kept) if any(k is not None for k in kept) else ""


def synthetic_tables(records: list[dict], variants: dict, checkpoints) -> list[str]:
    lines = []
    for setting in dict.fromkeys(r["setting"] for r in records):
        rows = [r for r in records if r["setting"] == setting]
        kind = "Separable truth" if setting.startswith("separable-") else "Gibbs truth"
        lines += [f"#### {kind}: {setting}", "", f"Truth: {rows[0]['truth']}.", "",
                  "| system | " + " | ".join(f"L1 @ {c // 1000}k" for c in checkpoints) + " | learn s | finish s | refinement iterate kept |",
                  "|---|" + "---:|" * (len(checkpoints) + 3)]
        for r in rows:
            failed = {int(c) for c in r.get("checkpoint_errors", {})}
            cells = [f"{r['l1'][c]:.3f}" if c in r["l1"] else ("failed" if "error" in r or c in failed else "")
                     for c in checkpoints]
            lines.append(f"| {_label(r['system'], variants)} | " + " | ".join(cells) + f" {_seconds(r)} {_kept(r)} |")
        lines.append("")
    return lines


def summary(records: list[dict], variants: dict, documents: int) -> list[str]:
    """One row per setting, one column per system: matched L1 at ``documents`` (best in bold)."""
    systems = list(dict.fromkeys(r["system"] for r in records if documents in r["l1"]))
    lines = [f"Matched L1 at {documents // 1000}k documents (lower is better; bold: best online system):", "",
             "| setting | " + " | ".join(s if s in variants else describe_peer(s).split()[0] for s in systems) + " |",
             "|---|" + "---:|" * len(systems)]
    for setting in dict.fromkeys(r["setting"] for r in records):
        values = {r["system"]: r["l1"].get(documents) for r in records if r["setting"] == setting}
        online = [v for s, v in values.items() if v is not None and s != "tomotopy"]
        best = min(online) if online else None
        cells = ["" if values.get(s) is None else
                 (f"**{values[s]:.3f}**" if values[s] == best and s != "tomotopy" else f"{values[s]:.3f}")
                 for s in systems]
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    return lines + [""]


def real_tables(records: list[dict], variants: dict) -> list[str]:
    lines = []
    for setting in dict.fromkeys(r["setting"] for r in records):
        rows = [r for r in records if r["setting"] == setting]
        lines += [f"#### Real text: {setting}", "", f"Corpus: {rows[0]['corpus']}.", "",
                  "| system | NPMI (test) | uniqueness | held-out LL / token (ours: with background) "
                  "| topics per top-8 word (max / mean) | the same, displayed top 8 | learn s | finish s "
                  "| refinement iterate kept |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            background = f" ({r['heldout_ll_background']:.3f})" if "heldout_ll_background" in r else ""
            shown = (f" {r['shared_shown_max']} / {r['shared_shown_mean']:.2f} |" if "shared_shown_max" in r
                     else " |")  # records written before the displayed words were counted
            cells = ("| failed | | | | |" if "npmi" not in r else
                     f"| {r['npmi']:.3f} | {r['uniqueness']:.2f} | {r['heldout_ll']:.3f}{background} | "
                     f"{r['shared_max']} / {r['shared_mean']:.2f} |{shown}")
            lines.append(f"| {_label(r['system'], variants)} {cells} {_seconds(r)[2:]} {_kept(r)} |")
        lines.append("")
        if setting.split()[0] in TOP_WORDS_FOR:
            for r in rows:
                if "top_words" in r:
                    lines += [f"Top 8 words, {_label(r['system'], variants)}, {setting}:", "",
                              *[f"{k}. {words}" for k, words in enumerate(r["top_words"])], ""]
    return lines


def errors(records: list[dict]) -> list[str]:
    lines = []
    for r in records:
        if "error" in r:
            lines += [f"**{r['system']} failed on {r['setting']}:**", "", "```", r["error"].rstrip(), "```", ""]
        for documents, error in r.get("checkpoint_errors", {}).items():
            lines += [f"**{r['system']}'s refresh failed at {documents} documents of {r['setting']}:** "
                      f"`{error.rstrip().splitlines()[-1]}`", ""]
    return lines


def markdown(name: str, command: str, synthetic: list[dict], real: list[dict], variants: dict, checkpoints,
             stamp: str, machine_line: str, ours: str) -> str:
    head = [f"### Quality protocol: `{name}`", "", f"Command: `{command}`", "",
            f"Machine: {machine_line}. Date: {stamp}. {ours}. One process; tomotopy's batch reference trains with "
            f"`workers=0` (all cores), as the peers adapter does.", "",
            "Times are wall seconds in `learn` (all chunks) and in `finish` (ours: every `refresh()`; "
            "tomotopy: the Gibbs sweeps), summed over checkpoints.", ""]
    overview = [line for c in checkpoints if c >= 20_000 for line in summary(synthetic, variants, c)] if synthetic else []
    body = overview + synthetic_tables(synthetic, variants, checkpoints) + real_tables(real, variants) + errors(synthetic + real)
    return "\n".join(head + body) + "\n"


def write(out: Path, name: str, command: str, synthetic: list[dict], real: list[dict], variants: dict,
          checkpoints) -> Path:
    """Write ``<out>/<name>.json`` and ``<out>/<name>.md``; returns the Markdown path."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = markdown(name, command, synthetic, real, variants, checkpoints, stamp, machine(), Ours.version())
    (out / f"{name}.md").write_text(text)
    payload = {"command": command, "machine": machine(), "date": stamp, "ours": Ours.version(), "variants": variants,
               "peers": {p: describe_peer(p) for p in PEERS}, "synthetic": synthetic, "real": real}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return out / f"{name}.md"


def render(path: Path) -> Path:
    """Rewrite the Markdown beside results file ``path`` (``<name>.json``) from the JSON alone."""
    data = json.loads(Path(path).read_text())
    for record in data["synthetic"]:
        record["l1"] = {int(k): v for k, v in record["l1"].items()}
    checkpoints = sorted({c for r in data["synthetic"] for c in r["l1"]})
    name = Path(path).stem
    text = markdown(name, data["command"], data["synthetic"], data["real"], data["variants"], checkpoints,
                    data["date"], data["machine"], data.get("ours", "streamtopics @ ?"))
    target = Path(path).with_suffix(".md")
    target.write_text(text)
    return target
