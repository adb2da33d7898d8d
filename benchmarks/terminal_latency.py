"""Terminal step and reset latency, ours against the peers in `benchmarks.peers`, same run."""

from __future__ import annotations

import statistics
import time

from benchmarks import peers
from benchmarks.timing import latency_ms
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Task

TRUE = command_action("true")


def _our_steps(sandbox: TerminalSandbox, n: int) -> list[float]:
    for _ in range(20):  # warm-up
        sandbox.step(TRUE)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = sandbox.step(TRUE)
        times.append(time.perf_counter() - t0)
        assert result.observation.data.get("exit_code") == 0, result.observation.text
    return times


def _container_of(sandbox: TerminalSandbox) -> str:
    return next(r.split(":", 1)[1] for r in sandbox.resources() if r.startswith("container:"))


def step_latency(n: int = 300) -> dict:
    results: dict[str, dict] = {}
    with TerminalSandbox(TerminalConfig(backend=make_backend("docker"))) as sandbox:
        sandbox.reset(Task(id="bench"))
        results["ours_docker"] = latency_ms(_our_steps(sandbox, n))
        container = _container_of(sandbox)
        results["docker_exec"] = latency_ms(peers.docker_exec(container, max(20, n // 10)))
        results["terminal_bench_layout"] = latency_ms(
            peers.terminal_bench_layout(container, max(20, n // 10))
        )
    with TerminalSandbox(TerminalConfig(backend=make_backend("bwrap"))) as sandbox:
        sandbox.reset(Task(id="bench"))
        results["ours_bwrap"] = latency_ms(_our_steps(sandbox, n))
    results["swerex_session"] = latency_ms(peers.swerex_session(max(20, n // 10)))
    results["pexpect_floor"] = latency_ms(peers.pexpect_floor(n))
    ours = results["ours_docker"]["median_ms"]
    ratios = {
        f"{peer}_over_ours_docker": results[peer]["median_ms"] / ours
        for peer in ("docker_exec", "swerex_session", "terminal_bench_layout", "pexpect_floor")
    }
    return {"latency": results, "ratios": ratios, "target_median_ms": 3.0, "met": ours <= 3.0}


def reset_latency(backend: str, episodes: int = 15, steps_per_episode: int = 5) -> dict:
    """Cold start (no spare ready) and pooled reset (spare booted during the previous episode)."""
    cold = []
    for _ in range(3):
        t0 = time.perf_counter()
        with TerminalSandbox(TerminalConfig(backend=make_backend(backend))) as sandbox:
            sandbox.reset(Task(id="cold"))
            cold.append(time.perf_counter() - t0)
    pooled = []
    with TerminalSandbox(TerminalConfig(backend=make_backend(backend))) as sandbox:
        sandbox.reset(Task(id="warm"))
        for i in range(episodes):
            for _ in range(steps_per_episode):
                sandbox.step(command_action("ls -la /etc | head -5"))
            # An episode's policy think time is not zero; give the spare the time a short episode has.
            time.sleep(0.3 if backend == "docker" else 0.05)
            t0 = time.perf_counter()
            sandbox.reset(Task(id=f"ep{i}"))
            pooled.append(time.perf_counter() - t0)
    target = {"docker": 0.3, "bwrap": 0.05}[backend]
    return {
        "cold_start": latency_ms(cold),
        "pooled_reset": latency_ms(pooled),
        "target_s": target,
        "met": statistics.median(pooled) <= target,
    }
