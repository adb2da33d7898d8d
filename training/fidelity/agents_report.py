"""The task-level report (`python -m training.fidelity agents`): report.json, report.md, report.html and
the printed summary, from episodes.py's per-domain summaries (pooled over every policy run, and per run)
and episode rows, and task_numbers.py's comparison across policies."""

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
    "observation scores below {match} on the domain's main fidelity metric against the real one. "
    "The three numbers: single-step accuracy (the share of same-action simulated turns whose stable spans "
    "are the real observation's, volatile spans known from the WM2Real replay of those turns), success in "
    "the simulator vs in the real sandbox over the pairs rewarded on both sides (inflation: simulated minus "
    "real, 95% paired bootstrap CI over tasks), and WM2Real (the simulated actions replayed in a fresh real "
    "sandbox, judged by the real verifier)."
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
        methods = d["reward"].get("sim_verdict_methods") or {}
        if methods:
            shown = ", ".join(f"{method} {n}" for method, n in sorted(methods.items()))
            out.append(f"{name}: simulated verdicts reached by {shown} (training/simulated_verify.py).")
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
    replayed = [r for r in rows if r["wm2real"] is not None]
    if not replayed:
        out.append(
            "WM2Real was not run (--no-wm2real): no WM2Real rate, and single-step accuracy takes every "
            "span of a real observation as stable (a lower bound)."
        )
    for name, d in domains.items():
        w = d["numbers"]["wm2real"]
        if w["replayed"] > w["rewarded"]:
            top, count = max(w["none_reasons"].items(), key=lambda kv: kv[1])
            out.append(
                f"{name}: {w['replayed'] - w['rewarded']} of {w['replayed']} WM2Real replays have no reward "
                f"({count}: {top})."
            )
    return out


def build(
    domains: dict[str, dict],
    rows: list[dict],
    meta: dict,
    policies: dict[str, dict] | None = None,
    across: dict[str, dict] | None = None,
) -> dict:
    """`domains` pooled over every run; `policies` {run: its own data paths and per-domain summaries};
    `across` {domain: task_numbers.across_policies}."""
    return {
        "meta": meta,
        "notes": notes(domains, rows),
        "domains": domains,
        "policies": policies or {},
        "across_policies": across or {},
        "episodes": rows,
    }


def _share(n: int, k: int, rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.3f} ({k}/{n})"


def _interval(d: dict | None) -> str:
    if not d:
        return "-"
    ci = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    return f"{d['difference']:+.3f}{ci}"


def numbers_row(name: str, d: dict) -> list[str]:
    n, k = d["numbers"], d["reward"]["kappa"]
    one, succ, wm = n["single_step"], n["success"], n["wm2real"]
    rated, real_hits, sim_hits = succ["rated"], succ["real_successes"], succ["sim_successes"]
    return [
        name,
        str(d["pairs"]),
        _share(one["turns"], one["right"], one["accuracy"]),
        str(one["turns_with_replay_spans"]),
        _share(rated, real_hits, succ["real_rate"]),
        _share(rated, sim_hits, succ["sim_rate"]),
        _interval(succ["inflation"]),
        "-" if k["value"] is None else f"{k['value']:.3f}",
        _share(wm["rewarded"], wm["successes"], wm["success_rate"]) + f" of {wm['replayed']} replayed",
    ]


def numbers_table(report: dict, domain: str) -> tuple[list[str], list[list[str]]]:
    """One row per policy run, and `all` pooled when there are several."""
    header = ["policy", "pairs", "single-step accuracy", "turns with replay spans", "real success"]
    header += ["sim success", "inflation (sim - real) [95% CI]", "kappa", "WM2Real success"]
    body = [
        numbers_row(name, p["domains"][domain])
        for name, p in report["policies"].items()
        if domain in p["domains"]
    ]
    if len(body) != 1:
        body.append(numbers_row("all", report["domains"][domain]))
    return header, body


def across_lines(report: dict, domain: str) -> list[str]:
    a = report["across_policies"].get(domain)
    if not a:
        return []
    rates = ", ".join(
        f"{n}: sim {fmt(s)}, real {fmt(r)}"
        for n, s, r in zip(a["policies"], a["sim_rates"], a["real_rates"], strict=True)
    )
    rho = a["spearman"]
    said = (
        f"{rho['value']:.3f} over {rho['n']} policies"
        if rho["value"] is not None
        else f"undefined ({rho['undefined']})"
    )
    return [
        f"success rates by policy: {rates or '-'}",
        f"Spearman rank correlation of simulated and real success rates: {said}",
        "inflation (simulated minus real success) over every policy's rated pairs: "
        + _interval(a["inflation"]),
    ]


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
    header += ["sim reward", "sim verifier", "diverged at", "how", "single-step right", "WM2Real reward"]
    several = len({r["run"] for r in rows}) > 1
    header = ["policy", *header] if several else header
    body = []
    for r in rows:
        if r["domain"] != domain:
            continue
        real, sim, div, one, wm = r["real"], r["sim"], r["divergence"], r["single_step"], r["wm2real"]
        body.append(
            ([r["run"]] if several else [])
            + [r["task_id"], r["slot"], str(real["steps"]), real["status"], fmt(real["reward"])]
            + [str(sim["steps"]), sim["status"], fmt(sim["reward"]), sim["verifier"] or "-"]
            + [fmt(div["turn"]), div["kind"], f"{one['right']}/{one['turns']}"]
            + [
                "-"
                if wm is None
                else fmt(wm["reward"])
                if wm["reward"] is not None
                else f"none ({wm['status']})"
            ]
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
        out += ["### Three numbers", "", *_md_table(*numbers_table(report, name)), ""]
        out += [*(f"- {line}" for line in across_lines(report, name)), ""]
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
        parts.append(f"<h2>{e(name)}: {d['pairs']} paired episodes</h2><h3>Three numbers</h3>")
        parts.append(_html_table(*numbers_table(report, name)))
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in across_lines(report, name)) + "</ul>")
        parts.append("<h3>Task reward</h3>")
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
        header, body = numbers_table(report, name)
        for row in body:
            out.append(
                f"  {row[0]}: single-step accuracy {row[2]}; success real {row[4]}, sim {row[5]}, "
                f"inflation {row[6]}; WM2Real {row[8]}"
            )
        if len(report["policies"]) > 1:
            out += [f"  {line}" for line in across_lines(report, name)[1:]]
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
