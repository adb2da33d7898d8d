"""Task rewards in every domain: the oracle's against the explorer's, and what verification costs.

Per domain, the embedded tasks that have a verifier are run twice through the domain's own collector
CLI on real sandboxes: once with `--policy scripted` (each task's own actions: the oracle) and once
with `--policy explorer` (the default policy, bounded to EXPLORER_STEPS steps); where the verifier
runs a program, an LLM agent also runs the first LLM_TASKS tasks. The Harbor task
folders of the terminal domain run the same way through `--harbor-tasks` (their oracle is
`solution/solve.sh`). Every figure is read back from the written trajectories: `outcome.reward`, and
`outcome.verification.elapsed_s` against the episode's wall time (provenance finished - started).

Targets (issue "Tasks that verify themselves"): the oracle reaches reward 1 on at least 95% of the
tasks that have a verifier, in every domain (failures named); verification costs at most 10% of the
episode's wall time, median per domain (over both policies' episodes).

    python -m benchmarks.run task_rewards      # about 15 minutes on 2 cores
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from collectors.tasks import embedded_tasks
from collectors.terminal.harbor import NOTHING_SUFFIX, ORACLE_SUFFIX
from schemas import read_trajectories
from schemas.records import Trajectory
from tests.llm_server import MODEL_NAME, LLMServer, serve_llm

ROOT = Path(__file__).resolve().parents[1]
ORACLE_TARGET = 0.95
VERIFY_SHARE_TARGET = 0.10
EXPLORER_STEPS = 8
POLICIES = ("oracle", "explorer", "llm")
# An LLM agent's episodes (SmolLM2-135M on llama.cpp, tests/llm_server.py) where the verifier runs a
# program (check commands, the test suite, test.sh): what verification costs beside episodes whose
# steps wait for a model, as in RL.
LLM_DOMAINS = {"terminal", "swe", "terminal-harbor"}
LLM_TASKS = 6
LLM_STEPS = 4
HARBOR_TASKS = ROOT / "collectors" / "terminal" / "harbor_tasks"

# domain -> (collector package, its fleet arguments on this machine)
DOMAINS: dict[str, tuple[str, list[str]]] = {
    "terminal": ("terminal", ["--backend", "bwrap", "--sandboxes", "2"]),
    "swe": ("swe", ["--sandboxes", "2"]),
    "web": ("web", ["--browsers", "2"]),
    "search": ("search", ["--workers", "2"]),
    "mcp": ("mcp", ["--workers", "2"]),
    "os": ("desktop", ["--displays", "2"]),
    "android": ("android", ["--fake-driver", "--emulators", "2"]),
}


def _verifiable(package: str) -> tuple[list[dict], int]:
    """The embedded tasks with a verifier, as JSONL rows, and how many say they have none. Android's
    are its fake-driver app tasks: the others need a real device."""
    rows, without = [], 0
    for spec in embedded_tasks(package):
        task = spec.task
        if package == "android" and "app" not in task.metadata:
            continue
        if task.verifier.get("kind", "none") == "none":
            without += 1
            continue
        row = {"id": task.id, "instruction": task.instruction, "setup": task.setup, "actions": spec.actions}
        row.update(max_steps=task.max_steps, metadata=task.metadata, verifier=task.verifier)
        rows.append(row)
    return rows, without


def _collect(package: str, args: list[str], out: Path) -> float:
    argv = [sys.executable, "-m", f"collectors.{package}", *args, "--out", str(out), "--no-progress"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def _wall_s(t: Trajectory) -> float:
    return (t.provenance.finished_at - t.provenance.started_at).total_seconds()


def summarise(trajectories: list[Trajectory]) -> dict:
    """Rewards and verification cost of one policy's episodes."""
    verified = [t for t in trajectories if t.outcome.verification is not None]
    rewards = [t.outcome.reward for t in verified if t.outcome.reward is not None]
    shares = [t.outcome.verification.elapsed_s / _wall_s(t) for t in verified if _wall_s(t) > 0]
    failures = [
        {
            "task": t.task.id,
            "status": t.outcome.status,
            "reward": t.outcome.reward,
            "why": (t.outcome.verification.error if t.outcome.verification else t.outcome.error)
            or (t.outcome.verification.output[-300:] if t.outcome.verification else "no verification ran"),
        }
        for t in trajectories
        if t.outcome.reward != 1.0
    ]
    return {
        "episodes": len(trajectories),
        "verified": len(rewards),
        "verifier_errors": len(verified) - len(rewards),
        "reward_1": sum(r == 1.0 for r in rewards),
        "share_reward_1": sum(r == 1.0 for r in rewards) / len(trajectories) if trajectories else 0.0,
        "mean_reward": statistics.fmean(rewards) if rewards else None,
        "verify_s_median": statistics.median(t.outcome.verification.elapsed_s for t in verified)
        if verified
        else None,
        "episode_s_median": statistics.median(map(_wall_s, trajectories)) if trajectories else None,
        "verify_share_median": statistics.median(shares) if shares else None,
        "failures": failures,
        "_shares": shares,
    }


def _run_policies(name: str, package: str, args: list[str], work: Path, llm: LLMServer | None) -> dict:
    """Oracle, explorer and (where `llm`) the LLM agent on the first LLM_TASKS tasks, each summarised.
    Harbor runs record each task's oracle episode (`<task>#oracle`) and do-nothing episode
    (`<task>#nothing`, the check that test.sh rewards no empty run) before the policy's: the oracle's
    count for the oracle only, the do-nothing ones for none."""
    harbor = "--harbor-tasks" in args
    runs = {
        "oracle": ["--policy", "scripted"],
        "explorer": ["--policy", "explorer", "--max-steps", str(EXPLORER_STEPS)],
    }
    if llm is not None:
        runs["llm"] = ["--policy", "llm", "--llm-base-url", llm.base_url, "--llm-model", llm.model]
        runs["llm"] += ["--llm-max-tokens", "96", "--max-steps", str(LLM_STEPS)]
    result: dict = {}
    for policy, extra in runs.items():
        out = work / f"{name}-{policy}"
        limit = ["--episodes", str(LLM_TASKS)] if policy == "llm" and not harbor else []
        seconds = _collect(package, [*args, *extra, *limit], out)
        episodes = list(read_trajectories(str(out)))
        if harbor:
            episodes = [t for t in episodes if not t.task.id.endswith(NOTHING_SUFFIX)]
        if harbor and policy != "oracle":
            episodes = [t for t in episodes if not t.task.id.endswith(ORACLE_SUFFIX)]
        result[policy] = {**summarise(episodes), "run_s": seconds}
    return result


def _domain(name: str, package: str, args: list[str], work: Path, llm: LLMServer | None) -> dict:
    rows, without = _verifiable(package)
    tasks = work / f"{name}.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # The fake driver's tasks carry their app by name, which only the collector's own selection loads.
    source = ["--episodes", str(len(rows))] if package == "android" else ["--tasks", str(tasks)]
    result: dict = {"tasks_with_verifier": len(rows), "tasks_without_verifier": without}
    return {**result, **_run_policies(name, package, [*args, *source], work, llm)}


def _harbor(work: Path, llm: LLMServer | None) -> dict:
    folders = sorted(p for p in HARBOR_TASKS.iterdir() if (p / "task.toml").exists())
    result: dict = {"tasks_with_verifier": len(folders), "tasks_without_verifier": 0}
    args = ["--harbor-tasks", str(HARBOR_TASKS), "--map-base-images"]
    return {**result, **_run_policies("harbor", "terminal", args, work, llm)}


def run() -> dict:
    work = Path(tempfile.mkdtemp(prefix="task-rewards-bench-"))
    domains: dict[str, dict] = {}
    with serve_llm() as llm:
        jobs = [
            (
                name,
                lambda n=name, p=package, a=args: _domain(n, p, a, work, llm if n in LLM_DOMAINS else None),
            )
            for name, (package, args) in DOMAINS.items()
        ]
        jobs.append(("terminal-harbor", lambda: _harbor(work, llm)))
        for name, job in jobs:
            try:
                domains[name] = job()
            except Exception as exc:  # one domain's failure is a result, not the end of the benchmark
                domains[name] = {"error": f"{type(exc).__name__}: {exc}"[-2000:]}
    for result in domains.values():
        if "error" in result:
            continue
        shares = [share for policy in POLICIES if policy in result for share in result[policy].pop("_shares")]
        result["verify_share_median"] = statistics.median(shares) if shares else None
        result["oracle_target_met"] = result["oracle"]["share_reward_1"] >= ORACLE_TARGET
        result["verify_share_target_met"] = shares != [] and statistics.median(shares) <= VERIFY_SHARE_TARGET
    return {
        "targets": {"oracle_share_reward_1": ORACLE_TARGET, "verify_share_median": VERIFY_SHARE_TARGET},
        "explorer_max_steps": EXPLORER_STEPS,
        "llm": {
            "model": MODEL_NAME,
            "domains": sorted(LLM_DOMAINS),
            "tasks": LLM_TASKS,
            "max_steps": LLM_STEPS,
        },
        "domains": domains,
        "cpus": os.cpu_count(),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _verdict(r: dict) -> str:
    oracle = "met" if r["oracle_target_met"] else "NOT met"
    cost = "met" if r["verify_share_target_met"] else "NOT met"
    return f"oracle {oracle}, cost {cost}"


def _rewards(p: dict | None) -> str:
    return "-" if p is None else f"{_num(p['mean_reward'])} ({p['reward_1']}/{p['episodes']})"


def markdown_lines(result: dict) -> list[str]:
    llm = result["llm"]
    lines = [
        f"Oracle = each task's own scripted actions; explorer = the default policy, "
        f"{result['explorer_max_steps']} steps at most; LLM = {llm['model']} on llama.cpp as the agent, "
        f"{llm['max_steps']} steps at most, on the first {llm['tasks']} tasks of "
        f"{', '.join(llm['domains'])}. "
        "Targets: oracle reward 1 on >= 95% of the tasks with a verifier; verification <= 10% of the "
        "episode's wall time (median over all the domain's episodes below). Verify share per policy: the "
        "median of verification time / episode wall time.",
        "",
        "| domain | tasks with / without verifier | oracle reward 1 | explorer mean reward (reward 1) "
        "| LLM mean reward (reward 1) | verify s (median) | episode s oracle / explorer / LLM "
        "| verify share oracle / explorer / LLM | verify share (all) | targets |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    for name, r in result["domains"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error'][:200]} | | | | | | | | |")
            continue
        o, e, m = r["oracle"], r["explorer"], r.get("llm")
        cells = [
            name,
            f"{r['tasks_with_verifier']} / {r['tasks_without_verifier']}",
            f"{o['reward_1']}/{o['episodes']} ({_pct(o['share_reward_1'])})",
            _rewards(e),
            _rewards(m),
            _num(o["verify_s_median"], ".3f"),
            " / ".join(_num(p["episode_s_median"]) if p else "-" for p in (o, e, m)),
            " / ".join(_pct(p["verify_share_median"]) if p else "-" for p in (o, e, m)),
            _pct(r["verify_share_median"]),
            _verdict(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        for f in o["failures"]:
            failures.append(
                f"- {name}: `{f['task']}` reward {f['reward']} ({f['status']}): {f['why'][:200]!r}"
            )
    lines += ["", "Oracle failures:" if failures else "Oracle failures: none.", *failures]
    return lines
