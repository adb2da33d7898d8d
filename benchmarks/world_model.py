"""Does training on our corpus make SmolLM2-135M-Instruct a better simulator of our sandboxes?

1. Data: the project's own collectors record all seven domains (at least 300 trajectories; a rerun
   reuses what is there). The corpus is built with the base's tokenizer; build_corpus splits by task
   id, and the test split's trajectories are held out of training entirely.
2. SFT of SmolLM2-135M-Instruct (top 10 layers, `--train-layers`) on CPU.
3. `training.fidelity` teacher-forced on held-out trajectories: the SFT model, its base and
   repeat-previous-observation, with paired bootstrap CIs of the differences on each domain's main
   metric, and the format-valid rates.
4. Throughput: `training.loop` against a plain transformers + torch loop (the model's own loss over
   full logits, AdamW) over the same batches and the same trainable weights, in the same run.

    python -m benchmarks.run world_model     # about an hour on 2 cores; WM_* variables scale it
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from training.fidelity.held_out import held_out_ids
from training.fidelity.report_html import svg_comparison

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("WM_OUT", "out/bench/world_model"))
BASE = "smollm2-135m-instruct"
SEQ_LEN = int(os.environ.get("WM_SEQ_LEN", "2048"))
TRAIN_STEPS = int(os.environ.get("WM_TRAIN_STEPS", "50"))
TRAIN_LAYERS = 10
EVAL_TRAJECTORIES = int(os.environ.get("WM_EVAL_TRAJECTORIES", "3"))  # per domain
EVAL_TURNS = int(os.environ.get("WM_EVAL_TURNS", "2"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}

# (domain partition, collector command): about 320 trajectories in a few minutes
COLLECT = [
    ("terminal", ["collectors.terminal", "--backend", "bwrap", "--sandboxes", "2", "--episodes", "110"]),
    ("mcp", ["collectors.mcp", "--workers", "2", "--episodes", "40", "--max-steps", "6"]),
    ("search", ["collectors.search", "--workers", "2", "--episodes", "40", "--max-steps", "6"]),
    ("android", ["collectors.android", "--fake-driver", "--emulators", "2", "--episodes", "36"]),
    ("web", ["collectors.web", "--browsers", "2", "--episodes", "36", "--max-steps", "6"]),
    ("os", ["collectors.desktop", "--displays", "2", "--episodes", "30", "--max-steps", "6"]),
    ("swe", ["collectors.swe", "--sandboxes", "2", "--episodes", "30", "--max-steps", "8"]),
]


def _run(module_args: list[str], log: Path) -> None:
    with log.open("a") as f:
        done = subprocess.run([sys.executable, "-m", *module_args], cwd=ROOT, env=ENV, stdout=f, stderr=f)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(module_args[:1])} failed (exit {done.returncode}); see {log}")


def collect(raw: Path, log: Path) -> None:
    for domain, command in COLLECT:
        if not (raw / f"domain={domain}").is_dir():
            extra = ["--max-steps", "10"] if "--max-steps" not in command else []
            _run([*command, *extra, "--out", str(raw)], log)


def throughput(corpus: Path, steps: int = 5) -> dict:
    """tokens/s of `training.loop`'s step against a plain loop over the same batches and weights."""
    import torch
    import torch.nn.functional as F

    from training.bases import resolve_base
    from training.data import PackedDataset
    from training.loop import freeze_below, weighted_loss_sum
    from training.models import build_model

    def timed(step: object) -> float:
        model = build_model(resolve_base(BASE))
        freeze_below(model, TRAIN_LAYERS)
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        batches = PackedDataset(str(corpus / "sft"), "train", seed=0).batches(1, 0.1)
        step(model, next(batches))  # warm-up, not timed
        optimizer.zero_grad()
        tokens, started = 0, time.perf_counter()
        for _ in range(steps):
            batch = next(batches)
            step(model, batch)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            tokens += batch.tokens
        return tokens / (time.perf_counter() - started)

    def ours(model: torch.nn.Module, batch: object) -> None:
        (weighted_loss_sum(model, batch, False) / batch.loss_weight.sum()).backward()

    def plain(model: torch.nn.Module, batch: object) -> None:
        logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids).logits
        F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=-100).backward()

    plain_tps, ours_tps = timed(plain), timed(ours)
    return {
        "steps": steps,
        "plain_tokens_per_s": plain_tps,
        "ours_tokens_per_s": ours_tps,
        "ratio": ours_tps / plain_tps,
        "target_ratio": 0.9,
    }


def run() -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "log.txt"
    raw, corpus, model, fidelity = (OUT / n for n in ("raw", "corpus", "sft", "fidelity"))
    timings: dict[str, float] = {}
    t = time.monotonic()
    collect(raw, log)
    timings["collect_s"] = time.monotonic() - t
    if not (corpus / "manifest.json").exists():
        t = time.monotonic()
        _run(
            ["beam_pipelines.build_corpus", "--input", str(raw), "--output", str(corpus), "--tokenizer", BASE]
            + ["--seq-len", str(SEQ_LEN), "--split-ratios", "0.7,0.05,0.25"],
            log,
        )
        timings["corpus_s"] = time.monotonic() - t
    held = held_out_ids(str(corpus))
    t = time.monotonic()
    done = model / "summary.json"
    train = ["training.sft", "--data", str(corpus), "--base", BASE, "--out", str(model)]
    train += ["--train-layers", str(TRAIN_LAYERS), "--max-steps", str(TRAIN_STEPS), "--batch-size", "1"]
    train += ["--grad-accum", "2", "--lr", "3e-4", "--warmup-steps", "4", "--eval-every", "1000"]
    train += ["--eval-batches", "8", "--save-every", "20", "--resume"]
    if not done.exists() or json.loads(done.read_text())["steps"] != TRAIN_STEPS:
        _run(train, log)  # a finished run is kept: a rerun would overwrite its summary with no steps
        timings["train_s"] = time.monotonic() - t
    summary = json.loads(done.read_text())
    t = time.monotonic()
    evaluate = ["training.fidelity", "--real", str(raw), "--held-out", str(corpus), "--model", str(model)]
    evaluate += ["--out", str(fidelity), "--replays", "0", "--no-closed-loop", "--no-progress"]
    evaluate += ["--limit-trajectories", str(EVAL_TRAJECTORIES), "--max-turns", str(EVAL_TURNS)]
    # the prompt budget of training (--seq-len tokens, about 3 characters each), not fidelity's 32,000
    evaluate += ["--context-chars", str(3 * SEQ_LEN), "--max-new-tokens", "256", "--concurrency", "8"]
    _run(evaluate, log)
    timings["fidelity_s"] = time.monotonic() - t
    report = json.loads((fidelity / "report.json").read_text())
    comparison = report["comparison"]
    # the plot the README shows, beside the results (report.html holds it too)
    plot = ROOT / "benchmarks" / "results" / "world_model.svg"
    plot.write_text(svg_comparison(comparison))
    raw_counts = json.loads((raw / "summary.json").read_text()) if (raw / "summary.json").exists() else {}
    return {
        "data": {
            "raw": str(raw),
            "held_out_trajectories": len(held),
            "corpus_totals": json.loads((corpus / "manifest.json").read_text())["totals"].get("sft"),
            "collector_summary": raw_counts,
        },
        "training": {k: summary[k] for k in ("steps", "tokens", "tokens_per_s", "first_loss", "last_loss")}
        | {"val_loss": summary["val_loss"], "trained_parameters": summary["parameters"]["trained"]},
        "comparison": comparison,
        "targets": targets(comparison),
        "throughput": throughput(corpus),
        "timings_s": timings,
        "settings": {
            "base": BASE,
            "seq_len": SEQ_LEN,
            "train_steps": TRAIN_STEPS,
            "train_layers": TRAIN_LAYERS,
            "eval_trajectories_per_domain": EVAL_TRAJECTORIES,
            "eval_turns": EVAL_TURNS,
        },
    }


def targets(comparison: dict) -> dict:
    """The issue's targets, read from the comparison section as measured."""
    pairs = {(p["a"], p["b"]): p for p in comparison["summary"]}
    over_base = pairs.get(("model", "base"), {})
    over_repeat = pairs.get(("model", "repeat_previous"), {})
    domains = comparison["domains"]
    valid = {d: v["format_valid"].get("model") for d, v in domains.items()}
    return {
        "sft_over_base_ci_excludes_0": {"domains": over_base.get("better_in", []), "target": ">= 5 of 7"},
        "sft_beats_repeat_previous": {"domains": over_repeat.get("better_in", []), "target": ">= 4 of 7"},
        "format_valid_model": valid,
        "format_valid_base": {d: v["format_valid"].get("base") for d, v in domains.items()},
        "format_valid_target": ">= 0.95 in every domain",
    }
