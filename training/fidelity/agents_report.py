"""The task-level report (`python -m training.fidelity agents`): report.json, report.md, report.html and
the printed summary, from episodes.compare_datasets' per-domain summaries and episode rows."""

from __future__ import annotations

import html
import json
from pathlib import Path

from training.fidelity.agreement import VERDICTS
from training.fidelity.report import fmt

TITLE = "Task-level sim-vs-real report"
INTRO = (
    "The same policy, tasks and seeds on real sandboxes and on the world model's simulated ones, episode "
    "by episode (paired by task and episode slot). A reward counts as success at >= {success}; `none` is "
    "no reward (no verifier, or one that could not say). Kappa is over the episodes rewarded on both "
    "sides. Divergence: the first turn whose actions differ or, with the same actions, whose simulated "
    "observation scores below {match} on the domain's main fidelity metric against the real one."
)


def notes(domains: dict[str, dict], rows: list[dict]) -> list[str]:
    """Plain sentences a reader needs before trusting the numbers."""
    out = []
    for name, d in domains.items():
        if d["real_only"] or d["sim_only"]:
            out.append(
                f"{name}: {len(d['real_only'])} real and {len(d['sim_only'])} simulated episodes have no "
                "partner (a run that stopped early, or datasets of different runs) and are left out."
            )
        kappa = d["reward"]["kappa"]
        if kappa["undefined"]:
            out.append(f"{name}: kappa is undefined: {kappa['undefined']}.")
        for side, label in (("real", "real"), ("sim", "simulated")):
            reasons = d["reward"][f"{side}_none_reasons"]
            missing = sum(reasons.values())
            if missing:
                top, count = max(reasons.items(), key=lambda kv: kv[1])
                out.append(
                    f"{name}: {missing} of {d['pairs']} {label} episodes have no reward ({count}: {top})."
                )
    mixed = [r for r in rows if r["policy"][0] != r["policy"][1]]
    if mixed:
        out.append(
            f"{len(mixed)} pairs were played by different policies: "
            f"{sorted({tuple(r['policy']) for r in mixed})}."
        )
    unmarked = [r for r in rows if not r["sim"]["simulated"]]
    if unmarked:
        out.append(f"{len(unmarked)} 'simulated' episodes are not marked simulated in their provenance.")
    return out


def build(domains: dict[str, dict], rows: list[dict], meta: dict) -> dict:
    return {"meta": meta, "notes": notes(domains, rows), "domains": domains, "episodes": rows}


def confusion_table(domain: dict) -> tuple[list[str], list[list[str]]]:
    matrix = domain["reward"]["confusion"]
    header = ["real \\ simulated", *VERDICTS]
    return header, [[a, *(str(matrix[a][b]) for b in VERDICTS)] for a in VERDICTS]


def kappa_line(domain: dict) -> str:
    k = domain["reward"]["kappa"]
    if k["value"] is None:
        return f"Cohen's kappa: undefined ({k['undefined']})"
    return (
        f"Cohen's kappa {k['value']:.3f} over {k['n']} episodes (observed agreement "
        f"{k['observed_agreement']:.3f}, chance {k['expected_agreement']:.3f})"
    )


def steps_table(domain: dict) -> tuple[list[str], list[list[str]]]:
    s = domain["steps"]
    d = s["difference"] or {}
    ci = "-" if d.get("ci_low") is None else f"[{d['ci_low']:.2f}, {d['ci_high']:.2f}]"
    header = ["real mean", "sim mean", "sim - real", "95% CI", "median", "equal", "sim shorter", "sim longer"]
    body = [
        [fmt(s["real_mean"]), fmt(s["sim_mean"]), fmt(d.get("difference")), ci, fmt(s["difference_median"])]
        + [str(s["equal"]), str(s["sim_shorter"]), str(s["sim_longer"])]
    ]
    return header, body


def divergence_lines(domain: dict) -> list[str]:
    v = domain["divergence"]
    kinds = ", ".join(f"{k} {n}" for k, n in v["by_kind"].items())
    after = ", ".join(f"{k}: {share:.0%}" for k, share in v["undiverged_after"].items()) or "-"
    match = ", ".join(f"{k}: {fmt(m['mean'])} (n={m['pairs']})" for k, m in v["match_by_turn"].items()) or "-"
    return [
        f"first divergence by kind: {kinds}; turn mean {fmt(v['turn_mean'])}, median {fmt(v['turn_median'])}",
        f"pairs not yet diverged after turn k: {after}",
        f"observation match ({' > '.join(v['metric'])}) of same-action turns, by turn: {match}",
    ]


def episode_table(rows: list[dict], domain: str) -> tuple[list[str], list[list[str]]]:
    header = ["task", "slot", "real steps", "real status", "real reward", "sim steps", "sim status"]
    header += ["sim reward", "sim verifier", "diverged at", "how"]
    body = []
    for r in rows:
        if r["domain"] != domain:
            continue
        real, sim, div = r["real"], r["sim"], r["divergence"]
        body.append(
            [r["task_id"], r["slot"], str(real["steps"]), real["status"], fmt(real["reward"])]
            + [str(sim["steps"]), sim["status"], fmt(sim["reward"]), sim["verifier"] or "-"]
            + [fmt(div["turn"]), div["kind"]]
        )
    return header, body


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    cells = [[c.replace("|", "\\|") for c in row] for row in [header, *body]]
    return ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(row) + " |" for row in cells[1:]
    ]


def write_markdown(report: dict, path: Path) -> None:
    meta = report["meta"]
    out = [f"# {TITLE}", "", INTRO.format(success=meta["success_threshold"], match=meta["match_threshold"])]
    out += ["", *(f"- {n}" for n in report["notes"])]
    for name, d in report["domains"].items():
        out += ["", f"## {name}: {d['pairs']} paired episodes ({', '.join(d['policies']) or '-'})", ""]
        out += ["### Task reward", "", *_md_table(*confusion_table(d)), "", kappa_line(d), ""]
        out += ["### Steps to the end", "", *_md_table(*steps_table(d)), ""]
        out += ["### Divergence", "", *(f"- {line}" for line in divergence_lines(d)), ""]
        out += ["### Episodes", "", *_md_table(*episode_table(report["episodes"], name))]
    out += ["", "## Configuration", "", "```json", json.dumps(meta, indent=1, default=str), "```"]
    path.write_text("\n".join(out) + "\n")


def _html_table(header: list[str], body: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><tr>{head}</tr>{rows}</table>"


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}table{border-collapse:collapse;"
    "margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f3f3f3}"
)


def write_html(report: dict, path: Path) -> None:
    """Self-contained like the observation-level report.html: no script, style sheet or font fetched."""
    meta = report["meta"]
    e = html.escape
    parts = [f"<!doctype html><meta charset=utf-8><title>{TITLE}</title><style>{_CSS}</style>"]
    parts += [
        f"<h1>{TITLE}</h1>",
        f"<p>{e(INTRO.format(success=meta['success_threshold'], match=meta['match_threshold']))}</p>",
    ]
    parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in report["notes"]) + "</ul>")
    for name, d in report["domains"].items():
        parts.append(f"<h2>{e(name)}: {d['pairs']} paired episodes</h2><h3>Task reward</h3>")
        parts += [_html_table(*confusion_table(d)), f"<p>{e(kappa_line(d))}</p>", "<h3>Steps to the end</h3>"]
        parts += [_html_table(*steps_table(d)), "<h3>Divergence</h3>"]
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in divergence_lines(d)) + "</ul>")
        parts += ["<h3>Episodes</h3>", _html_table(*episode_table(report["episodes"], name))]
    parts.append(f"<h2>Configuration</h2><pre>{e(json.dumps(meta, indent=1, default=str))}</pre>")
    path.write_text("\n".join(parts) + "\n")


def write_all(report: dict, out: Path) -> dict[str, Path]:
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report, indent=1, default=str) + "\n")
    write_markdown(report, paths["md"])
    write_html(report, paths["html"])
    return paths


def summary_lines(report: dict) -> list[str]:
    out = []
    for name, d in report["domains"].items():
        r, s = d["reward"], d["steps"]
        out.append(f"{name}: {d['pairs']} paired episodes")
        matrix = r["confusion"]
        cells = ", ".join(
            f"real {a}/sim {b} {matrix[a][b]}" for a in VERDICTS for b in VERDICTS if matrix[a][b]
        )
        out.append(f"  reward verdicts: {cells or 'none'}")
        out.append(f"  {kappa_line(d)}")
        out.append(
            f"  steps: real {fmt(s['real_mean'])}, sim {fmt(s['sim_mean'])}, "
            f"equal in {s['equal']} of {d['pairs']}"
        )
        out += [f"  {line}" for line in divergence_lines(d)[:1]]
    out += [f"note: {n}" for n in report["notes"]]
    return out
