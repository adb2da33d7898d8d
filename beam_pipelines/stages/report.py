"""Report: counts at every stage, from the Beam metrics of a finished run, plus the manifest's totals.

Beam metrics are the only place the counts exist once a run is over (on Dataflow too), so the report is
built from `PipelineResult.metrics()` by the launcher after the run, not inside the pipeline. Timings
are left out of the files so two runs over the same input write identical reports.
"""

from __future__ import annotations

import json
import posixpath
from collections import defaultdict
from typing import Any

from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from beam_pipelines.dead_letter import NAMESPACE

STAGE_ORDER = (
    "read",
    "validate",
    "sources",  # counted by validate: where the valid trajectories came from
    "normalise",
    "redact",
    "dedup",
    "filter",
    "split",
    "decontaminate",
    "format",
    "synthesis",
    "tokenise",
    "pack",
    "write",
)


def stage_counters(result: PipelineResult) -> dict[str, dict[str, int]]:
    """{stage: {counter: value}} from the counters named `<stage>/<name>` (see `dead_letter.count`)."""
    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for counter in query["counters"]:
        stage, _, name = counter.key.metric.name.partition("/")
        # committed is what survived retries; runners that only track attempts leave it None
        value = counter.committed if counter.committed is not None else counter.attempted
        counts[stage][name] = counts[stage].get(name, 0) + int(value or 0)
    rank = {s: i for i, s in enumerate(STAGE_ORDER)}
    return {
        s: dict(sorted(counts[s].items())) for s in sorted(counts, key=lambda s: (rank.get(s, len(rank)), s))
    }


def redaction_summary(redact: dict[str, int]) -> dict[str, Any]:
    """What the redact stage replaced, from its counters: characters by kind and their share of
    all characters it examined, and distinct values by kind. Over-redaction shows here first."""
    total = redact.get("chars_total", 0)
    named = {name.removeprefix("chars_") for name in redact if not name.startswith("trajectories_")}
    kinds = named - {"total"}
    by_kind = {
        kind: {
            "values": redact.get(kind, 0),
            "chars": redact.get(f"chars_{kind}", 0),
            "share": redact.get(f"chars_{kind}", 0) / total if total else 0.0,
        }
        for kind in sorted(kinds)
    }
    redacted = sum(k["chars"] for k in by_kind.values())
    return {
        "chars_total": total,
        "chars_redacted": redacted,
        "share": redacted / total if total else 0.0,
        "by_kind": by_kind,
    }


SYNTHESIS_COLUMNS = ("kept", "dropped", "candidates", "cached", "requests", "failed_requests")


def synthesis_summary(synthesis: dict[str, int]) -> dict[str, dict[str, int]]:
    """{domain: {counter: value}} from the synthesis stage's `<domain>.<counter>` counters."""
    by_domain: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SYNTHESIS_COLUMNS, 0))
    for name, value in synthesis.items():
        domain, _, counter = name.rpartition(".")
        by_domain[domain][counter] = value
    return {d: by_domain[d] for d in sorted(by_domain)}


DECONTAMINATION_COLUMNS = ("checked", "flagged", "dropped")


def decontamination_summary(counters: dict[str, int], benchmark: dict[str, Any]) -> dict[str, Any]:
    """Per trajectory domain, per trajectory origin and per benchmark source, from the decontaminate
    stage's counters (`<domain>.<counter>`, `origin=<dataset>.<counter>`, `source=<source>.<counter>`)
    and OUT/decontamination/benchmark.json."""
    by_domain: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(DECONTAMINATION_COLUMNS, 0))
    by_origin: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(DECONTAMINATION_COLUMNS, 0))
    by_source: dict[str, dict[str, int]] = defaultdict(lambda: {"flagged": 0, "dropped": 0})
    for name, value in counters.items():
        key, _, counter = name.rpartition(".")
        if key.startswith("source="):
            by_source[key.removeprefix("source=")][counter] = value
        elif key.startswith("origin="):
            by_origin[key.removeprefix("origin=")][counter] = value
        else:
            by_domain[key][counter] = value
    sources = []
    for s in benchmark.get("by_source", []):
        sources.append({**s, **by_source.pop(s["source"], {"flagged": 0, "dropped": 0})})
    sources += [{"source": label, **c} for label, c in sorted(by_source.items())]
    settings = {k: benchmark[k] for k in ("ngram", "threshold", "mode", "splits") if k in benchmark}
    return {
        **settings,
        "distinct_turns": benchmark.get("distinct_turns"),
        "distinct_ngrams": benchmark.get("distinct_ngrams"),
        "by_domain": {d: by_domain[d] for d in sorted(by_domain)},
        "by_origin": {o: by_origin[o] for o in sorted(by_origin)},
        "by_source": sources,
    }


def build_report(
    counters: dict[str, dict[str, int]], manifest: dict[str, Any], benchmark: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The report; `benchmark` is OUT/decontamination/benchmark.json of a decontaminated build."""
    report = {
        "stages": counters,
        "redaction": redaction_summary(counters.get("redact", {})),
        "outputs": manifest.get("totals", {}),
        "config": manifest.get("config", {}),
    }
    if "synthesis" in counters:  # only corpora built with synthesis carry the section
        report["synthesis"] = synthesis_summary(counters["synthesis"])
    if benchmark is not None or "decontaminate" in counters:
        report["decontamination"] = decontamination_summary(
            counters.get("decontaminate", {}), benchmark or {}
        )
    return report


def _decontamination_lines(d: dict[str, Any]) -> list[str]:
    lines = ["", "## Decontamination", ""]
    if "ngram" in d:
        lines += [
            f"A trajectory of the {', '.join(d['splits'])} split(s) is contaminated when it contains at "
            f"least {d['threshold']:.0%} of the distinct {d['ngram']}-grams of some benchmark turn; mode "
            f"**{d['mode']}** (contaminated trajectories "
            f"{'go to the dead letter' if d['mode'] == 'drop' else 'stay in the corpus'}); every match is "
            f"in decontamination/matches.jsonl. Index: {d['distinct_turns']:,} distinct turns, "
            f"{d['distinct_ngrams']:,} distinct n-grams.",
            "",
        ]
    for title, rows in (("domain", d["by_domain"]), ("trajectory origin", d.get("by_origin", {}))):
        header = f"| {title} | checked | flagged | dropped | contaminated share |"
        lines += [header, "|---|---:|---:|---:|---:|"]
        for name, c in rows.items():
            share = f"{(c['flagged'] + c['dropped']) / c['checked']:.2%}" if c["checked"] else "-"
            lines.append(f"| {name} | {c['checked']:,} | {c['flagged']:,} | {c['dropped']:,} | {share} |")
        lines.append("")
    lines += [
        "| benchmark source | samples | turns | short turns skipped | n-grams | flagged | dropped |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in d["by_source"]:
        cells = [
            f"{s[k]:,}" if k in s else "-" for k in ("samples", "turns", "short_turns_skipped", "ngrams")
        ]
        lines.append(f"| {s['source']} | {' | '.join(cells)} | {s['flagged']:,} | {s['dropped']:,} |")
    return lines


def _sources_lines(sources: dict[str, int]) -> list[str]:
    """Where the validated trajectories came from (the validate stage's `sources` counters)."""
    lines = ["", "## Sources", "", "| origin | trajectories |", "|---|---:|"]
    if sources.get("captured"):
        lines.append(f"| captured by our collectors | {sources['captured']:,} |")
    for prefix, label in (("dataset.", "dataset"), ("license.", "licence")):
        lines += [
            f"| {label} {name.removeprefix(prefix)} | {value:,} |"
            for name, value in sorted(sources.items())
            if name.startswith(prefix)
        ]
    return lines


def _synthesis_lines(synthesis: dict[str, dict[str, int]]) -> list[str]:
    lines = [
        "",
        "## Reasoning synthesis",
        "",
        "| domain | kept | dropped | kept share | candidates | from cache | requests | failed requests |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for domain, c in synthesis.items():
        samples = c["kept"] + c["dropped"]
        share = f"{c['kept'] / samples:.1%}" if samples else "-"
        lines.append(
            f"| {domain} | {c['kept']:,} | {c['dropped']:,} | {share} | {c['candidates']:,} | "
            f"{c['cached']:,} | {c['requests']:,} | {c['failed_requests']:,} |"
        )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Corpus build report",
        "",
        "## Counts by stage",
        "",
        "| stage | counter | value |",
        "|---|---|---:|",
    ]
    for stage, named in report["stages"].items():
        lines += [f"| {stage} | {name} | {value:,} |" for name, value in named.items()]
    redaction = report.get("redaction")
    if redaction and redaction["chars_total"]:
        lines += [
            "",
            "## Redaction",
            "",
            f"{redaction['chars_redacted']:,} of {redaction['chars_total']:,} characters examined were "
            f"replaced ({redaction['share']:.4%}).",
        ]
        if redaction["by_kind"]:
            lines += [
                "",
                "| kind | distinct values | characters | share of all characters |",
                "|---|---:|---:|---:|",
            ]
            lines += [
                f"| {kind} | {k['values']:,} | {k['chars']:,} | {k['share']:.4%} |"
                for kind, k in redaction["by_kind"].items()
            ]
    if report["stages"].get("sources"):
        lines += _sources_lines(report["stages"]["sources"])
    if report.get("decontamination"):
        lines += _decontamination_lines(report["decontamination"])
    if report.get("synthesis"):
        lines += _synthesis_lines(report["synthesis"])
    lines += [
        "",
        "## Outputs",
        "",
        "| corpus | group | files | documents | tokens |",
        "|---|---|---:|---:|---:|",
    ]
    for corpus, groups in report["outputs"].items():
        for group, t in groups.items():
            tokens = f"{t['tokens']:,}" if "tokens" in t else "-"
            lines.append(
                f"| {corpus} | {group} | {t.get('files', 0)} | {t.get('documents', 0):,} | {tokens} |"
            )
    return "\n".join(lines) + "\n"


def write_report(root: str, result: PipelineResult) -> tuple[dict[str, Any], str]:
    """Write OUT/report.json and OUT/report.md from the finished run; return both."""
    with FileSystems.open(posixpath.join(root, "manifest.json")) as f:
        manifest = json.loads(f.read())
    benchmark = None
    if manifest.get("config", {}).get("decontaminated"):
        with FileSystems.open(posixpath.join(root, "decontamination", "benchmark.json")) as f:
            benchmark = json.loads(f.read())
    report = build_report(stage_counters(result), manifest, benchmark)
    markdown = render_markdown(report)
    for name, text in (("report.json", json.dumps(report, indent=1) + "\n"), ("report.md", markdown)):
        with FileSystems.create(posixpath.join(root, name)) as f:
            f.write(text.encode())
    return report, markdown
