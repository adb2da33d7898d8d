"""Simulator step latency against the real terminal sandbox's, same actions, same run.

The simulated step is one world-model call (prompt rendering + generation); the real one is a bwrap
terminal step (type, wait for the prompt, capture the screen). A random-init model never writes an
end-of-turn token, so each simulated step generates all `max_new_tokens`: the simulator's worst case
for that length. Usage: python -m benchmarks.simulator_latency [MODEL] [MAX_NEW_TOKENS]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from sandboxes.base import Sandbox
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Task
from training.backends import make_backend as make_world_model
from training.backends.base import GenerationConfig
from training.simulator import SimulatedSandbox

COMMANDS = ("echo hello", "ls -la", "pwd", "cat /etc/os-release", "seq 1 5", "date", "echo $((6*7))", "true")


def _stats(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1e3,
        "mean_ms": statistics.fmean(ordered) * 1e3,
        "n": len(ordered),
    }


def _episodes(sandbox: Sandbox, commands: tuple[str, ...], repeats: int) -> tuple[list[float], int]:
    """Step times over `repeats` episodes of `commands`, and how many steps were format failures."""
    times, failures = [], 0
    with sandbox:
        for episode in range(repeats):
            sandbox.reset(Task(id=f"bench-{episode}"))
            for command in commands:
                clock = time.perf_counter()
                result = sandbox.step(command_action(command))
                times.append(time.perf_counter() - clock)
                failures += bool(result.info.get("format_failure"))
    return times, failures


def simulator_vs_real_latency(
    model: str = "qwen3-tiny",
    max_new_tokens: int = 64,
    commands: tuple[str, ...] = COMMANDS,
    repeats: int = 2,
) -> dict:
    """Median/p90 step latency of the simulator (model `model` on CPU) and of the bwrap terminal."""
    terminal = TerminalSandbox(TerminalConfig(backend=make_backend("bwrap")))
    real_times, _ = _episodes(terminal, commands, repeats)
    backend = make_world_model(model)
    generation = GenerationConfig(max_new_tokens=max_new_tokens)
    sim_times, failures = _episodes(SimulatedSandbox(backend, generation=generation), commands, repeats)
    described = backend.describe()
    backend.close()
    real, simulated = _stats(real_times), _stats(sim_times)
    return {
        "commands": list(commands),
        "repeats": repeats,
        "max_new_tokens": max_new_tokens,
        "world_model": described,
        "real_bwrap": real,
        "simulated": simulated,
        "simulated_over_real_median": simulated["median_ms"] / real["median_ms"],
        "simulated_tokens_per_s": max_new_tokens / (simulated["median_ms"] / 1e3),
        "format_failures": failures,
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    result = simulator_vs_real_latency(*args[:1], *[int(a) for a in args[1:2]])
    print(json.dumps(result, indent=2))
