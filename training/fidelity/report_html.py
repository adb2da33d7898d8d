"""report.html, read top down: the headline (per domain, each system against the real-vs-real ceiling,
and the notes), the plots, then every compared model turn with its side-by-side diff, worst first and
filterable by domain and mode; the full tables and the configuration are collapsed at the end.

Self-contained: no script, style sheet, image or font from elsewhere, so it works offline and as an
attachment. The filters are radio buttons and CSS sibling selectors, which need no script.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from pathlib import Path

from training.fidelity.comparison import (
    comparison_table,
    difference_text,
    find_difference,
    rate_table,
    summary_lines,
)
from training.fidelity.likelihood import CAPTION as LIKELIHOOD_CAPTION
from training.fidelity.likelihood import likelihood_lines, likelihood_table
from training.fidelity.report import (
    COMPARISON_CAPTION,
    HEADLINE_CAPTION,
    NO_GENERATION,
    domain_tables,
    headline_table,
    judge_table,
    noise_sentence,
    write_markdown,
)

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
# Beyond this many turns the page gets too heavy for a browser; turns.jsonl holds them all.
MAX_TURNS_SHOWN = 2000

_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f3f3f3}
table.headline td,table.headline th{font-size:15px;padding:5px 12px}
ul.notes li{margin:.3em 0}
details.turn{border:1px solid #ddd;margin:2px 0;padding:2px 6px}
details.turn>summary{cursor:pointer;font-family:monospace;font-size:13px}
pre.action{background:#f6f6f6;padding:4px;font-size:12px;white-space:pre-wrap}
table.diff td{font-family:monospace;font-size:12px;white-space:pre-wrap;vertical-align:top}
.diff_add{background:#aaffaa}.diff_chg{background:#ffff77}.diff_sub{background:#ffaaaa}
.diff_next,.diff_header{background:#eee}
.browser>label{margin-right:1em;font-size:13px}"""


def _table(header: list[str], body: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><tr>{head}</tr>{rows}</table>"


def svg_plot(report: dict, metric: str, width: int = 640, height: int = 300) -> str:
    """Each system's mean `metric` against turn index, as an inline SVG line plot."""
    series = {
        name: [(int(k), v[metric]) for k, v in agg["by_turn"].items() if v.get(metric) is not None]
        for name, agg in report["systems"].items()
    }
    turns = [k for points in series.values() for k, _ in points]
    if not turns:
        return "<p>No turns to plot.</p>"
    left, right, top, bottom = 50, 190, 15, 35
    span = max(1, max(turns) - 1)

    def x(k: int) -> float:
        return left + (k - 1) / span * (width - left - right)

    def y(v: float) -> float:
        return top + (1 - v) * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick)}" y2="{y(tick)}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y(tick) + 4}" text-anchor="end" font-size="11">{tick:g}</text>'
        )
    for k in sorted(set(turns)):
        parts.append(
            f'<text x="{x(k)}" y="{height - bottom + 15}" text-anchor="middle" font-size="11">{k}</text>'
        )
    parts.append(
        f'<text x="{(width - right + left) / 2}" y="{height - 4}" text-anchor="middle" font-size="12">'
        f"turn index ({html.escape(metric)})</text>"
    )
    for i, (name, points) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        coords = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in sorted(points))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        for k, v in points:
            parts.append(f'<circle cx="{x(k):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>')
        ly = top + 16 * i + 10
        parts.append(f'<rect x="{width - right + 10}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{width - right + 24}" y="{ly + 1}" font-size="11">{html.escape(name)}</text>')
    return "\n".join(parts) + "\n</svg>"


def svg_comparison(comparison: dict, width: int = 780) -> str:
    """Per domain, one row per system: its main metric as a bar on [0, 1] (the dashed line is the
    real-vs-real ceiling) and, right, its difference to the reference system (the base, else the
    repeat-previous baseline) with the paired bootstrap 95% interval as a whisker around a zero line."""
    names = comparison["systems"]
    reference = comparison["reference"] or comparison["baseline"]
    diffs = {
        (domain, n): find_difference(entry, n, reference)
        for domain, entry in comparison["domains"].items()
        for n in names
        if n != reference
    }
    ends = [
        v for d in diffs.values() if d for v in (d["ci_low"], d["ci_high"], d["difference"]) if v is not None
    ]
    reach = max([0.05, *(abs(v) for v in ends)])  # the difference axis, symmetric around 0
    label_w, row_h, head_h = 150, 18, 22
    bar_x, bar_w = label_w + 10, 250
    diff_x, diff_w = bar_x + bar_w + 40, width - bar_x - bar_w - 60
    rows = len(comparison["domains"]) * (len(names) + 1)
    height = head_h + rows * row_h + 30

    def bx(v: float) -> float:
        return bar_x + v * bar_w

    def dx(v: float) -> float:
        return diff_x + (v + reach) / (2 * reach) * diff_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="comparison" width="{width}" height="{height}" '
        'role="img">'
    ]
    parts.append(f'<text x="{bar_x}" y="14" font-size="12">main metric (dashed: real vs real)</text>')
    parts.append(
        f'<text x="{diff_x}" y="14" font-size="12">minus {html.escape(str(reference))} (95% CI)</text>'
    )
    y = head_h
    for domain, entry in comparison["domains"].items():
        parts.append(
            f'<text x="4" y="{y + 13}" font-size="12" font-weight="bold">{html.escape(domain)} '
            f"({html.escape(entry['main_metric'])})</text>"
        )
        top = y + row_h
        bottom = top + len(names) * row_h
        parts.append(f'<line x1="{dx(0):.1f}" x2="{dx(0):.1f}" y1="{top}" y2="{bottom}" stroke="#888"/>')
        if entry["ceiling"] is not None:
            cx = bx(entry["ceiling"])
            parts.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{bottom}" stroke="#000" '
                'stroke-dasharray="4 3"/>'
            )
        y = top
        for i, name in enumerate(names):
            color = COLORS[i % len(COLORS)]
            mid = y + row_h / 2
            parts.append(
                f'<text x="{label_w}" y="{mid + 4}" text-anchor="end" font-size="11">'
                f"{html.escape(name)}</text>"
            )
            value = entry["values"].get(name)
            if value is not None:
                parts.append(
                    f'<rect x="{bar_x}" y="{y + 3}" width="{bx(value) - bar_x:.1f}" height="{row_h - 6}" '
                    f'fill="{color}"><title>{html.escape(name)}: {value:.3f}</title></rect>'
                )
                parts.append(f'<text x="{bx(value) + 4:.1f}" y="{mid + 4}" font-size="10">{value:.3f}</text>')
            d = diffs.get((domain, name))
            if name == reference:
                parts.append(f'<text x="{dx(0) + 6:.1f}" y="{mid + 4}" font-size="10">reference</text>')
            if d is not None:
                if d["ci_low"] is not None:
                    parts.append(
                        f'<line x1="{dx(d["ci_low"]):.1f}" x2="{dx(d["ci_high"]):.1f}" y1="{mid}" y2="{mid}" '
                        f'stroke="{color}" stroke-width="2"/>'
                    )
                parts.append(
                    f'<circle class="difference" cx="{dx(d["difference"]):.1f}" cy="{mid}" r="4" '
                    f'fill="{color}"><title>{html.escape(name)} - {html.escape(str(reference))}: '
                    f"{html.escape(difference_text(d))}</title></circle>"
                )
            y += row_h
    for tick in (-reach, 0.0, reach):
        parts.append(
            f'<text x="{dx(tick):.1f}" y="{height - 10}" text-anchor="middle" font-size="10">'
            f"{tick:+.2f}</text>"
        )
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{bx(tick):.1f}" y="{height - 10}" text-anchor="middle" font-size="10">{tick:g}</text>'
        )
    return "\n".join(parts) + "\n</svg>"


def _key(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)


def _summary_line(turn: dict) -> str:
    stable = turn["stable_exact"]
    stable_text = ("yes" if stable else "no") if isinstance(stable, bool) else f"{stable:.0%}"
    parts = [
        f"{turn['edit_similarity']:.3f} edit similarity",
        f"stable exact {stable_text}",
        "tagged" if turn["tagged"] else "untagged",
        turn["domain"],
        f"{turn['trajectory_id']} turn {turn['turn_idx']}",
        turn["mode"].replace("_", "-"),
        f"{turn['volatile_share']:.0%} volatile",
    ]
    if turn.get("error"):
        parts.append(f"request error: {turn['error'][:80]}")
    return " · ".join(parts)


def _radio(group: str, key: str, label: str, checked: bool = False) -> str:
    on = " checked" if checked else ""
    return (
        f'<input type="radio" name="{group}" id="{key}"{on}><label for="{key}">{html.escape(label)}</label>'
    )


def turn_browser(turns: list[dict]) -> str:
    """Every turn, worst edit similarity first, each a collapsed side-by-side diff; radio buttons
    filter by domain and by mode."""
    ranked = sorted(
        turns, key=lambda r: (r["edit_similarity"], r["domain"], r["trajectory_id"], r["turn_idx"])
    )
    shown = ranked[:MAX_TURNS_SHOWN]
    groups = {
        "dom": sorted({r["domain"] for r in turns}),
        "mode": sorted({r["mode"] for r in turns}),
    }
    rules, inputs = [], []
    for group, values in groups.items():
        inputs.append(_radio(group, f"{group}-all", "all", checked=True))
        for value in values:
            key = f"{group}-{_key(value)}"
            inputs.append(_radio(group, key, value))
            rules.append(f"#{key}:checked~.turns .turn:not(.{key}){{display:none}}")
        inputs.append("<br>")
    differ = difflib.HtmlDiff(wrapcolumn=100)
    items = []
    for turn in shown:
        classes = f"turn dom-{_key(turn['domain'])} mode-{_key(turn['mode'])}"
        diff = differ.make_table(
            turn["real"].split("\n"),
            turn["prediction"].split("\n"),
            "real (recorded)",
            "predicted (as scored)",
        )
        items.append(
            f'<details class="{classes}"><summary>{html.escape(_summary_line(turn))}</summary>'
            f'<pre class="action">{html.escape(turn["action"])}</pre>{diff}</details>'
        )
    count = f"{len(shown)} of {len(turns)} turns" if len(shown) < len(turns) else f"{len(turns)} turns"
    return (
        f"<style>{''.join(rules)}</style><p>{count}; turns.jsonl holds every scored row.</p>"
        f'<section class="browser">{"".join(inputs)}<div class="turns">{"".join(items)}</div></section>'
    )


def write_html(report: dict, path: Path, turns: list[dict]) -> None:
    noise = report["noise_floor"]
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>Fidelity report</title>"]
    out.append(f"<style>{_CSS}</style></head><body><h1>Sim-vs-real fidelity</h1>")
    if report["systems"]:
        out.append(f"<p>{HEADLINE_CAPTION}</p>")
        out.append(_table(*headline_table(report), cls="headline"))
    else:
        out.append(f"<p>{html.escape(NO_GENERATION)}</p>")
    if report["notes"]:
        out.append(
            '<ul class="notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in report["notes"]) + "</ul>"
        )
    out.append(f"<p>{html.escape(noise_sentence(noise))}</p>")
    if "comparison" in report:
        comparison = report["comparison"]
        out.append(f"<h2>Comparison</h2><p>{html.escape(COMPARISON_CAPTION)}</p>")
        out.append(svg_comparison(comparison))
        out.append(_table(*comparison_table(comparison)))
        out.append(
            "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(comparison)) + "</ul>"
        )
        out.append(_table(*rate_table(comparison)))
    if "likelihood" in report:
        section = report["likelihood"]
        out.append(f"<h2>Likelihood</h2><p>{html.escape(LIKELIHOOD_CAPTION)}</p>")
        out.append(_table(*likelihood_table(section), cls="likelihood"))
        lines = likelihood_lines(section)
        out.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")
    judged = judge_table(report)
    if judged:
        out.append(f"<h2>LLM judge ((x-1)/4*100)</h2>{_table(*judged)}")
    if report["systems"]:
        out.append("<h2>By turn index</h2>")
        out.append(svg_plot(report, "edit_similarity") + svg_plot(report, "stable_exact"))
        out.append("<h2>Every compared model turn, worst first</h2>" + turn_browser(turns))
    out.append("<details><summary>All metrics by domain</summary>")
    for domain, header, body in domain_tables(report):
        out.append(f"<h3>{html.escape(domain)}</h3>{_table(header, body)}")
    out.append("</details>")
    examples = noise.get("summary", {}).get("examples", {})
    if examples:
        body = [[text[:80], ", ".join(v[:40] for v in variants)] for text, variants in examples.items()]
        out.append("<details><summary>Volatile spans seen</summary>")
        out.append(_table(["recorded", "in other real runs"], body) + "</details>")
    out.append("<details><summary>Configuration</summary>")
    config = {"meta": report["meta"], "noise_floor": {k: v for k, v in noise.items() if k != "real_vs_real"}}
    out.append(f"<pre>{html.escape(json.dumps(config, indent=2, default=str))}</pre></details>")
    out.append("</body></html>")
    path.write_text("\n".join(out), encoding="utf-8")


def write_all(report: dict, out: Path, turns: list[dict]) -> dict[str, Path]:
    """report.json, report.md and report.html under `out`; `turns` feed the HTML turn browser."""
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=2, default=str))
    write_markdown(report, paths["md"])
    write_html(report, paths["html"], turns)
    return paths
