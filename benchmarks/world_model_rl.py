"""Does a short GSPO run sharpen the SFT'd world model? (issue: reasoning synthesis and GSPO RL)

1. Data: terminal, MCP and search trajectories from the project's collectors (a rerun reuses them); the
   corpus with SmolLM2's tokenizer, split by task id, the test split held out of SFT and RL alike.
2. SFT of SmolLM2-135M-Instruct (top 10 layers), the starting checkpoint.
3. GSPO (`training.rl`) for RL_STEPS steps from the SFT checkpoint, on one turn per training
   trajectory, with the hybrid reward (judge : rules = 9 : 1); the judge is SmolLM2-135M behind
   llama.cpp's server (the tests' server): weak, but real, and the guard makes its part pay only for
   replies that pass strict extraction and carry no commentary.
4. `training.fidelity` teacher-forced on the held-out trajectories: the RL checkpoint (model) and the
   SFT checkpoint (base), with paired bootstrap CIs of the main metric and of the verifier pass rate,
   in the fidelity report's comparison view beside the real-vs-real ceiling. Decoding is greedy, so two
   evaluations of one checkpoint agree exactly: the noise between them is 0, and "RL does not lower
   fidelity beyond it" is read as: the RL - SFT interval does not lie wholly below 0.

    python -m benchmarks.run world_model_rl     # about 40 minutes on 2 cores; RL_* variables scale it
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from benchmarks.world_model import BASE, COLLECT, _run
from tests.llm_server import serve_llm
from training.fidelity.bootstrap import paired_difference
from training.fidelity.comparison import find_difference

OUT = Path(os.environ.get("RL_OUT", "out/bench/world_model_rl"))
SEQ_LEN = 2048
SFT_STEPS = int(os.environ.get("RL_SFT_STEPS", "20"))
RL_STEPS = int(os.environ.get("RL_STEPS", "30"))
EVAL_TRAJECTORIES = int(os.environ.get("RL_EVAL_TRAJECTORIES", "4"))  # per domain
DOMAINS = ("terminal", "mcp", "search")
EPISODES = {"terminal": "80", "mcp": "30", "search": "30"}


def collect(raw: Path, log: Path) -> None:
    for domain, command in COLLECT:
        if domain in DOMAINS and not (raw / f"domain={domain}").is_dir():
            at = command.index("--episodes") + 1
            command = [*command[:at], EPISODES[domain], *command[at + 1 :]]
            extra = ["--max-steps", "8"] if "--max-steps" not in command else []
            _run([*command, *extra, "--out", str(raw)], log)


def pooled_verified(turns: Path, a: str, b: str) -> dict:
    """a - b in verifier pass rate over every held-out turn of every domain, clustered by trajectory."""
    rows = [json.loads(line) for line in turns.read_text().splitlines() if line.strip()]
    passed = {
        name: {
            (r["trajectory_id"], r["turn_idx"]): float(r["verified"])
            for r in rows
            if r["system"] == name and r["mode"] == "teacher_forced"
        }
        for name in (a, b)
    }
    rate = {n: sum(v.values()) / len(v) for n, v in passed.items() if v}
    return {"a": a, "b": b, "rates": rate, **paired_difference(passed[a], passed[b]).as_dict()}


def run() -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / "log.txt"
    raw, corpus, sft, rl, fidelity = (OUT / n for n in ("raw", "corpus", "sft", "rl", "fidelity"))
    timings: dict[str, float] = {}

    def timed(name: str, module_args: list[str], done: Path | None = None) -> None:
        if done is not None and done.exists():
            return  # a rerun keeps what a finished earlier run made
        t = time.monotonic()
        _run(module_args, log)
        timings[name] = time.monotonic() - t

    t = time.monotonic()
    collect(raw, log)
    timings["collect_s"] = time.monotonic() - t
    build = ["beam_pipelines.build_corpus", "--input", str(raw), "--output", str(corpus), "--tokenizer", BASE]
    timed(
        "corpus_s",
        build + ["--seq-len", str(SEQ_LEN), "--split-ratios", "0.7,0.05,0.25"],
        corpus / "manifest.json",
    )
    train = ["training.sft", "--data", str(corpus), "--base", BASE, "--out", str(sft), "--train-layers", "10"]
    train += ["--max-steps", str(SFT_STEPS), "--batch-size", "1", "--grad-accum", "2", "--lr", "3e-4"]
    train += ["--warmup-steps", "4", "--eval-every", "1000", "--save-every", "1000", "--resume"]
    timed("sft_s", train, sft / "summary.json")
    gspo = ["training.rl", "--corpus", str(corpus), "--base", str(sft), "--out", str(rl)]
    gspo += ["--max-steps", str(RL_STEPS), "--num-generations", "4", "--max-prompt-tokens", "640"]
    gspo += ["--max-completion-tokens", "128", "--train-layers", "10", "--lr", "1e-5", "--beta", "0.01"]
    gspo += ["--save-steps", "10", "--resume"]
    if not (rl / "summary.json").exists():
        with serve_llm() as judge:
            timed("rl_s", [*gspo, "--judge-url", judge.base_url, "--judge-max-chars", "1200"])
    evaluate = [
        "training.fidelity",
        "--real",
        str(raw),
        "--held-out",
        str(corpus),
        "--model",
        str(rl / "final"),
    ]
    evaluate += ["--base", str(sft), "--out", str(fidelity)]
    evaluate += ["--replays", "0", "--no-closed-loop", "--no-progress", "--concurrency", "8"]
    evaluate += ["--limit-trajectories", str(EVAL_TRAJECTORIES), "--max-turns", "2"]
    evaluate += ["--context-chars", str(3 * SEQ_LEN), "--max-new-tokens", "128"]
    timed("fidelity_s", evaluate, fidelity / "report.json")

    report = json.loads((fidelity / "report.json").read_text())
    comparison = report["comparison"]
    rl_summary = json.loads((rl / "summary.json").read_text())
    verified = pooled_verified(fidelity / "turns.jsonl", "model", "base")
    return {
        "rl": {k: rl_summary[k] for k in ("steps", "prompts", "reward_first_third", "reward_last_third")}
        | {
            "components_last_third": rl_summary["components_last_third"],
            "elapsed_s": rl_summary["elapsed_s"],
        },
        "verified_rl_minus_sft": verified,
        "fidelity_rl_minus_sft": fidelity_targets(comparison),
        "comparison": comparison,
        "timings_s": timings,
        "settings": {"base": BASE, "sft_steps": SFT_STEPS, "rl_steps": RL_STEPS, "domains": DOMAINS},
    }


def fidelity_targets(comparison: dict) -> dict:
    """Per domain: RL - SFT on the main metric with its interval, and whether it lies wholly below 0."""
    out = {}
    for domain, entry in comparison["domains"].items():
        d = find_difference(entry, "model", "base")
        out[domain] = {
            "main_metric": entry["main_metric"],
            "rl_minus_sft": d,
            "lower": bool(d and d["ci_high"] is not None and d["ci_high"] < 0),
        }
    return out


def markdown_lines(r: dict) -> list[str]:
    from training.fidelity.comparison import comparison_table, difference_text, rate_table

    def md(header: list[str], body: list[list[str]]) -> list[str]:
        rows = [header, ["---"] * len(header), *body]
        return ["| " + " | ".join(row) + " |" for row in rows]

    rl, v, s = r["rl"], r["verified_rl_minus_sft"], r["settings"]
    parts = ", ".join(f"{k.split('/')[1]} {x:.3f}" for k, x in rl["components_last_third"].items())
    lowered = [d for d, f in r["fidelity_rl_minus_sft"].items() if f["lower"]]
    return [
        f"GSPO (hybrid reward, judge : rules = 9 : 1, the judge SmolLM2-135M on llama.cpp) for {rl['steps']} "
        f"steps on {rl['prompts']} prompts ({rl['elapsed_s']:.0f} s on 2 cores) from an SFT of "
        f"SmolLM2-135M-Instruct ({s['sft_steps']} steps, top 10 layers), domains {', '.join(s['domains'])}. "
        f"Mean reward {rl['reward_first_third']:.3f} in the first third of the steps, "
        f"{rl['reward_last_third']:.3f} in the last ({parts}).",
        "",
        f"Verifier pass rate on the held-out turns ({v['turns']} turns, {v['trajectories']} trajectories): "
        f"RL {v['rates']['model']:.0%}, SFT {v['rates']['base']:.0%}, RL - SFT {difference_text(v)} "
        "(target: above 0).",
        "",
        "Fidelity report comparison (model = RL, base = SFT; * the 95% CI excludes 0):",
        "",
        *md(*comparison_table(r["comparison"])),
        "",
        *md(*rate_table(r["comparison"])),
        "",
        "RL lowers the main metric beyond the evaluation noise (greedy decoding: 0) in: "
        f"{', '.join(lowered) or 'no domain'} (target: none).",
    ]
