"""The fidelity report's content, report.json and report.md (report_html.py writes report.html).

Both open with the headline: per domain, each system's edit similarity as a share of the real-vs-real
ceiling (what a second real run of the same actions achieves), and plain sentences for what changes
how the numbers read: no ceiling, a model that never used the format, failed replays, turns that are
mostly volatile.
"""

from __future__ import annotations

import json
from pathlib import Path

from training.fidelity.comparison import compare, comparison_table, rate_table, summary_lines
from training.fidelity.domain_metrics import domain_metrics
from training.fidelity.likelihood import CAPTION as LIKELIHOOD_CAPTION
from training.fidelity.likelihood import likelihood_lines, likelihood_table
from training.fidelity.metrics import METRICS, aggregate
from training.rewards.judge import DIMENSIONS, summarise

CEILING = "real_vs_real"
HEADLINE_METRIC = "edit_similarity"
HEADLINE_CAPTION = (
    "Edit similarity of each system per domain; in brackets, its share of the real-vs-real ceiling."
)
SHOWN = ("turns", *METRICS)
MODEL_SERIES = ("model/teacher_forced", "model/closed_loop")
TEACHER_FORCED_SUFFIX = "/teacher_forced"
COMPARISON_CAPTION = (
    "Teacher-forced, on the same held-out turns: each system's main metric per domain (the first of "
    "the domain's metrics that applies to a turn, else edit similarity), the real-vs-real ceiling beside "
    "them, and each difference with its paired bootstrap 95% interval over trajectories; * marks an "
    "interval that excludes 0."
)


def judge_summary(rows: list[dict]) -> dict:
    """Per domain and overall: mean (x-1)/4*100 per dimension, their mean, and failures."""
    judged = [r for r in rows if "judge" in r]
    out: dict = {}
    for domain in sorted({r["domain"] for r in judged}) + ["overall"]:
        mine = [r for r in judged if domain in ("overall", r["domain"])]
        ok = [r["judge"]["percent"] for r in mine if r["judge"]["scores"]]
        # summarise: a dimension the public judge left unscored is out of that dimension's mean only
        out[domain] = {"samples": len(mine), "judge_failures": len(mine) - len(ok), **summarise(ok)}
    return out


def headline(systems: dict[str, dict]) -> dict[str, dict]:
    """Per domain: the ceiling (None without replays) and, per system, its headline metric, that as a
    share of the ceiling, stable-exact and the format columns."""
    ceiling_by_domain = systems.get(CEILING, {}).get("by_domain", {})
    domains = sorted({d for name, agg in systems.items() if name != CEILING for d in agg["by_domain"]})
    out = {}
    for domain in domains:
        ceiling = ceiling_by_domain.get(domain)
        top = ceiling[HEADLINE_METRIC] if ceiling else None
        entries = {}
        for name, agg in systems.items():
            stats = agg["by_domain"].get(domain)
            if name == CEILING or not stats:
                continue
            value = stats[HEADLINE_METRIC]
            entries[name] = {
                "turns": stats["turns"],
                HEADLINE_METRIC: value,
                "share_of_ceiling": value / top if top else None,
                "stable_exact": stats["stable_exact"],
                "tagged": stats["tagged"],
                "format_valid": stats["format_valid"],
            }
        out[domain] = {
            "ceiling": None
            if ceiling is None
            else {m: ceiling[m] for m in ("turns", HEADLINE_METRIC, "stable_exact")},
            "systems": entries,
        }
    return out


def notes(rows_by_system: dict[str, list[dict]], meta: dict, noise: dict) -> list[str]:
    """Plain sentences a reader needs before trusting the numbers."""
    out = []
    if noise.get("skipped"):
        out.append(noise["skipped"][0].upper() + noise["skipped"][1:])
    replies = [r for name in MODEL_SERIES for r in rows_by_system.get(name, []) if not r.get("error")]
    tagged = sum(1 for r in replies if r["tagged"])
    if replies and tagged == 0:
        out.append(
            f"The model never produced the <predicted_observation> format ({len(replies)} replies, none "
            "tagged). Its content is read from the untagged replies as the public evaluator does, and its "
            "format validity is 0."
        )
    elif tagged < len(replies):
        out.append(f"{len(replies) - tagged} of {len(replies)} model replies lacked the format tags.")
    empty = sum(1 for r in replies if not r["prediction"].strip())
    if empty:
        out.append(f"{empty} of {len(replies)} model replies held nothing outside <think> to score.")
    counts = noise.get("counts")
    if counts and (counts["failed"] or counts["retries"]):
        out.append(
            f"{counts['failed']} of {counts['replays']} real replays failed after {noise['attempts']} fresh "
            f"sandboxes each; {counts['retries']} retries were needed in all."
        )
    summary = noise.get("summary")
    if summary and summary["turns_over_half_volatile"]:
        out.append(
            f"{summary['turns_over_half_volatile']} of {summary['turns']} turns are more than half volatile: "
            "on those, reproducing the stable content says little."
        )
    for name, error in meta.get("failed_systems", {}).items():
        out.append(f"{name} is missing from the comparison: {error}.")
    if meta.get("request_errors"):
        out.append(f"{meta['request_errors']} model requests failed; they score as empty replies.")
    return out


def build_report(
    rows_by_system: dict[str, list[dict]],
    meta: dict,
    noise: dict,
    roles: dict[str, str] | None = None,
    likelihood: dict | None = None,
) -> dict:
    """`roles`: system name -> its role in the comparison (comparison.ROLES) for the systems whose
    `<name>/teacher_forced` rows are compared; without it, no comparison section. `likelihood`: the
    section likelihood.summarise made, if the likelihood pass ran."""
    systems = {name: aggregate(rows) for name, rows in rows_by_system.items() if rows}
    report = {
        "meta": meta,
        "headline": headline(systems),
        "notes": notes(rows_by_system, meta, noise),
        "noise_floor": noise,
        "systems": systems,
    }
    compared = {n: rows_by_system.get(n + TEACHER_FORCED_SUFFIX, []) for n in roles or {}}
    if any(compared.values()):
        report["comparison"] = compare(compared, rows_by_system.get(CEILING, []), roles or {})
    model_tf = rows_by_system.get("model/teacher_forced", [])
    if any("judge" in r for r in model_tf):
        report["judge"] = judge_summary(model_tf)
    if likelihood is not None:
        report["likelihood"] = likelihood
    return report


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def headline_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per domain; each system's edit similarity with its share of the ceiling."""
    names = sorted({n for d in report["headline"].values() for n in d["systems"]}, key=_series_order)
    body = []
    for domain, entry in report["headline"].items():
        ceiling = entry["ceiling"]
        row = [domain, fmt(ceiling[HEADLINE_METRIC]) if ceiling else "none"]
        for name in names:
            s = entry["systems"].get(name)
            row.append("-" if s is None else f"{fmt(s[HEADLINE_METRIC])} ({percent(s['share_of_ceiling'])})")
        model = entry["systems"].get("model/teacher_forced")
        row.append(percent(model["format_valid"]) if model else "-")
        body.append(row)
    return ["domain", "real vs real (ceiling)", *names, "model format valid"], body


def _series_order(name: str) -> tuple[int, str]:
    """The model first, then the --compare models, then the base and the baseline."""
    last = ("base/teacher_forced", "untrained/teacher_forced", "repeat_previous/teacher_forced")
    if name in MODEL_SERIES:
        return (MODEL_SERIES.index(name), name)
    return (len(MODEL_SERIES) + 1 + last.index(name), name) if name in last else (len(MODEL_SERIES), name)


def domain_tables(report: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(domain, header, rows): every metric, one table per domain, one row per system; a domain's
    table adds its own metrics (tree lines for web, result lists for search)."""
    systems = report["systems"]
    domains = sorted({d for s in systems.values() for d in s["by_domain"]})
    tables = []
    for domain in [*domains, "overall"]:
        shown = (*SHOWN, *domain_metrics(domain))
        body = []
        for name, agg in systems.items():
            stats = agg["overall"] if domain == "overall" else agg["by_domain"].get(domain)
            if stats:
                body.append([name, *(fmt(stats.get(m)) for m in shown)])
        tables.append((domain, ["system", *shown], body))
    return tables


def judge_table(report: dict) -> tuple[list[str], list[list[str]]] | None:
    if "judge" not in report:
        return None
    header = ["domain", "samples", "judge_failures", *DIMENSIONS, "score"]
    body = [[d, *(fmt(s.get(c)) for c in header[1:])] for d, s in report["judge"].items()]
    return header, body


def noise_sentence(noise: dict) -> str:
    if noise.get("skipped") and not noise.get("summary"):
        return noise["skipped"]
    s, c = noise["summary"], noise["counts"]
    return (
        f"The ceiling comes from {noise['replays']} real replays per trajectory, each in a fresh sandbox "
        f"({noise['backend']}); {c['finished']} of {c['replays']} replays finished. A turn is on average "
        f"{s['volatile_share_mean']:.1%} volatile (at most {s['volatile_share_max']:.1%}); "
        f"{s['turns_with_volatile']} of {s['turns']} turns hold volatile spans. Each real replay and each "
        "prediction is scored against templates built from the other real runs, the same way for both."
    )


# What the report says in place of the generation tables when no turn was generated
NO_GENERATION = "No turn was generated (--max-turns 0): this report holds the likelihood pass alone."


def write_markdown(report: dict, path: Path) -> None:
    def table(header: list[str], body: list[list[str]]) -> list[str]:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(row) + " |" for row in body]

    out = ["# Sim-vs-real fidelity report", ""]
    if report["systems"]:
        out += [HEADLINE_CAPTION, ""]
        out += table(*headline_table(report))
    else:
        out.append(NO_GENERATION)
    out += ["", *(f"- {n}" for n in report["notes"])]
    if "comparison" in report:
        out += [
            "",
            "## Comparison",
            "",
            COMPARISON_CAPTION,
            "",
            *table(*comparison_table(report["comparison"])),
        ]
        out += ["", *(f"- {line}" for line in summary_lines(report["comparison"]))]
        out += ["", *table(*rate_table(report["comparison"]))]
    if "likelihood" in report:
        out += ["", "## Likelihood", "", LIKELIHOOD_CAPTION, ""]
        out += table(*likelihood_table(report["likelihood"]))
        out += ["", *(f"- {line}" for line in likelihood_lines(report["likelihood"]))]
    out += ["", "## Noise floor (real vs real)", "", noise_sentence(report["noise_floor"])]
    for text, variants in report["noise_floor"].get("summary", {}).get("examples", {}).items():
        out.append(f"- `{text[:60]}` vs `{', '.join(v[:40] for v in variants)}`")
    for domain, header, body in domain_tables(report) if report["systems"] else []:
        out += ["", f"## {domain}", "", *table(header, body)]
    judged = judge_table(report)
    if judged:
        out += ["", "## LLM judge (AgentWorldBench dimensions, (x-1)/4*100)", "", *table(*judged)]
    meta = report["meta"]
    out += ["", "## Configuration", "", f"- real data: `{meta.get('real')}`"]
    out += [
        f"- model: `{json.dumps(meta.get('model'))}`",
        f"- base: `{json.dumps(meta.get('base'))}`",
    ]
    out += [f"- {name}: `{json.dumps(described)}`" for name, described in meta.get("compare", {}).items()]
    out.append(
        f"- turns: {meta.get('turns')}, model requests: {meta.get('requests')}, "
        f"cache hits: {meta.get('cache_hits')}, request errors: {meta.get('request_errors')}"
    )
    path.write_text("\n".join(out) + "\n")
