"""Fleet throughput, collector CPU share and memory per sandbox, and the explorer's data variety.

Each run is the real CLI (`python -m collectors.terminal`) in a child process, sampled with psutil:
the collector's own CPU time and RSS (the Python process only; tmux, docker and the shells are the
sandboxes' cost, not the collector's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import psutil

from collectors.variety import explorer_variety
from schemas import read_trajectories


def run_collector(
    sandboxes: int, episodes: int, out: str, *, backend: str = "docker", max_steps: int = 10, seed: int = 0
) -> dict:
    argv = [
        sys.executable,
        "-m",
        "collectors.terminal",
        "--sandboxes",
        str(sandboxes),
        "--episodes",
        str(episodes),
        "--max-steps",
        str(max_steps),
        "--backend",
        backend,
        "--seed",
        str(seed),
        "--out",
        out,
        "--no-progress",
    ]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    proc = psutil.Process(child.pid)
    peak_rss = 0
    cpu = proc.cpu_times()
    while child.poll() is None:
        try:
            peak_rss = max(peak_rss, proc.memory_info().rss)
            cpu = proc.cpu_times()
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    stderr = child.stderr.read() if child.stderr else ""
    if child.returncode != 0:
        raise RuntimeError(f"collector failed ({child.returncode}): {stderr[-2000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    collector_cpu_s = cpu.user + cpu.system
    return {
        "sandboxes": sandboxes,
        "episodes": episodes,
        "steps": summary["steps"],
        "wall_s": wall,
        "steps_per_s": summary["steps_per_s"],
        "collector_cpu_s": collector_cpu_s,
        # Share of the machine's CPU the collector process itself used while the fleet ran.
        "collector_cpu_share": collector_cpu_s / (wall * psutil.cpu_count()),
        "collector_peak_rss_mib": peak_rss / 2**20,
    }


def fleet_scaling(sizes: tuple[int, ...] = (1, 4, 8), episodes_per_sandbox: int = 3) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            runs.append(run_collector(n, n * episodes_per_sandbox, os.path.join(tmp, f"n{n}")))
    base = runs[0]
    for run in runs:
        run["speedup_vs_1"] = run["steps_per_s"] / base["steps_per_s"]
    first, last = runs[0], runs[-1]
    rss_per_sandbox = (last["collector_peak_rss_mib"] - first["collector_peak_rss_mib"]) / (
        last["sandboxes"] - first["sandboxes"]
    )
    return {
        "runs": runs,
        "rss_per_additional_sandbox_mib": rss_per_sandbox,
        "rss_target_mib": 30,
        "rss_met": rss_per_sandbox <= 30,
    }


def variety(episodes: int = 100, sandboxes: int = 4) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "variety")
        run = run_collector(sandboxes, episodes, out, max_steps=15, seed=7)
        stats = explorer_variety(read_trajectories(out))
    return {"collection": run, **stats}
