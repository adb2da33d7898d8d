"""python -m training.fidelity agents: one policy on real and on simulated sandboxes, compared task by task.

The two runs are the domain's own collector, as subprocesses (training does not import collectors:
DESIGN 4): `python -m collectors.<domain> --policy P --tasks FILE --seed S --out OUT/real` and the same
with `--backend simulator --model-endpoint URL` (or `--model-gguf PATH`) `--out OUT/sim`. Both datasets
are then read back and compared by episodes.py; the report goes to OUT/report.{json,md,html}. The same
seed gives each episode slot the same policy randomness on both sides, which is what makes the pairs
comparable.

Several policies (--policy repeated, or --real-data/--sim-data repeated in pairs) are each compared on
their own, then side by side (task_numbers.py: Spearman's rank correlation of their simulated and real
success rates, and the inflation). Each simulated episode's actions are also replayed in a fresh real
sandbox and judged by the real verifier (WM2Real, wm2real.py; --no-wm2real skips it).

A simulated episode's task reward is the world model's verdict (training.simulated_verify): by
likelihood where its backend can score (a GGUF given with --model-gguf: the answers a real check could
record are scored and the likelier is the verdict), else by generation (an endpoint); each verdict's
details say which, with the scores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from sandboxes.domains import domain_spec
from sandboxes.tasks import load_tasks
from schemas import read_trajectories
from schemas.records import Trajectory
from training.fidelity import agents_report
from training.fidelity.episodes import DEFAULT_MATCH, DEFAULT_SUCCESS, compare_datasets, pair_up, summarize
from training.fidelity.noise_floor import default_workers
from training.fidelity.task_numbers import across_policies
from training.fidelity.wm2real import Wm2RealStore, run_wm2real
from training.simulated_verify import METHODS

EXAMPLES = """examples:
  # the scripted solutions of three terminal tasks, in real bubblewrap sandboxes and on the world model
  # a llama.cpp or vLLM server serves at :8000
  python -m training.fidelity agents --policy scripted --tasks tasks.jsonl --backend bwrap \\
      --model-endpoint http://127.0.0.1:8000/v1 --out out/agents/scripted
  # the terminal explorer, 2 episodes of each embedded task, seed 7
  python -m training.fidelity agents --policy explorer --episodes 64 --seed 7 --backend bwrap \\
      --model-endpoint http://127.0.0.1:8000/v1 --model-name sft --out out/agents/explorer
  # an LLM agent (greedy by default, so both sides see the same agent) against the same world model
  python -m training.fidelity agents --policy llm --llm-base-url http://127.0.0.1:8001/v1 \\
      --llm-model qwen3-8b --tasks tasks.jsonl --model-endpoint http://127.0.0.1:8000/v1 --out out/agents/llm
  # the world model as a local GGUF file, run by llama.cpp in the simulated collector (verdicts by likelihood)
  python -m training.fidelity agents --policy scripted --tasks tasks.jsonl --backend bwrap \\
      --model-gguf out/demo/model.gguf --out out/agents/scripted
  # two datasets already recorded (same policy, tasks and seed): no collector runs
  python -m training.fidelity agents --real-data data/real --sim-data data/sim --out out/agents/mine
  # three policies, each run on both sides into out/agents/all/<policy>/, then ranked side by side
  python -m training.fidelity agents --policy scripted --policy explorer --policy llm \
      --llm-base-url http://127.0.0.1:8001/v1 --llm-model qwen3-8b --tasks tasks.jsonl --backend bwrap \
      --model-endpoint http://127.0.0.1:8000/v1 --out out/agents/all
  # the same from three finished runs' datasets: --real-data/--sim-data pair up in the order given
  python -m training.fidelity agents --out out/agents/all \
      --real-data out/agents/scripted/real --sim-data out/agents/scripted/sim \
      --real-data out/agents/explorer/real --sim-data out/agents/explorer/sim \
      --real-data out/agents/llm/real --sim-data out/agents/llm/sim
Rerunning with the same --out resumes both collector runs: finished episodes are kept, the rest recorded;
WM2Real replays already done (OUT/wm2real.jsonl) are read back, not replayed.
Exit status: 0 with a report, 2 for a usage error, a failed collector run or nothing to compare."""

RUN_FILE = "run.json"
WM2REAL_FILE = "wm2real.jsonl"
TAIL_LINES = 40


class AgentsError(Exception):
    """The comparison cannot go on (exit 2); the message says what to do."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.fidelity agents",
        description="Task-level sim-vs-real: the same policy, tasks and seeds on real sandboxes and on the "
        "world model's simulated ones (the domain's collector, run twice), compared episode by episode: "
        "single-step accuracy, agreement on the task reward (confusion matrix, Cohen's kappa, inflation), "
        "WM2Real (the simulated actions replayed for real), steps to the end, and the turn of first "
        "divergence; over several policies, the rank correlation of simulated and real success.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, type=Path, help="report directory; the runs' datasets go under it")
    run = p.add_argument_group("the two collector runs")
    run.add_argument("--domain", default="terminal", help="the domain (or its collector package) to run")
    run.add_argument(
        "--policy",
        action="append",
        default=[],
        help="scripted, explorer, llm, ... (the collector's --policy); repeat it for several policies, "
        "each run into OUT/<policy>/",
    )
    run.add_argument("--tasks", help="JSONL task file (default: the domain's embedded suite)")
    run.add_argument("--episodes", type=int, help="episodes per run (default: each task of --tasks once)")
    run.add_argument("--seed", type=int, default=0, help="run seed, the same on both sides (0)")
    run.add_argument("--max-steps", type=int, default=20, help="steps per episode at most (20)")
    run.add_argument("--sandboxes", type=int, default=1, help="parallel sandboxes per run (1)")
    run.add_argument("--backend", help="the real run's sandbox backend (terminal: docker, bwrap)")
    run.add_argument("--model-endpoint", help="the world model's OpenAI-compatible URL (the simulated run)")
    run.add_argument(
        "--model-gguf",
        help="or the world model as a GGUF file, run by llama.cpp in the simulated collector's process "
        "(it can score, so verdicts by likelihood)",
    )
    run.add_argument("--model-name", help="model name at --model-endpoint (default: the first served)")
    run.add_argument(
        "--simulated-verdicts",
        choices=METHODS,
        help="how the world model is asked the task's verifier (the collector's default: likelihood, "
        "which scores the answers a real check could record, e.g. its screen with PASS and with FAIL, "
        "and takes the likelier; a backend that cannot score, an endpoint, falls back to generation, "
        "which reads the answer the model writes)",
    )
    run.add_argument(
        "--model-max-tokens", type=int, help="reply cap per simulated step (collector's default)"
    )
    run.add_argument("--llm-base-url", help="--policy llm: the agent's OpenAI-compatible URL")
    run.add_argument("--llm-model", help="--policy llm: the agent's model name")
    run.add_argument(
        "--llm-temperature",
        type=float,
        default=0.0,
        help="--policy llm: sampling temperature (0: greedy, so both sides face the same agent)",
    )
    run.add_argument("--llm-max-tokens", type=int, help="--policy llm: reply cap per step")
    run.add_argument(
        "--collector-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for both collector runs, e.g. --collector-arg=--command-timeout=10",
    )
    run.add_argument("--timeout", type=float, default=3600.0, help="seconds each collector run may take")
    given = p.add_argument_group("or compare two datasets already recorded")
    given.add_argument(
        "--real-data", action="append", default=[], help="dataset of the real run (repeat: one per policy)"
    )
    given.add_argument(
        "--sim-data",
        action="append",
        default=[],
        help="dataset of the simulated run (repeat: the n-th pairs with the n-th --real-data)",
    )
    replay = p.add_argument_group("WM2Real: the simulated actions replayed in fresh real sandboxes")
    replay.add_argument(
        "--no-wm2real",
        dest="wm2real",
        action="store_false",
        help="skip the replays (then single-step accuracy treats every span of a real observation as stable)",
    )
    replay.add_argument(
        "--wm2real-workers",
        type=int,
        default=default_workers(),
        help=f"real sandboxes replaying at once ({default_workers()} here)",
    )
    score = p.add_argument_group("scoring")
    score.add_argument(
        "--success-threshold",
        type=float,
        default=DEFAULT_SUCCESS,
        help=f"a reward at least this is a success ({DEFAULT_SUCCESS})",
    )
    score.add_argument(
        "--match-threshold",
        type=float,
        default=DEFAULT_MATCH,
        help="a simulated observation below this on the domain's main fidelity metric (edit similarity for "
        f"terminal, tree F1 for web, ...) no longer matches the real one ({DEFAULT_MATCH})",
    )
    args = p.parse_args(argv)
    if len(args.real_data) != len(args.sim_data):
        p.error("--real-data and --sim-data go together, as many of each")
    if args.real_data and args.policy:
        p.error("give --policy (collector runs) or --real-data/--sim-data (recorded datasets), not both")
    if len(set(args.policy)) != len(args.policy):
        p.error("a --policy given twice")
    if not args.real_data:
        if not args.policy:
            p.error("give --policy (or --real-data and --sim-data to compare recorded datasets)")
        if bool(args.model_endpoint) == bool(args.model_gguf):
            p.error(
                "the simulated run needs --model-endpoint URL (e.g. http://127.0.0.1:8000/v1) or "
                "--model-gguf PATH, one of them"
            )
        if "llm" in args.policy and not (args.llm_base_url and args.llm_model):
            p.error("--policy llm needs --llm-base-url URL and --llm-model NAME")
    try:
        domain_spec(args.domain)
    except ValueError as exc:
        p.error(str(exc))
    if args.episodes is not None and args.episodes < 1 or args.max_steps < 1 or args.sandboxes < 1:
        p.error("--episodes, --max-steps and --sandboxes must be at least 1")
    if args.wm2real_workers < 1:
        p.error("--wm2real-workers must be at least 1")
    return args


def policy_out(args: argparse.Namespace, policy: str) -> Path:
    """Where one policy's runs go: OUT itself for a single policy, OUT/<policy> for several."""
    return args.out / policy if len(args.policy) > 1 else args.out


def collector_argv(args: argparse.Namespace, policy: str, side: str) -> list[str]:
    """The collector command line of one policy's side ("real" or "sim"), its --out under its folder."""
    module = f"collectors.{domain_spec(args.domain).package}"
    argv = [sys.executable, "-m", module, "--policy", policy, "--seed", str(args.seed)]
    argv += ["--max-steps", str(args.max_steps), "--sandboxes", str(args.sandboxes), "--no-progress"]
    argv += ["--out", str(policy_out(args, policy) / side)]
    for flag, value in (("--tasks", args.tasks), ("--episodes", args.episodes)):
        if value is not None:
            argv += [flag, str(value)]
    if policy == "llm":
        argv += ["--llm-base-url", args.llm_base_url, "--llm-model", args.llm_model]
        argv += ["--llm-temperature", str(args.llm_temperature)]
        if args.llm_max_tokens:
            argv += ["--llm-max-tokens", str(args.llm_max_tokens)]
    if side == "real":
        argv += ["--backend", args.backend] if args.backend else []
    else:
        argv += ["--backend", "simulator"]
        if args.model_gguf:
            argv += ["--model-gguf", args.model_gguf]
        else:
            argv += ["--model-endpoint", args.model_endpoint]
            argv += ["--model-name", args.model_name] if args.model_name else []
        argv += ["--simulated-verdicts", args.simulated_verdicts] if args.simulated_verdicts else []
        argv += ["--model-max-tokens", str(args.model_max_tokens)] if args.model_max_tokens else []
    return argv + list(args.collector_arg)


def check_tasks(path: str | None) -> int | None:
    """The number of valid tasks in --tasks (None: the embedded suite); AgentsError when there are none."""
    if path is None:
        return None
    try:
        specs, errors = load_tasks(path)
    except OSError as exc:
        raise AgentsError(f"cannot read --tasks {path}: {exc}") from exc
    if not specs:
        shown = "; ".join(str(e) for e in errors[:3])
        raise AgentsError(f"no valid tasks in {path}" + (f" ({shown})" if shown else ""))
    return len(specs)


def claim_out(out: Path, plan: dict) -> None:
    """OUT/run.json holds the plan; once a run has recorded anything, a rerun resumes only the same plan,
    since a collector's resume keys episodes by (domain, seed, slot, task) and would keep another
    policy's episodes as if they were these."""
    path = out / RUN_FILE
    recorded = any((out / side).is_dir() and any((out / side).iterdir()) for side in ("real", "sim"))
    if path.exists() and recorded:
        before = json.loads(path.read_text())
        if before != plan:
            changed = sorted(k for k in plan.keys() | before.keys() if plan.get(k) != before.get(k))
            raise AgentsError(
                f"{out} holds a run with other settings ({', '.join(changed)}): give another --out, "
                "or remove it to start over"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1) + "\n")


def run_collector(argv: list[str], log: Path, timeout: float) -> dict:
    """Run one collector to the end, its output into `log`; AgentsError with its stderr tail on failure."""
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AgentsError(f"{' '.join(argv[2:4])} ran past --timeout {timeout:g} s; rerun to resume") from exc
    log.write_text(f"$ {' '.join(argv)}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).splitlines()[-TAIL_LINES:])
        raise AgentsError(
            f"{argv[2]} exited with {done.returncode} (full output: {log}):\n{tail}\n"
            f"  command: {' '.join(argv)}"
        )
    return {"argv": argv, "seconds": round(time.monotonic() - started, 1), "log": str(log)}


def read_side(path: str, side: str) -> list[Trajectory]:
    try:
        found = list(read_trajectories(path))
    except Exception as exc:
        raise AgentsError(f"cannot read the {side} dataset {path}: {exc}") from exc
    if not found:
        raise AgentsError(f"the {side} dataset {path} holds no episode")
    return found


def simulator_of(sim: list[Trajectory]) -> dict:
    """What stood in for the environment, as the first simulated episode recorded it."""
    env = sim[0].environment
    return {"environment": env.backend, "client": env.config.get("backend"), "model": env.config.get("model")}


def run_policy(args: argparse.Namespace, policy: str, tasks: int | None) -> dict:
    """Both collector runs of one policy, into its folder; what each run did."""
    out = policy_out(args, policy)
    plan = {side: collector_argv(args, policy, side)[1:] for side in ("real", "sim")}  # not the interpreter
    claim_out(out, plan)
    runs = {}
    for side in ("real", "sim"):
        runs[side] = run_collector(
            collector_argv(args, policy, side), out / "logs" / f"{side}.log", args.timeout
        )
        runs[side]["tasks"] = tasks
    return runs


def run_label(real: list[Trajectory], taken: set[str]) -> str:
    """A recorded run's name in the report: its real episodes' policy names, made unique."""
    base = "+".join(sorted({t.policy.name for t in real})) or "run"
    label, n = base, 1
    while label in taken:
        n += 1
        label = f"{base}#{n}"
    return label


def run(args: argparse.Namespace) -> dict:
    started = time.monotonic()
    inputs: list[tuple[str | None, str, str, dict]] = []  # (label, real path, sim path, collector runs)
    if args.real_data:
        inputs = [(None, r, s, {}) for r, s in zip(args.real_data, args.sim_data, strict=True)]
    else:
        tasks = check_tasks(args.tasks)
        for policy in args.policy:
            out = policy_out(args, policy)
            inputs.append((policy, str(out / "real"), str(out / "sim"), run_policy(args, policy, tasks)))
    store = Wm2RealStore(args.out / WM2REAL_FILE) if args.wm2real else None
    policies: dict[str, dict] = {}
    rows: list[dict] = []
    real_only: list = []
    sim_only: list = []
    names: set[str] = set()
    for label, real_path, sim_path, runs in inputs:
        real, sim = read_side(real_path, "real"), read_side(sim_path, "simulated")
        names |= {t.policy.name for t in real}
        label = label or run_label(real, set(policies))
        try:
            pairs, alone_real, alone_sim = pair_up(real, sim)
            replays = run_wm2real(pairs, store, args.wm2real_workers) if store is not None else None
            domains, found = compare_datasets(
                real, sim, args.success_threshold, args.match_threshold, replays, label
            )
        except ValueError as exc:
            raise AgentsError(str(exc)) from exc
        if not found:
            raise AgentsError(
                f"no episode of {real_path} has a partner in {sim_path}: pair runs of the same tasks and seed"
            )
        rows += found
        real_only += alone_real
        sim_only += alone_sim
        policies[label] = {
            "real_data": real_path,
            "sim_data": sim_path,
            "simulator": simulator_of(sim),
            "collector_runs": runs,
            "domains": domains,
        }
    pooled = summarize(rows, real_only, sim_only)
    across = {
        d: across_policies(
            {name: [r for r in rows if r["run"] == name and r["domain"] == d] for name in policies}
        )
        for d in pooled
    }
    first = next(iter(policies.values()))
    meta = {
        "real_data": [p["real_data"] for p in policies.values()],
        "sim_data": [p["sim_data"] for p in policies.values()],
        "policy": sorted(names),
        "runs": list(policies),
        "simulator": first["simulator"],
        "success_threshold": args.success_threshold,
        "match_threshold": args.match_threshold,
        "wm2real": str(args.out / WM2REAL_FILE) if store is not None else None,
        "seconds": round(time.monotonic() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    return agents_report.build(pooled, rows, meta, policies, across)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = run(args)
    except AgentsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    paths = agents_report.write_all(report, args.out)
    for line in agents_report.summary_lines(report):
        print(line)
    print(f"report: {paths['md']}  ({paths['json'].name}, {paths['html'].name})")
    return 0
