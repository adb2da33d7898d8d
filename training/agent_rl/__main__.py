"""python -m training.agent_rl: an agent trained with GRPO in the simulator, tried on the real terminal."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sandboxes.tasks import embedded_tasks, load_tasks
from schemas.records import Task
from training.agent_rl.evaluate import difference, evaluate, side
from training.agent_rl.grpo import GRPOSettings, read_rollouts, train
from training.agent_rl.play import DOMAIN, Agent, Played, Sampling, real_factory, simulated_factory

RESULTS = "results.json"
EXAMPLES = """examples:
  # three demo tasks, 4 GRPO steps of 2 episodes per task (3 steps each), a GGUF world model;
  # the agent is SmolLM2-135M-Instruct, evaluated twice per task before and after in bwrap terminals
  python -m training.agent_rl --world-model out/demo/model.gguf \\
      --task files-create-notes --task files-mkdir-tree --task files-rename \\
      --steps 4 --generations 2 --max-episode-steps 3 --out out/agent_rl/demo
  # a world model served over HTTP (llama.cpp or vLLM), a task file, a bigger agent on a GPU
  python -m training.agent_rl --world-model http://127.0.0.1:8000/v1 --tasks tasks.jsonl \\
      --agent /ckpts/qwen3-0.6b --steps 50 --generations 8 --eval-episodes 8 --out out/agent_rl/gpu
Prints a line per training step and per evaluation episode, then the before/after summary;
OUT/results.json holds every number, OUT/rollouts.jsonl every simulated episode.
Exit status: 0 with results, 2 for a usage error (unknown task, no world model)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.agent_rl",
        description="GRPO of a small agent against the world model's simulated terminal (the simulated "
        "verifier's reward), then the agent before and after on the same tasks in real terminals "
        "(the real verifier's reward), with the paired difference and its bootstrap interval.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, type=Path, help="results directory")
    p.add_argument(
        "--world-model",
        required=True,
        help="the simulator's model: a GGUF file (llama.cpp here), a checkpoint directory, or an "
        "OpenAI-compatible URL",
    )
    p.add_argument(
        "--world-model-max-tokens", type=int, default=160, help="reply cap per simulated step (160)"
    )
    p.add_argument(
        "--agent",
        default="smollm2-135m-instruct",
        help="the agent's starting checkpoint: a built-in base name, a GGUF file or a checkpoint "
        "directory (training.bases.resolve_base; default smollm2-135m-instruct, offline)",
    )
    p.add_argument("--tasks", help="JSONL task file (default: the embedded terminal suite)")
    p.add_argument("--task", action="append", default=[], help="a task id to use (repeat; default: all)")
    p.add_argument("--steps", type=int, default=4, help="GRPO steps (4)")
    p.add_argument("--generations", type=int, default=2, help="episodes per task in each GRPO step (2)")
    p.add_argument("--max-episode-steps", type=int, default=3, help="agent actions per episode at most (3)")
    p.add_argument(
        "--eval-episodes", type=int, default=2, help="real episodes per task, before and after (2)"
    )
    p.add_argument("--temperature", type=float, default=1.0, help="the agent's sampling temperature (1.0)")
    p.add_argument("--max-reply-tokens", type=int, default=48, help="the agent's reply cap per turn (48)")
    p.add_argument("--lr", type=float, default=5e-6, help="learning rate (5e-6)")
    p.add_argument("--beta", type=float, default=0.0, help="KL weight to the starting agent (0)")
    p.add_argument("--seed", type=int, default=0, help="seed of training and evaluation sampling (0)")
    p.add_argument(
        "--real-backend", default="bwrap", choices=("bwrap", "docker"), help="real terminal (bwrap)"
    )
    p.add_argument("--save-agent", action="store_true", help="save the trained agent to OUT/agent")
    args = p.parse_args(argv)
    if min(args.steps, args.generations, args.max_episode_steps, args.eval_episodes) < 1:
        p.error("--steps, --generations, --max-episode-steps and --eval-episodes must be at least 1")
    if args.generations < 2:
        p.error("--generations must be at least 2: GRPO compares episodes within a task's group")
    return args


def pick_tasks(path: str | None, ids: list[str]) -> list[Task]:
    """The tasks to train and evaluate on, in the order given (ValueError naming what is missing)."""
    if path is None:
        specs = embedded_tasks(DOMAIN)
    else:
        specs, errors = load_tasks(path)
        if not specs:
            raise ValueError(f"no valid task in {path}" + (f": {errors[0]}" if errors else ""))
    found = {s.id: s.task for s in specs}
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValueError(f"unknown task id(s) {', '.join(missing)} in {path or 'the embedded suite'}")
    return [found[i] for i in ids] if ids else list(found.values())


def load_agent(spec: str) -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.bases import resolve_base

    path = resolve_base(spec)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    return model, tokenizer, path


def parameter_change(model, start: dict) -> float:
    """The largest absolute change of any weight since `start` (0.0: training moved nothing)."""
    return max(float((p.detach().cpu() - start[n]).abs().max()) for n, p in model.named_parameters())


def report_line(p: Played) -> str:
    reward = "none" if p.reward is None else f"{p.reward:g}"
    return f"  {p.task_id} seed {p.seed}: {p.status}, reward {reward}, actions {len(p.actions)}"


def run(args: argparse.Namespace) -> dict:
    import torch

    tasks = pick_tasks(args.tasks, args.task)
    torch.manual_seed(args.seed)
    model, tokenizer, agent_path = load_agent(args.agent)
    if torch.cuda.is_available():
        model.to("cuda")
    sampling = Sampling(args.temperature, args.max_reply_tokens)
    real = real_factory(args.real_backend)
    args.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    def evaluated(name: str) -> list[Played]:
        print(
            f"real terminal, {name} training: {len(tasks)} tasks x {args.eval_episodes} episodes", flush=True
        )
        clock = time.monotonic()
        found = evaluate(
            Agent(model, tokenizer, sampling),
            real,
            tasks,
            args.eval_episodes,
            args.max_episode_steps,
            args.seed,
            lambda p: print(report_line(p), flush=True),
        )
        timings[f"eval_{name}_s"] = round(time.monotonic() - clock, 1)
        return found

    model.eval()
    before = evaluated("before")
    start = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    settings = GRPOSettings(
        args.steps, args.generations, args.max_episode_steps, args.lr, args.beta, args.seed
    )
    print(
        f"GRPO in the simulator ({args.world_model}): {args.steps} steps x {len(tasks)} tasks x "
        f"{args.generations} episodes",
        flush=True,
    )
    simulated = simulated_factory(args.world_model, args.world_model_max_tokens)
    trained = train(
        model, tokenizer, tasks, sampling, settings, simulated, args.out, lambda line: print(line, flush=True)
    )
    timings["train_s"] = trained["seconds"]
    model.eval()
    change = parameter_change(model, start)
    del start
    after = evaluated("after")
    if args.save_agent:
        model.save_pretrained(args.out / "agent")
        tokenizer.save_pretrained(args.out / "agent")
    rollouts = read_rollouts(args.out)
    results = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "agent": agent_path,
        "tasks": [t.id for t in tasks],
        "simulated": simulated_summary(rollouts, args.steps),
        "training": {"log": trained["log"], "max_weight_change": change},
        "real_before": side(before),
        "real_after": side(after),
        "real_difference": difference(before, after),
        "episodes": {
            "before": [p.summary() for p in before],
            "after": [p.summary() for p in after],
        },
        "timings": timings,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def simulated_summary(rollouts: list[dict], steps: int) -> dict:
    """The training episodes' simulated rewards, step by step (undecided counts as 0 in the mean)."""
    by_step = {}
    for s in range(1, steps + 1):
        rows = [r for r in rollouts if r["step"] == s]
        scores = [r["reward"] or 0.0 for r in rows]
        by_step[str(s)] = {
            "episodes": len(rows),
            "mean_reward": sum(scores) / len(scores) if scores else None,
            "undecided": sum(r["reward"] is None for r in rows),
        }
    return {"episodes": len(rollouts), "by_step": by_step}


def summary_lines(results: dict) -> list[str]:
    b, a, d = results["real_before"], results["real_after"], results["real_difference"]
    ci = (
        "no interval (one task)"
        if d["ci_low"] is None
        else f"95% CI [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    )
    verdict = (
        "a rise whose interval excludes 0"
        if d["excludes_zero"] and d["difference"] > 0
        else (
            "a fall whose interval excludes 0"
            if d["excludes_zero"]
            else "no change the interval can tell from 0"
        )
    )
    sim = results["simulated"]
    undecided = sum(s["undecided"] for s in sim["by_step"].values())
    change = results["training"]["max_weight_change"]
    return [
        f"real reward before {b['mean_reward']:.3f} ({b['successes']}/{b['episodes']} solved), "
        f"after {a['mean_reward']:.3f} ({a['successes']}/{a['episodes']} solved)",
        f"after - before {d['difference']:+.3f}, {ci}, over {d['trajectories']} tasks: {verdict}",
        f"training: {sim['episodes']} simulated episodes ({undecided} undecided), "
        f"{results['timings']['train_s']:.0f} s, largest weight change {change:.2e}",
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        results = run(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in summary_lines(results):
        print(line)
    print(f"results: {args.out / RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
