"""An agent trained in the simulator, tried for real (issue 38, item 3), at a CPU budget.

`python -m training.agent_rl` trains SmolLM2-135M-Instruct with GRPO against the simulated terminal
(the world model below, on llama.cpp in the process) on the demo's three terminal tasks, then plays
the same tasks in real bubblewrap terminals before and after; the result is the real reward's
difference (after - before) with its paired bootstrap interval, clustered by task.

CPU budget (stated, and what the defaults below give): 3 tasks x 2 episodes per GRPO step x 3 GRPO
steps of at most 3 agent actions (48 tokens a reply), 2 real episodes per task before and after:
about 20-30 minutes on 2 shared cores. SIM_AGENT_* variables scale it; benchmarks/gpu_check.sh runs
the same command at a GPU's budget.

World model: SIM_AGENT_WORLD_MODEL, else the world_model bench's trained one
(out/bench/world_model/sft-full.gguf), else its base export (base.gguf), else SmolLM2's own GGUF;
the results name the one used and whether it was trained.

    python -m benchmarks.run sim_trained_agent
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.llm_server import smollm2_gguf

OUT = Path(os.environ.get("SIM_AGENT_OUT", "out/bench/sim_trained_agent"))
WORLD_MODELS = Path("out/bench/world_model")
TASKS = ("files-create-notes", "files-mkdir-tree", "files-rename")  # the Makefile's demo-agents tasks
BUDGET = {
    "steps": int(os.environ.get("SIM_AGENT_STEPS", "3")),
    "generations": int(os.environ.get("SIM_AGENT_GENERATIONS", "2")),
    "max_episode_steps": int(os.environ.get("SIM_AGENT_EPISODE_STEPS", "3")),
    "eval_episodes": int(os.environ.get("SIM_AGENT_EVAL_EPISODES", "2")),
    "max_reply_tokens": 48,
    "world_model_max_tokens": 160,
    "lr": 5e-6,
}


def world_model() -> tuple[str, str]:
    """(the world model's path, what it is)."""
    given = os.environ.get("SIM_AGENT_WORLD_MODEL")
    if given:
        return given, "given by SIM_AGENT_WORLD_MODEL"
    for name, what in (
        ("sft-full.gguf", "the world_model bench's SFT of SmolLM2-135M-Instruct (full targets), trained"),
        ("base.gguf", "the world_model bench's base export: SmolLM2-135M-Instruct, NOT trained"),
    ):
        if (WORLD_MODELS / name).is_file():
            return str(WORLD_MODELS / name), what
    return str(smollm2_gguf()), "SmolLM2-135M-Instruct's own GGUF, NOT trained as a world model"


def command(model: str) -> list[str]:
    argv = [sys.executable, "-m", "training.agent_rl", "--world-model", model, "--out", str(OUT)]
    for task in TASKS:
        argv += ["--task", task]
    for key, value in BUDGET.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def run() -> dict:
    model, what = world_model()
    argv = command(model)
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with (OUT / "log.txt").open("w") as log:
        done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"training.agent_rl exited with {done.returncode}: see {OUT / 'log.txt'}")
    results = json.loads((OUT / "results.json").read_text())
    return {
        "command": " ".join(["python", *argv[1:]]),
        "world_model": {"path": model, "what": what},
        "budget": {**BUDGET, "tasks": list(TASKS)},
        "real_before": results["real_before"],
        "real_after": results["real_after"],
        "real_difference": results["real_difference"],
        "simulated": results["simulated"],
        "max_weight_change": results["training"]["max_weight_change"],
        "timings_s": {**results["timings"], "total_s": round(time.monotonic() - started, 1)},
    }


def markdown_lines(r: dict) -> list[str]:
    b, a, d, t = r["real_before"], r["real_after"], r["real_difference"], r["timings_s"]
    ci = "none (one task)" if d["ci_low"] is None else f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    rise = d["excludes_zero"] and d["difference"] > 0
    sim = r["simulated"]["by_step"]
    decided = sum(s["episodes"] - s["undecided"] for s in sim.values())
    episodes = sum(s["episodes"] for s in sim.values())
    budget = r["budget"]
    return [
        f"GRPO of SmolLM2-135M-Instruct in the simulator: {budget['steps']} steps x {len(budget['tasks'])} "
        f"tasks x {budget['generations']} episodes of at most {budget['max_episode_steps']} actions; "
        f"world model: {r['world_model']['what']} ({r['world_model']['path']}).",
        "",
        "| real terminal (bwrap) | episodes | mean reward | solved | valid actions |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {s['episodes']} | {s['mean_reward']:.3f} | {s['successes']} "
            f"| {s['valid_actions']}/{s['actions']} |"
            for name, s in (("before", b), ("after", a))
        ),
        "",
        f"After - before: {d['difference']:+.3f}, 95% CI {ci} over {d['trajectories']} tasks "
        f"({d['turns']} paired episodes): "
        + (
            "a rise whose interval excludes 0."
            if rise
            else "NOT a rise whose interval excludes 0 (the target)."
        ),
        "",
        f"Simulated verdicts decided in {decided} of {episodes} training episodes; mean simulated reward "
        "by step: "
        + ", ".join(f"{k}: {s['mean_reward']:.3f}" for k, s in sim.items() if s["episodes"])
        + "; "
        f"largest weight change {r['max_weight_change']:.2e}.",
        "",
        f"Time: training {t['train_s']:.0f} s, real evaluation {t['eval_before_s']:.0f} s before and "
        f"{t['eval_after_s']:.0f} s after, {t['total_s']:.0f} s in all.",
    ]
