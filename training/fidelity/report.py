"""The fidelity report: report.json (everything), report.md (tables) and a self-contained report.html
(tables, an inline SVG plot of similarity against turn index, side-by-side diffs of the worst and the
median turn). No external script, style sheet or font: the page works offline and as an attachment.
"""

from __future__ import annotations

import difflib
import html
import json
from pathlib import Path

from training.fidelity.metrics import METRICS, aggregate
from training.judge import DIMENSIONS

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
SHOWN = ("turns", *METRICS)


def judge_summary(rows: list[dict]) -> dict:
    """Per domain and overall: mean (x-1)/4*100 per dimension, their mean, and failures."""
    judged = [r for r in rows if "judge" in r]
    out: dict = {}
    for domain in sorted({r["domain"] for r in judged}) + ["overall"]:
        mine = [r for r in judged if domain in ("overall", r["domain"])]
        ok = [r["judge"]["percent"] for r in mine if r["judge"]["scores"]]
        dims = {d: sum(p[d] for p in ok) / len(ok) for d in DIMENSIONS} if ok else {}
        out[domain] = {
            "samples": len(mine),
            "judge_failures": len(mine) - len(ok),
            **dims,
            "score": sum(dims.values()) / len(dims) if dims else None,
        }
    return out


def build_report(rows_by_system: dict[str, list[dict]], meta: dict, noise: dict) -> dict:
    systems = {name: aggregate(rows) for name, rows in rows_by_system.items() if rows}
    report = {"meta": meta, "noise_floor": noise, "systems": systems, "examples": {}}
    model_tf = rows_by_system.get("model/teacher_forced", [])
    if any("judge" in r for r in model_tf):
        report["judge"] = judge_summary(model_tf)
    ranked = sorted(model_tf, key=lambda r: r["edit_similarity"])
    if ranked:
        report["examples"] = {"worst": ranked[0], "median": ranked[len(ranked) // 2]}
    return report


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _domain_tables(report: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(domain, header, rows): one table per domain, one row per system."""
    systems = report["systems"]
    domains = sorted({d for s in systems.values() for d in s["by_domain"]})
    tables = []
    for domain in [*domains, "overall"]:
        body = []
        for name, agg in systems.items():
            stats = agg["overall"] if domain == "overall" else agg["by_domain"].get(domain)
            if stats:
                body.append([name, *(_fmt(stats.get(m)) for m in SHOWN)])
        tables.append((domain, ["system", *SHOWN], body))
    return tables


def _judge_table(report: dict) -> tuple[list[str], list[list[str]]] | None:
    if "judge" not in report:
        return None
    header = ["domain", "samples", "judge_failures", *DIMENSIONS, "score"]
    body = [[d, *(_fmt(s.get(c)) for c in header[1:])] for d, s in report["judge"].items()]
    return header, body


def write_markdown(report: dict, path: Path) -> None:
    def table(header: list[str], body: list[list[str]]) -> list[str]:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(row) + " |" for row in body]

    meta, noise = report["meta"], report["noise_floor"]
    out = ["# Sim-vs-real fidelity report", "", f"- real data: `{meta.get('real')}`"]
    out += [
        f"- model: `{json.dumps(meta.get('model'))}`",
        f"- baseline model: `{json.dumps(meta.get('baseline'))}`",
    ]
    out.append(f"- turns: {meta.get('turns')}, model requests: {meta.get('requests')}, ")
    out[-1] += f"cache hits: {meta.get('cache_hits')}, request errors: {meta.get('request_errors')}"
    out += ["", "## Noise floor (real vs real)", ""]
    if noise.get("skipped"):
        out.append(f"Skipped: {noise['skipped']}")
    else:
        s = noise["summary"]
        out.append(
            f"{noise['replays']} replays per trajectory in fresh `{noise['backend']}` sandboxes; "
            f"{s['turns_with_volatile']} of {s['turns']} turns hold volatile spans "
            f"({s['volatile_spans']} spans, {s['volatile_char_share']:.1%} of characters)."
        )
        for text, variants in s["examples"].items():
            out.append(f"- `{text[:60]}` vs `{', '.join(v[:40] for v in variants)}`")
    for domain, header, body in _domain_tables(report):
        out += ["", f"## {domain}", "", *table(header, body)]
    judged = _judge_table(report)
    if judged:
        out += ["", "## LLM judge (AgentWorldBench dimensions, (x-1)/4*100)", "", *table(*judged)]
    path.write_text("\n".join(out) + "\n")


def _svg_plot(report: dict, metric: str = "edit_similarity", width: int = 640, height: int = 300) -> str:
    series = {
        name: [(int(k), v[metric]) for k, v in agg["by_turn"].items() if v.get(metric) is not None]
        for name, agg in report["systems"].items()
    }
    turns = [k for points in series.values() for k, _ in points]
    if not turns:
        return "<p>No turns to plot.</p>"
    left, right, top, bottom = 50, 170, 15, 35
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


_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f3f3f3}
table.diff td{font-family:monospace;font-size:12px;white-space:pre-wrap;vertical-align:top}
.diff_add{background:#aaffaa}.diff_chg{background:#ffff77}.diff_sub{background:#ffaaaa}
.diff_next,.diff_header{background:#eee}"""


def _html_table(header: list[str], body: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><tr>{head}</tr>{rows}</table>"


def write_html(report: dict, path: Path, real_text: dict[tuple[str, int], str]) -> None:
    meta, noise = report["meta"], report["noise_floor"]
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>Fidelity report</title>"]
    out.append(f"<style>{_CSS}</style></head><body><h1>Sim-vs-real fidelity report</h1>")
    out.append(f"<pre>{html.escape(json.dumps(meta, indent=2))}</pre>")
    out.append("<h2>Noise floor (real vs real)</h2>")
    if noise.get("skipped"):
        out.append(f"<p>Skipped: {html.escape(noise['skipped'])}</p>")
    else:
        out.append(f"<pre>{html.escape(json.dumps(noise['summary'], indent=2))}</pre>")
    for domain, header, body in _domain_tables(report):
        out.append(f"<h2>{html.escape(domain)}</h2>{_html_table(header, body)}")
    judged = _judge_table(report)
    if judged:
        out.append(f"<h2>LLM judge ((x-1)/4*100)</h2>{_html_table(*judged)}")
    out.append("<h2>Similarity against turn index</h2>" + _svg_plot(report))
    differ = difflib.HtmlDiff(wrapcolumn=100)
    for label, row in report["examples"].items():
        real = real_text.get((row["trajectory_id"], row["turn_idx"]), "")
        predicted = row["prediction"] if row["prediction"] is not None else "[no predicted observation]"
        title = (
            f"{label} model turn: {row['trajectory_id']} turn {row['turn_idx']}, "
            f"edit similarity {row['edit_similarity']:.3f}"
        )
        table = differ.make_table(real.split("\n"), predicted.split("\n"), "real", "predicted")
        out.append(f"<h2>{html.escape(title)}</h2>{table}")
    out.append("</body></html>")
    path.write_text("\n".join(out), encoding="utf-8")


def write_all(report: dict, out: Path, real_text: dict[tuple[str, int], str]) -> dict[str, Path]:
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=2, default=str))
    write_markdown(report, paths["md"])
    write_html(report, paths["html"], real_text)
    return paths
