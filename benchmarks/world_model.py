"""Does training on our corpus make SmolLM2-135M-Instruct a better simulator of our sandboxes, in
either target form (DESIGN.md 4d)?

1. Data: the project's own collectors record all seven domains (at least 300 trajectories; a rerun
   reuses what is there). Two corpora are built from them with the base's tokenizer, one per target
   form (`build_corpus --target full|delta`); the split is by task id, the same in both, and every
   domain holds out at least one task.
2. Per form, SFT of SmolLM2-135M-Instruct (top 10 layers, `--train-layers`) on CPU, same base and
   budget; the checkpoint and the base are exported to GGUF (`training.export gguf`, f16).
3. Per form, the likelihood of every held-out turn (`training.fidelity --max-turns 0` on the
   checkpoints: forward passes only, the model against its base, paired cluster bootstrap CIs); then
   per form, generation on llama.cpp (GGUF f16) on WM_EVAL_TRAJECTORIES x WM_EVAL_TURNS per domain: the
   model, the base and repeat-previous-observation, with per-domain reply bounds from the corpus and
   the repetition guard. The base answers in the full form, so only the first form's run generates it
   (with the first corpus's bounds); another form generates its model alone and is compared on the
   first run's base and repeat-previous rows of the same turns (training/fidelity/paired_runs.py),
   refused if the turns differ.
4. Edit scripts on every captured observation of the raw data: exact reconstruction, and the median
   answer length in tokens of the delta form against the full form per domain.
5. Throughput: `training.loop` against a plain transformers + torch loop (the model's own loss over
   full logits, AdamW) over the same batches and the same trainable weights, in the same run.

    python -m benchmarks.run world_model     # hours on 2 cores at the defaults; WM_* variables scale it
    WM_TRAIN_STEPS=10 WM_PARTS=likelihood python -m benchmarks.run world_model   # likelihood alone
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from training.fidelity.held_out import held_out_ids
from training.fidelity.paired_runs import (
    BASE_ROWS,
    paired_comparison,
    planned_turns,
    read_turns,
    require_same_decoding,
    require_same_turns,
    turn_keys,
)
from training.fidelity.report_html import svg_comparison

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("WM_OUT", "out/bench/world_model"))
BASE = "smollm2-135m-instruct"
FORMS = tuple(os.environ.get("WM_TARGETS", "full,delta").split(","))
# 3,072 so that os turns fit in the full form too (at 2,048 most went to dead letters: the system
# prompt holds the initial tree, and the answer a whole tree again)
SEQ_LEN = int(os.environ.get("WM_SEQ_LEN", "3072"))
TRAIN_STEPS = int(os.environ.get("WM_TRAIN_STEPS", "50"))
TRAIN_LAYERS = 10
EVAL_TRAJECTORIES = int(os.environ.get("WM_EVAL_TRAJECTORIES", "10"))  # per domain, for generation
EVAL_TURNS = int(os.environ.get("WM_EVAL_TURNS", "3"))
SPLIT = os.environ.get("WM_SPLIT", "0.7,0.05,0.25")  # train, validation, test
# held-out tasks per domain at least (build_corpus --min-test-per-domain): a paired CI needs two
# trajectories, and the hash split alone gave os one (2026-12-07)
MIN_TEST = int(os.environ.get("WM_MIN_TEST", "3"))
# the prompt budget of training (--seq-len tokens, about 3 characters each), not fidelity's 32,000
CONTEXT_CHARS = int(os.environ.get("WM_CONTEXT_CHARS", str(3 * SEQ_LEN)))
# what to measure after training: a part left out is absent from the results, never zero
# the likelihood pass's budget: every turn of the first N held-out trajectories per domain (default: all)
LIKELIHOOD_TRAJECTORIES = os.environ.get("WM_LIKELIHOOD_TRAJECTORIES")
# the forms that generate (default: every form); generation costs minutes per turn on 2 cores
GENERATION_FORMS = tuple(os.environ.get("WM_GENERATION_TARGETS", ",".join(FORMS)).split(","))
PARTS = tuple(os.environ.get("WM_PARTS", "likelihood,generation,throughput").split(","))
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


def edit_scripts(raw: Path) -> dict:
    """Per domain, over every consecutive pair of captured observations: whether `apply(diff)` rebuilds
    the observation exactly, and the median answer length in tokens of each target form."""
    from schemas.chat_tokens import shared_tokenizer
    from schemas.edit_script import apply, diff
    from schemas.storage import dataset_files, read_trajectories
    from training.bases import resolve_base

    tokenizer = shared_tokenizer(resolve_base(BASE)).tokenizer
    exact: dict[str, list[bool]] = defaultdict(list)
    tokens: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"full": [], "delta": []})
    for file in dataset_files(str(raw)):
        for t in read_trajectories(file):
            previous = t.initial_observation.text
            for step in t.steps:
                current, script = step.observation.text, diff(previous, step.observation.text, t.domain)
                exact[t.domain].append(apply(previous, script, t.domain) == current)
                for form, text in (("full", current), ("delta", script)):
                    tokens[t.domain][form].append(len(tokenizer.encode(text, add_special_tokens=False)))
                previous = current
    out = {}
    for domain in sorted(exact):
        full, delta = (statistics.median(tokens[domain][f]) for f in ("full", "delta"))
        out[domain] = {
            "observations": len(exact[domain]),
            "exact": sum(exact[domain]) / len(exact[domain]),
            "median_tokens_full": full,
            "median_tokens_delta": delta,
            "ratio": delta / full if full else None,
        }
    return out


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


def build(raw: Path, form: str, log: Path) -> Path:
    corpus = OUT / f"corpus-{form}"
    if not (corpus / "manifest.json").exists():
        build = ["beam_pipelines.build_corpus", "--input", str(raw), "--output", str(corpus)]
        build += ["--tokenizer", BASE, "--seq-len", str(SEQ_LEN), "--split-ratios", SPLIT]
        build += ["--min-test-per-domain", str(MIN_TEST)]
        _run([*build, "--target", form], log)
    return corpus


def train(corpus: Path, form: str, log: Path) -> dict:
    model = OUT / f"sft-{form}"
    done = model / "summary.json"
    train = ["training.sft", "--data", str(corpus), "--base", BASE, "--out", str(model)]
    train += ["--train-layers", str(TRAIN_LAYERS), "--max-steps", str(TRAIN_STEPS), "--batch-size", "1"]
    train += ["--grad-accum", "2", "--lr", "3e-4", "--warmup-steps", "4", "--eval-every", "1000"]
    train += ["--eval-batches", "8", "--save-every", "20", "--resume"]
    if not done.exists() or json.loads(done.read_text())["steps"] != TRAIN_STEPS:
        _run(train, log)  # a finished run is kept: a rerun would overwrite its summary with no steps
    summary = json.loads(done.read_text())
    keys = ("steps", "tokens", "tokens_per_s", "first_loss", "last_loss", "val_loss")
    return {k: summary[k] for k in keys} | {"trained_parameters": summary["parameters"]["trained"]}


def gguf(checkpoint: str, name: str, log: Path) -> Path:
    out = OUT / f"{name}.gguf"
    if not out.exists():
        _run(["training.export", "gguf", checkpoint, str(out)], log)
    return out


def likelihood(raw: Path, corpus: Path, form: str, log: Path) -> dict:
    """The likelihood of every held-out turn under the model and its base: a fidelity run without
    generation (--max-turns 0) on the checkpoints through transformers, whose prompt processing on our
    2 cores was about 2.5x llama.cpp's (300 against 118 tokens/s on a 2,809-token turn, 2026-12-07). The
    base answers in the full form in both runs, so the second form starts from the first one's scores."""
    out = OUT / f"likelihood-{form}"
    scores, first = out / "likelihood.jsonl", OUT / f"likelihood-{FORMS[0]}" / "likelihood.jsonl"
    if not scores.exists() and first.exists():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(first, scores)  # keyed by system, prompt and answer: the base's rows are reused
    if not (out / "report.json").exists():
        checkpoint = json.loads((OUT / f"sft-{form}" / "summary.json").read_text())["checkpoint"]
        run = ["training.fidelity", "--real", str(raw), "--held-out", str(corpus), "--replays", "0"]
        run += ["--model", checkpoint, "--base", BASE, "--out", str(out), "--max-turns", "0"]
        run += ["--no-closed-loop", "--no-progress", "--context-chars", str(CONTEXT_CHARS)]
        if LIKELIHOOD_TRAJECTORIES:
            run += ["--likelihood-trajectories", LIKELIHOOD_TRAJECTORIES]
        _run(run, log)
    return json.loads((out / "report.json").read_text())["likelihood"]


def generation(raw: Path, corpora: dict[str, Path], form: str, base_gguf: Path, log: Path) -> dict:
    """Generation on llama.cpp (the model and its base exported to GGUF f16) on the first
    EVAL_TRAJECTORIES held-out trajectories x EVAL_TURNS turns of each domain. The first form's run
    generates the model, its base and repeat-previous; another form's generates its model alone
    (`--base none`) and is compared on the first run's base and repeat-previous rows of the same turns
    (training/fidelity/paired_runs.py): the base answers in the full form whatever the model's form, and this
    form's corpus would bound its replies by this form's answer lengths."""
    first = FORMS[0]
    model = gguf(str(OUT / f"sft-{form}"), f"sft-{form}", log)
    out, first_out = OUT / f"fidelity-{form}", OUT / f"fidelity-{first}"
    names = (f"the {first} form's run ({first_out})", f"the {form} form's run ({out})")
    if form != first:
        try:  # before generating: a run that cannot pair up is refused before it costs CPU minutes
            first_rows = read_turns(first_out)
            planned = planned_turns(str(raw), str(corpora[form]), EVAL_TRAJECTORIES, EVAL_TURNS)
            base = turn_keys(first_rows.get(BASE_ROWS, []))
            require_same_turns(
                f"the turns {names[1]} would generate", planned, f"the base rows of {names[0]}", base
            )
        except ValueError as exc:
            raise SystemExit(f"generation of the {form} form: {exc}") from exc
    if not (out / "report.json").exists():
        run = ["training.fidelity", "--real", str(raw), "--held-out", str(corpora[form]), "--replays", "0"]
        run += ["--model", str(model), "--base", str(base_gguf) if form == first else "none"]
        run += ["--out", str(out), "--concurrency", "1", "--no-closed-loop", "--no-progress"]
        run += ["--context-chars", str(CONTEXT_CHARS), "--no-likelihood"]
        run += ["--limit-trajectories", str(EVAL_TRAJECTORIES), "--max-turns", str(EVAL_TURNS)]
        _run(run, log)
    if form == first:
        return json.loads((out / "report.json").read_text())["comparison"]
    try:
        require_same_decoding(first_out, out)
        return paired_comparison(first_rows, read_turns(out), names)
    except ValueError as exc:
        raise SystemExit(f"generation of the {form} form: {exc}") from exc


def generated_forms() -> list[str]:
    """GENERATION_FORMS in the order of FORMS; the first form's run is needed by every other form's
    (its base rows), so naming another form without it is refused rather than paid for unasked."""
    unknown = [f for f in GENERATION_FORMS if f not in FORMS]
    if unknown:
        raise SystemExit(f"WM_GENERATION_TARGETS {unknown}: not among WM_TARGETS {list(FORMS)}")
    forms = [f for f in FORMS if f in GENERATION_FORMS]
    if forms and forms[0] != FORMS[0]:
        raise SystemExit(
            f"WM_GENERATION_TARGETS={','.join(GENERATION_FORMS)}: the {FORMS[0]} form's generation holds the "
            f"base rows every other form is compared on; add {FORMS[0]} (a finished run is reused, not rerun)"
        )
    return forms


def run() -> dict:
    generating = generated_forms() if "generation" in PARTS else []  # refused now, not after training
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "log.txt"
    raw = OUT / "raw"
    timings: dict[str, float] = {}
    t = time.monotonic()
    collect(raw, log)
    timings["collect_s"] = time.monotonic() - t
    from training.bases import resolve_base

    forms, corpora = {}, {}
    for form in FORMS:  # every form's likelihood first: the cheapest answer to "does it learn?"
        t = time.monotonic()
        corpora[form] = corpus = build(raw, form, log)
        forms[form] = {"training": train(corpus, form, log)}
        timings[f"{form}_corpus_and_train_s"] = time.monotonic() - t
        if "likelihood" in PARTS:
            t = time.monotonic()
            forms[form]["likelihood"] = likelihood(raw, corpus, form, log)
            timings[f"{form}_likelihood_s"] = time.monotonic() - t
    if generating:
        base_gguf = gguf(resolve_base(BASE), "base", log)
        for form in generating:
            t = time.monotonic()
            forms[form]["generation"] = generation(raw, corpora, form, base_gguf, log)
            timings[f"{form}_generation_s"] = time.monotonic() - t
        # the plot the README shows, beside the results: generation in the last form measured
        plot = ROOT / "benchmarks" / "results" / "world_model.svg"
        plot.write_text(svg_comparison(forms[generating[-1]]["generation"]))
    for form in FORMS:
        forms[form]["targets"] = targets(forms[form])
    manifest = json.loads((corpora[FORMS[0]] / "manifest.json").read_text())
    return {
        "data": {
            "raw": str(raw),
            "held_out_trajectories": len(held_out_ids(str(corpora[FORMS[0]]))),
            "corpus_totals": {
                f: json.loads((c / "manifest.json").read_text())["totals"] for f, c in corpora.items()
            },
            "dead_letters": manifest.get("dead_letters"),
        },
        "forms": forms,
        "edit_scripts": edit_scripts(raw),
        "throughput": throughput(corpora[FORMS[0]]) if "throughput" in PARTS else None,
        "timings_s": timings,
        "settings": {
            "base": BASE,
            "forms": list(FORMS),
            "seq_len": SEQ_LEN,
            "train_steps": TRAIN_STEPS,
            "train_layers": TRAIN_LAYERS,
            "eval_trajectories_per_domain": EVAL_TRAJECTORIES,
            "eval_turns": EVAL_TURNS,
            "split": SPLIT,
            "min_test_per_domain": manifest["config"].get("min_test_per_domain"),
            "history_loss": manifest["config"].get("history_loss", False),
            "context_chars": CONTEXT_CHARS,
            "parts": list(PARTS),
            "generation_forms": list(GENERATION_FORMS),
            "likelihood_trajectories_per_domain": LIKELIHOOD_TRAJECTORIES and int(LIKELIHOOD_TRAJECTORIES),
        },
    }


def targets(form: dict) -> dict:
    """The issue's targets, read from the likelihood and comparison sections as measured."""
    out = {}
    if "likelihood" in form:
        lower = [
            d
            for d, entry in form["likelihood"]["domains"].items()
            for diff in entry["differences"]
            if (diff["a"], diff["b"]) == ("model", "base")
            and diff["excludes_zero"]
            and diff["difference"] < 0
        ]
        out["likelihood_below_base"] = {"domains": sorted(lower), "target": "7 of 7"}
    if "generation" not in form:
        return out
    comparison = form["generation"]
    pairs = {(p["a"], p["b"]): p for p in comparison["summary"]}
    over_base = pairs.get(("model", "base"), {})
    over_repeat = pairs.get(("model", "repeat_previous"), {})
    domains = comparison["domains"]
    valid = {d: v["format_valid"].get("model") for d, v in domains.items()}
    return out | {
        "sft_over_base_ci_excludes_0": {"domains": over_base.get("better_in", []), "target": ">= 5 of 7"},
        "sft_over_repeat_previous": {"domains": over_repeat.get("better_in", []), "target": ">= 3 of 7"},
        "sft_not_below_repeat_previous": {
            "domains": sorted(set(domains) - set(over_repeat.get("worse_in", []))),
            "target": ">= 5 of 7",
        },
        "format_valid_model": valid,
        "format_valid_target": ">= 0.95 in every domain",
    }
