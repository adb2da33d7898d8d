"""Short Markdown tables for the benchmark results (the heavy benchmarks' own, imported when used)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any


def entry(target: str) -> Callable[..., Any]:
    """The function `module:name` names, imported at its first call: a benchmark's module may need an
    extra, Docker or a GPU, so only the benchmarks asked for are imported."""

    def call(*args: Any) -> Any:
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)(*args)

    return call


def _terminal(r: dict) -> list[str]:
    step = r["step"]
    lat = step["latency"]
    lines = [
        "| `command true` step, screen captured | median ms | p95 ms | ratio to ours (docker) |",
        "|---|---|---|---|",
    ]
    ours = lat["ours_docker"]["median_ms"]
    for name, v in lat.items():
        lines.append(f"| {name} | {v['median_ms']:.3f} | {v['p95_ms']:.3f} | {v['median_ms'] / ours:.1f}x |")
    lines.append(
        f"\nTarget median <= {step['target_median_ms']} ms: {'met' if step['met'] else 'NOT met'}.\n"
    )
    lines += [
        "| reset | cold start median ms | pooled reset median ms | target | met |",
        "|---|---|---|---|---|",
    ]
    for backend in ("docker", "bwrap"):
        v = r[f"reset_{backend}"]
        lines.append(
            f"| {backend} | {v['cold_start']['median_ms']:.1f} | {v['pooled_reset']['median_ms']:.1f} "
            f"| {v['target_s'] * 1000:.0f} ms | {v['met']} |"
        )
    return lines


def _fleet(r: dict) -> list[str]:
    lines = [
        "| sandboxes | episodes | steps | steps/s | speed-up vs 1 | collector CPU | collector peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in r["runs"]:
        lines.append(
            f"| {run['sandboxes']} | {run['episodes']} | {run['steps']} | {run['steps_per_s']:.1f} "
            f"| {run['speedup_vs_1']:.2f}x | {run['collector_cpu_share'] * 100:.1f}% "
            f"| {run['collector_peak_rss_mib']:.0f} |"
        )
    lines.append(
        f"\nCollector RSS per additional sandbox: {r['rss_per_additional_sandbox_mib']:.1f} MiB "
        f"(target <= {r['rss_target_mib']} MiB: {'met' if r['rss_met'] else 'NOT met'})."
    )
    return lines


def _variety(r: dict) -> list[str]:
    skip = {"collection", "_meta"}
    lines = ["| metric | value |", "|---|---|"]
    for key, value in r.items():
        if key in skip:
            continue
        if isinstance(value, float):
            value = f"{value:.3f}"
        elif isinstance(value, (list, dict)):
            value = str(value)[:200]
        lines.append(f"| {key} | {value} |")
    return lines


def _corpus(r: dict) -> list[str]:
    from benchmarks.corpus_throughput import markdown_lines

    return markdown_lines(r)


def _redaction(r: dict) -> list[str]:
    from benchmarks.redaction import markdown_lines

    return markdown_lines(r)


def _flat(prefix: str, value: object, out: list[str]) -> None:
    """Nested results as `| key.path | value |` rows (for the smaller benchmarks)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key != "_meta":
                _flat(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif isinstance(value, float):
        out.append(f"| {prefix} | {value:.4g} |")
    elif not isinstance(value, list) or len(value) <= 8:
        out.append(f"| {prefix} | {value} |")


def _table(r: dict) -> list[str]:
    lines = ["| metric | value |", "|---|---|"]
    _flat("", r, lines)
    return lines


def _demo_fidelity(r: dict) -> list[str]:
    lines = [
        f"Source: `{r['source']}` ({r['meta']['trajectories']} trajectories, {r['meta']['turns']} turns).",
        "",
        "| system | turns | stable exact | edit similarity | line F1 | format valid |",
        "|---|---|---|---|---|---|",
    ]
    for name, value in r["systems"].items():
        o = value["overall"]
        lines.append(
            f"| {name} | {o['turns']} | {o['stable_exact']:.3f} | {o['edit_similarity']:.3f} "
            f"| {o['line_f1']:.3f} | {o['format_valid']:.3f} |"
        )
    return lines


def _web(r: dict) -> list[str]:
    from benchmarks.web_latency import markdown_lines

    return markdown_lines(r)


def _web_fleet(r: dict) -> list[str]:
    from benchmarks.web_fleet import markdown_lines

    return markdown_lines(r)


def _search(r: dict) -> list[str]:
    from benchmarks.search_latency import markdown_lines

    return markdown_lines(r)


def _swe(r: dict) -> list[str]:
    from benchmarks.swe_latency import markdown_lines

    return markdown_lines(r)


def _mcp_latency(r: dict) -> list[str]:
    from benchmarks.mcp_latency import markdown_lines

    return markdown_lines(r)


def _world_model(r: dict) -> list[str]:
    from training.fidelity.comparison import comparison_table, rate_table, summary_lines
    from training.fidelity.likelihood import likelihood_lines, likelihood_table

    def md(header: list[str], body: list[list[str]]) -> list[str]:
        return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + [
            "| " + " | ".join(row) + " |" for row in body
        ]

    s, tp = r["settings"], r["throughput"]
    parts = s.get("parts", ["likelihood", "generation", "throughput"])
    measured = []
    if "likelihood" in parts:
        cap = s.get("likelihood_trajectories_per_domain")
        scope = "every held-out turn"
        if cap:
            scope = f"every turn of the first {cap} held-out trajectories per domain"
        measured.append(f"Likelihood on {scope} (transformers, fp32).")
    if "generation" in parts:
        generated = ", ".join(s.get("generation_forms", s["forms"]))
        measured.append(
            f"Generation ({generated} targets; llama.cpp, GGUF f16) on {s['eval_trajectories_per_domain']} "
            f"trajectories x {s['eval_turns']} turns per domain; no real replays (no ceiling)."
        )
    left_out = [p for p in ("likelihood", "generation", "throughput") if p not in parts]
    lines = [
        f"SmolLM2-135M-Instruct ({s['base']}), SFT of the top {s['train_layers']} layers for "
        f"{s['train_steps']} steps per target form at --seq-len {s['seq_len']}, "
        f"{'with' if s.get('history_loss') else 'without'} history loss (the observations in each "
        f"sample's history trained besides its answer), split {s['split']} "
        f"(train, validation, test); held-out trajectories (by task id): "
        f"{r['data']['held_out_trajectories']}. "
        + " ".join(measured)
        + (f" Not measured in this run: {', '.join(left_out)}." if left_out else ""),
        "",
        "Edit scripts on every captured observation (median answer tokens, delta / full):",
        "",
        *md(
            ["domain", "observations", "exact", "full", "delta", "ratio"],
            [
                [d, str(e["observations"]), f"{e['exact']:.1%}", f"{e['median_tokens_full']:g}"]
                + [f"{e['median_tokens_delta']:g}", "-" if e["ratio"] is None else f"{e['ratio']:.2f}"]
                for d, e in r["edit_scripts"].items()
            ],
        ),
    ]
    for form, f in r["forms"].items():
        t = f["training"]
        lines += [
            "",
            f"### target form: {form}",
            "",
            f"Training: {t['steps']} steps, {t['tokens']:,} tokens, {t['tokens_per_s']:.0f} tokens/s, loss "
            f"{t['first_loss']:.3f} -> {t['last_loss']:.3f}.",
            "",
        ]
        if "likelihood" in f:
            lines += [
                "Likelihood of the real observation (bits per byte; * the 95% CI excludes 0):",
                "",
                *md(*likelihood_table(f["likelihood"])),
                "",
                *[f"- {line}" for line in likelihood_lines(f["likelihood"])],
                "",
            ]
        if "generation" in f:
            paired = f["generation"].get("paired_with")
            lines += [
                "Generation, main metric per domain"
                + (
                    f" (the base and repeat-previous rows are those of {paired['run']} on the same turns: "
                    "the base answers in the full form, so it is generated once):"
                    if paired
                    else ":"
                ),
                "",
                *md(*comparison_table(f["generation"])),
                "",
                *md(*rate_table(f["generation"])),
                "",
                *[f"- {line}" for line in summary_lines(f["generation"])],
                "",
            ]
        lines.append("Targets: " + json.dumps(f["targets"]))
    if tp is not None:
        lines += [
            "",
            f"Throughput: training.loop {tp['ours_tokens_per_s']:.0f} tokens/s against a plain transformers "
            f"+ torch loop's {tp['plain_tokens_per_s']:.0f} over the same batches: {tp['ratio']:.2f}x "
            f"(target >= {tp['target_ratio']}x).",
        ]
    return lines


RENDERERS = {
    "world_model": _world_model,
    "terminal": _terminal,
    "fleet": _fleet,
    "variety": _variety,
    "corpus": _corpus,
    "redaction": _redaction,
    "training": _table,
    "simulator": _table,
    "fidelity_concurrency": _table,
    "demo_fidelity": _demo_fidelity,
    "web": _web,
    "web_fleet": _web_fleet,
    "search": _search,
    "swe_latency": _swe,
    "mcp_latency": _mcp_latency,
    "desktop_ssh": entry("benchmarks.desktop_ssh:markdown_lines"),
    "desktop_latency": entry("benchmarks.desktop_latency:markdown_lines"),
    "desktop_vm": entry("benchmarks.desktop_vm:markdown_lines"),
    "android_appium": entry("benchmarks.android_appium:markdown_lines"),
    "android_fleet": entry("benchmarks.android_fleet:markdown_lines"),
    "collector_storage": entry("benchmarks.collector_storage:markdown_lines"),
    "corpus_runners": entry("benchmarks.corpus_runners:markdown_lines"),
    "world_model_rl": entry("benchmarks.world_model_rl:markdown_lines"),
    "sim_trained_agent": entry("benchmarks.sim_trained_agent:markdown_lines"),
    "task_rewards": entry("benchmarks.task_rewards:markdown_lines"),
    "openenv_serve": entry("benchmarks.openenv_serve:markdown_lines"),
    "importers": entry("benchmarks.importers:markdown_lines"),
    "decontamination": entry("benchmarks.decontamination:markdown_lines"),
    "gguf_generation": entry("benchmarks.gguf_generation:markdown_lines"),
    "synthesis_throughput": entry("benchmarks.synthesis_throughput:markdown_lines"),
}


def render(name: str, result: dict) -> str:
    body = RENDERERS[name](result)
    meta = result.get("_meta", {})
    head = f"## {name}\n\n{meta.get('cpus', '?')} CPUs, {meta.get('finished_at', '')}\n"
    return "\n".join([head, *body, ""])
