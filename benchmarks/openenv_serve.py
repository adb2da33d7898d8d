"""The OpenEnv server (`python -m sandboxes.serve`) under load, against baselines in the same run.

- `hop`: the median terminal step on bwrap through the server (openenv-core's own client over the
  WebSocket session) against the same step in-process (SandboxEnvironment), interleaved episode by
  episode so drift hits both. Target: the hop adds at most 1 ms to the median.
- `simulator_64`: 64 concurrent simulated-terminal sessions against one llama.cpp endpoint, steps/s,
  against the endpoint's own throughput at the same concurrency: 64 threads of a bare `openai` client
  loop sending the very prompts the simulator sends (recorded from one simulated episode), with the
  same max_tokens. Target: >= 0.8x.
- `soak_256`: 256 concurrent simulator sessions held for 5 minutes, each stepping now and then; errors,
  the server's RSS and threads over time, memory per session, and that every session and thread is
  gone after the clients leave. Target: no error, no leak.

llama.cpp's server here answers one request at a time (no parallel slots), so 64 in flight measures
the cost our server adds around a saturated endpoint, not batching.

    python -m benchmarks.openenv_serve [hop|simulator_64|soak_256 ...] [--soak-seconds 300] [--write]

`--write` merges what ran into benchmarks/results/openenv_serve.json and .md (as `make bench` writes
them), keeping the results of the benches not rerun, each with the time it finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import psutil

from sandboxes.serve.client import connect
from sandboxes.serve.environment import SandboxEnvironment
from sandboxes.serve.models import SandboxAction
from sandboxes.tasks import embedded_tasks
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from tests.llm_server import free_port, serve_llm
from training.backends.base import GenerationConfig, WorldModelBackend
from training.backends.openai_http import OpenAIBackend
from training.simulator import SimulatedSandbox

HOP_TASK = "nav-list-home"
HOP_COMMANDS = ("true", "echo hop", "pwd", "echo $((6*7))")
HOP_TARGET_MS = 1.0
THROUGHPUT_TARGET = 0.8
SIM_MAX_TOKENS = 16  # each simulated step generates at most this many tokens, in both paths
# A step may wait behind every other session's request at the one endpoint.
QUEUED_STEP_TIMEOUT_S = 900.0
LEAK_ROUNDS = 3


@contextmanager
def server(*args: str) -> Iterator[tuple[str, psutil.Process]]:
    """`python -m sandboxes.serve ARGS` on a free loopback port until exit: (base URL, its process)."""
    port = free_port()
    argv = [sys.executable, "-m", "sandboxes.serve", *args, "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("serving "):
                break
        else:
            raise RuntimeError(f"the server exited with {proc.wait()}:\n{''.join(lines[-30:])}")
        # keep draining its output so a chatty server never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}", psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


# -- hop -------------------------------------------------------------------------------------------


async def _hop_steps(url: str, local: SandboxEnvironment, episodes: int) -> tuple[list[float], list[float]]:
    """Step times in-process and through the server, alternating episode by episode (not step by step:
    a step's tail work in one sandbox's tmux would land on the other's clock). openenv's async client is
    the one timed: its `.sync()` wrapper adds a hop to its own event-loop thread on the client side."""
    in_process, served = [], []
    async with connect(url) as client:
        for _ in range(episodes):
            local.reset(task_id=HOP_TASK)
            for command in HOP_COMMANDS:
                action = SandboxAction(kind="command", arguments={"command": command})
                clock = time.perf_counter()
                local.step(action)
                in_process.append(time.perf_counter() - clock)
            await client.reset(task_id=HOP_TASK)
            for command in HOP_COMMANDS:
                clock = time.perf_counter()
                await client.step({"kind": "command", "arguments": {"command": command}})
                served.append(time.perf_counter() - clock)
    return in_process, served


def hop(episodes: int = 60) -> dict[str, Any]:
    tasks = [spec.task for spec in embedded_tasks("terminal")]
    local = SandboxEnvironment(
        lambda: TerminalSandbox(TerminalConfig(backend=make_backend("bwrap"))), tasks, domain="terminal",
        max_steps=len(HOP_COMMANDS) + 1,
    )  # fmt: skip
    with server("--domain", "terminal", "--backend", "bwrap", "--max-sessions", "2") as (url, _):
        in_process, served = asyncio.run(_hop_steps(url, local, episodes))
    local.close()
    added = _median_ms(served) - _median_ms(in_process)
    return {
        "task": HOP_TASK,
        "commands": list(HOP_COMMANDS),
        "steps_each": len(served),
        "in_process_median_ms": _median_ms(in_process),
        "served_median_ms": _median_ms(served),
        "added_median_ms": added,
        "target_ms": HOP_TARGET_MS,
        "met": added <= HOP_TARGET_MS,
    }


# -- simulator throughput ---------------------------------------------------------------------------


def _simulator_prompts(endpoint: str, model: str, steps: int) -> list[list[dict]]:
    """The chat requests the simulated terminal sends over one episode, rendered by the same code the
    server runs (training.simulator), kept for the bare loop."""

    class Recording(WorldModelBackend):
        name = "recording"

        def __init__(self) -> None:
            self.inner = OpenAIBackend(endpoint, model)
            self.prompts: list[list[dict]] = []

        def complete(self, messages: list[dict], config: GenerationConfig) -> str:
            self.prompts.append(messages)
            return self.inner.complete(messages, config)

    backend = Recording()
    sandbox = SimulatedSandbox(
        backend, "terminal", generation=GenerationConfig(max_new_tokens=SIM_MAX_TOKENS)
    )
    task = next(spec.task for spec in embedded_tasks("terminal") if spec.id == HOP_TASK)
    with sandbox:
        sandbox.reset(task)
        for n in range(steps):
            sandbox.step(command_action(HOP_COMMANDS[n % len(HOP_COMMANDS)]))
    return backend.prompts


def _bare_loop(endpoint: str, model: str, prompts: list[list[dict]], sessions: int, seconds: float) -> dict:
    client = openai.OpenAI(base_url=endpoint, api_key="EMPTY", max_retries=0, timeout=600)
    done, tokens, errors = [0] * sessions, [0] * sessions, [0] * sessions
    deadline = time.monotonic() + seconds

    def worker(i: int) -> None:
        n = i
        while time.monotonic() < deadline:
            try:
                reply = client.chat.completions.create(
                    model=model,
                    messages=prompts[n % len(prompts)],
                    max_tokens=SIM_MAX_TOKENS,
                    temperature=0.0,
                )  # type: ignore[arg-type]
                done[i] += 1
                tokens[i] += reply.usage.completion_tokens if reply.usage else 0
            except openai.OpenAIError:
                errors[i] += 1
            n += 1

    clock = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - clock
    return {"requests": sum(done), "errors": sum(errors), "seconds": elapsed, "per_s": sum(done) / elapsed,
            "completion_tokens": sum(tokens)}  # fmt: skip


async def _served_loop(url: str, sessions: int, seconds: float, steps_per_episode: int) -> dict:
    done, errors = [0] * sessions, []
    deadline = time.monotonic() + seconds

    async def session(i: int) -> None:
        n = i
        try:
            async with connect(url, message_timeout_s=QUEUED_STEP_TIMEOUT_S) as client:
                await client.reset(task_id=HOP_TASK)
                while time.monotonic() < deadline:
                    if n % steps_per_episode == 0 and n != i:
                        await client.reset(task_id=HOP_TASK)
                    command = HOP_COMMANDS[n % len(HOP_COMMANDS)]
                    await client.step({"kind": "command", "arguments": {"command": command}})
                    done[i] += 1
                    n += 1
        except Exception as exc:  # counted, never fatal: the benchmark reports errors
            errors.append(f"{type(exc).__name__}: {exc}")

    clock = time.monotonic()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    elapsed = time.monotonic() - clock
    return {"steps": sum(done), "errors": len(errors), "error_samples": errors[:5], "seconds": elapsed,
            "per_s": sum(done) / elapsed}  # fmt: skip


def _total(blocks: list[dict], count: str) -> dict[str, Any]:
    done, seconds = sum(b[count] for b in blocks), sum(b["seconds"] for b in blocks)
    errors = sum(b["errors"] for b in blocks)
    return {count: done, "seconds": seconds, "per_s": done / seconds, "errors": errors,
            "blocks_per_s": [b["per_s"] for b in blocks]}  # fmt: skip


def simulator_64(sessions: int = 64, block_s: float = 60.0, rounds: int = 2) -> dict[str, Any]:
    """Bare and served blocks alternate (bare, served, bare, served, ...) so that a slow spell of the
    machine lands on both; each side's rate is its requests over its blocks' time, tails included."""
    bare_blocks, served_blocks = [], []
    with serve_llm() as llm:
        prompts = _simulator_prompts(llm.base_url, llm.model, steps=8)
        simulator = ["--simulator", llm.base_url, "--simulator-model", llm.model]
        limits = ["--simulator-max-tokens", str(SIM_MAX_TOKENS), "--max-sessions", str(sessions)]
        with server("--domain", "terminal", *simulator, *limits, "--max-steps", "1000") as (url, _):
            for _ in range(rounds):
                bare_blocks.append(_bare_loop(llm.base_url, llm.model, prompts, sessions, block_s))
                served_blocks.append(asyncio.run(_served_loop(url, sessions, block_s, steps_per_episode=8)))
    bare, served = _total(bare_blocks, "requests"), _total(served_blocks, "steps")
    served["error_samples"] = [e for b in served_blocks for e in b["error_samples"]][:5]
    ratio = served["per_s"] / bare["per_s"] if bare["per_s"] else 0.0
    return {"sessions": sessions, "seconds": block_s * rounds, "max_tokens": SIM_MAX_TOKENS,
            "bare_client": bare, "served": served, "ratio": ratio, "target": THROUGHPUT_TARGET,
            "met": ratio >= THROUGHPUT_TARGET and served["errors"] == 0}  # fmt: skip


# -- soak ------------------------------------------------------------------------------------------


def _usage(proc: psutil.Process) -> dict[str, float]:
    return {"rss_mb": proc.memory_info().rss / 2**20, "threads": proc.num_threads(), "fds": proc.num_fds()}


def _health(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
        return json.load(response)


async def _soak(url: str, proc: psutil.Process, sessions: int, seconds: float) -> dict[str, Any]:
    samples: list[dict[str, float]] = []
    errors: list[str] = []
    steps = [0]
    opened = asyncio.Event()
    ready = [0]
    deadline = time.monotonic() + seconds
    rng = random.Random(0)

    async def session(i: int) -> None:
        try:
            async with connect(url, message_timeout_s=QUEUED_STEP_TIMEOUT_S) as client:
                await client.reset(task_id=HOP_TASK)
                ready[0] += 1
                if ready[0] == sessions:
                    opened.set()
                n = 0
                while time.monotonic() < deadline:
                    await asyncio.sleep(rng.uniform(30, 90))  # about 4 steps/s from 256 sessions
                    if time.monotonic() >= deadline:
                        break
                    if n and n % 6 == 0:
                        await client.reset(task_id=HOP_TASK)
                    await client.step({"kind": "command", "arguments": {"command": HOP_COMMANDS[n % 4]}})
                    steps[0] += 1
                    n += 1
        except Exception as exc:
            errors.append(f"session {i}: {type(exc).__name__}: {exc}")
            opened.set()

    async def sampler() -> None:
        clock = time.monotonic()
        while time.monotonic() < deadline:
            samples.append({"t_s": time.monotonic() - clock, **_usage(proc)})
            await asyncio.sleep(10)

    baseline = _usage(proc)
    tasks = [asyncio.create_task(session(i)) for i in range(sessions)]
    await asyncio.wait_for(opened.wait(), timeout=600)
    at_open = _usage(proc)
    await asyncio.gather(sampler(), *tasks)
    await asyncio.sleep(5)  # the server closes each session's sandbox after its socket goes
    after = _usage(proc)
    # Python and malloc keep freed memory for reuse, so RSS after one round is not a leak test. Rounds
    # of as many sessions (a reset and a step each) follow: a leak grows RSS by the same amount each
    # round, reuse by less and less. (Measured in-process with tracemalloc, Python's own allocations
    # were flat from round to round: 1.51 -> 1.54 MB; the RSS that rounds add is malloc's arenas.)
    rounds = []
    for _ in range(LEAK_ROUNDS):
        rounds.append(await _round(url, sessions))
        await asyncio.sleep(5)
        rounds[-1]["after_close"] = _usage(proc)
    steady = [s for s in samples if s["t_s"] >= 60] or samples
    return {
        "sessions": sessions,
        "seconds": seconds,
        "steps": steps[0],
        "errors": len(errors),
        "error_samples": errors[:5],
        "baseline": baseline,
        "all_open": at_open,
        "after_close": after,
        "rounds": rounds,
        "rss_growth_per_round_mb": _growths([after, *(r["after_close"] for r in rounds)]),
        "memory_per_session_mb": (at_open["rss_mb"] - baseline["rss_mb"]) / sessions,
        "rss_growth_steady_mb": steady[-1]["rss_mb"] - steady[0]["rss_mb"],
        "threads_left": after["threads"] - baseline["threads"],
        "samples": samples,
    }


def _growths(usages: list[dict[str, float]]) -> list[float]:
    return [b["rss_mb"] - a["rss_mb"] for a, b in zip(usages, usages[1:], strict=False)]


async def _round(url: str, sessions: int) -> dict[str, Any]:
    errors: list[str] = []

    async def session(i: int) -> None:
        try:
            async with connect(url, message_timeout_s=QUEUED_STEP_TIMEOUT_S) as client:
                await client.reset(task_id=HOP_TASK)
                await client.step({"kind": "command", "arguments": {"command": HOP_COMMANDS[i % 4]}})
        except Exception as exc:
            errors.append(f"session {i}: {type(exc).__name__}: {exc}")

    clock = time.monotonic()
    await asyncio.gather(*(session(i) for i in range(sessions)))
    return {"sessions": sessions, "errors": len(errors), "error_samples": errors[:5],
            "seconds": time.monotonic() - clock}  # fmt: skip


def soak_256(sessions: int = 256, seconds: float = 300.0) -> dict[str, Any]:
    with serve_llm() as llm:
        simulator = ["--simulator", llm.base_url, "--simulator-model", llm.model]
        limits = ["--simulator-max-tokens", "8", "--max-sessions", str(sessions), "--max-steps", "1000"]
        with server("--domain", "terminal", *simulator, *limits) as (url, proc):
            result = asyncio.run(_soak(url, proc, sessions, seconds))
            result["health_after"] = _health(url)
    # "No leak": no session thread is left, and the last round grew RSS by at most 0.02 MB a session.
    opened = result["all_open"]["rss_mb"] - result["baseline"]["rss_mb"]
    result["rss_not_returned_mb"] = result["after_close"]["rss_mb"] - result["baseline"]["rss_mb"]
    last = result["rss_growth_per_round_mb"][-1]
    no_leak = result["threads_left"] <= 2 and last <= max(0.1 * opened, 0.02 * sessions)
    errors = result["errors"] + sum(r["errors"] for r in result["rounds"])
    result["met"] = errors == 0 and no_leak
    return result


BENCHES = {"hop": hop, "simulator_64": simulator_64, "soak_256": soak_256}


def run(names: list[str] | None = None, soak_seconds: float = 300.0) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names or list(BENCHES):
        print(f"-- {name}", flush=True)
        results[name] = soak_256(seconds=soak_seconds) if name == "soak_256" else BENCHES[name]()
        print(json.dumps({k: v for k, v in results[name].items() if k != "samples"}, indent=1), flush=True)
    return results


def write_results(ran: dict[str, Any]) -> None:
    """Merge `ran` into benchmarks/results/openenv_serve.{json,md}; each bench keeps its finish time."""
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # benchmarks.run's RESULTS
    path = os.path.join(results, "openenv_serve.json")
    merged: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as f:
            merged = json.load(f)
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    earlier = merged.get("_meta", {}).get("finished_at", "")
    for name in BENCHES:  # a bench not rerun keeps the time of the run that wrote it
        if name in merged and name not in ran:
            merged[name].setdefault("finished_at", earlier)
    for name, result in ran.items():
        merged[name] = {"finished_at": finished, **result}
    merged["_meta"] = {**merged.get("_meta", {}), "cpus": os.cpu_count(), "finished_at": finished}
    with open(path, "w") as f:
        json.dump(merged, f, indent=2, default=str)
    lines = [f"## openenv_serve\n\n{os.cpu_count()} CPUs; each bench as of the time it says\n"]
    for name in BENCHES:
        if name in merged:
            when = merged[name].get("finished_at", "")
            try:
                lines += [f"_{name}, {when}:_", *markdown_lines({name: merged[name]})]
            except KeyError:  # written by an older version of this bench
                lines += [f"_{name}, {when}:_ in an older format: see openenv_serve.json", ""]
    with open(os.path.join(results, "openenv_serve.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def markdown_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    if "hop" in result:
        h = result["hop"]
        lines += [
            f"**Hop** (bwrap terminal, {h['steps_each']} steps each way, alternating episodes): in-process "
            f"median {h['in_process_median_ms']:.3f} ms, through the server (openenv's client over /ws) "
            f"{h['served_median_ms']:.3f} ms: the hop adds {h['added_median_ms']:.3f} ms "
            f"(target <= {h['target_ms']} ms: {'met' if h['met'] else 'NOT met'}).",
            "",
        ]
    if "simulator_64" in result:
        t = result["simulator_64"]
        lines += [
            f"**{t['sessions']} simulator sessions, one llama.cpp endpoint** ({t['max_tokens']} tokens per "
            f"step, {t['seconds']:.0f} s each): served {t['served']['per_s']:.2f} steps/s "
            f"({t['served']['errors']} errors) against a bare client loop's {t['bare_client']['per_s']:.2f} "
            f"requests/s with the same prompts: {t['ratio']:.2f}x (target >= {t['target']}x: "
            f"{'met' if t['met'] else 'NOT met'}).",
            "",
        ]
    if "soak_256" in result:
        k = result["soak_256"]
        lines += [
            f"**{k['sessions']} simulator sessions held {k['seconds']:.0f} s**: {k['steps']} steps, "
            f"{k['errors']} errors; server RSS {k['baseline']['rss_mb']:.0f} MB before, "
            f"{k['all_open']['rss_mb']:.0f} MB with all open ({k['memory_per_session_mb']:.2f} MB per "
            f"session), {k['after_close']['rss_mb']:.0f} MB after they closed; threads "
            f"{k['baseline']['threads']} -> {k['all_open']['threads']} -> {k['after_close']['threads']}. "
            f"Then {len(k['rounds'])} rounds of {k['sessions']} sessions each (a reset and a step; "
            f"{sum(r['errors'] for r in k['rounds'])} errors) grew RSS by "
            f"{', '.join(f'{g:.1f}' for g in k['rss_growth_per_round_mb'])} MB. No leak: "
            f"{'met' if k['met'] else 'NOT met'}.",
        ]
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help=f"any of {', '.join(BENCHES)} (default: all)")
    parser.add_argument("--soak-seconds", type=float, default=300.0)
    parser.add_argument("--write", action="store_true", help="merge the results into benchmarks/results/")
    options = parser.parse_args()
    ran = run(options.names, options.soak_seconds)
    print(json.dumps(ran, indent=1, default=str))
    if options.write:
        write_results(ran)
