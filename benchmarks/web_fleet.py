"""Web fleet throughput with 1, 2 and 4 browsers, and browser memory per sandbox.

Each run is the real CLI (`python -m collectors.web`, explorer on the embedded sites) in a child
process. While it runs, its process tree is sampled with psutil: the Chromium processes (browser,
renderers, GPU and utility processes) and Playwright's node drivers, whose RSS summed and divided
by the browser count is the memory per sandbox. RSS counts pages shared between processes once
per process, so the PSS (shared pages split between their users) is reported beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import psutil

SAMPLE_S = 0.5
PSS_EVERY = 4  # PSS reads every process's smaps: slower, so only every 4th sample


def _tree_memory(root: psutil.Process, with_pss: bool) -> dict:
    chromium = {"rss": 0, "pss": 0, "processes": 0}
    drivers = {"rss": 0, "pss": 0, "processes": 0}
    for proc in root.children(recursive=True):
        try:
            name = proc.name()
            bucket = chromium if "chrom" in name else drivers if name.startswith("node") else None
            if bucket is None:
                continue
            bucket["rss"] += proc.memory_info().rss
            bucket["pss"] += proc.memory_full_info().pss if with_pss else 0
            bucket["processes"] += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return {"chromium": chromium, "drivers": drivers}


def run_web_collector(browsers: int, episodes: int, out: str, max_steps: int = 8, seed: int = 0) -> dict:
    argv = [sys.executable, "-m", "collectors.web", "--browsers", str(browsers), "--episodes", str(episodes)]
    argv += ["--max-steps", str(max_steps), "--seed", str(seed), "--out", out, "--no-progress"]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(child.pid)
    peak = {"chromium_rss": 0, "chromium_pss": 0, "driver_rss": 0, "chromium_processes": 0}
    samples = 0
    while child.poll() is None:
        try:
            memory = _tree_memory(root, with_pss=samples % PSS_EVERY == 0)
        except psutil.NoSuchProcess:
            break
        peak["chromium_rss"] = max(peak["chromium_rss"], memory["chromium"]["rss"])
        peak["chromium_pss"] = max(peak["chromium_pss"], memory["chromium"]["pss"])
        peak["driver_rss"] = max(peak["driver_rss"], memory["drivers"]["rss"])
        peak["chromium_processes"] = max(peak["chromium_processes"], memory["chromium"]["processes"])
        samples += 1
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    stderr = child.stderr.read() if child.stderr else ""
    if child.returncode != 0:
        raise RuntimeError(f"web collector failed ({child.returncode}): {stderr[-2000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    mib = 2**20
    return {
        "browsers": browsers,
        "episodes": summary["trajectories"],
        "steps": summary["steps"],
        "errors": sum(summary["errors_by_kind"].values()),
        "wall_s": wall,  # the whole command: browser start-up included
        "episodes_per_s": summary["trajectories"] / wall,
        "steps_per_s": summary["steps"] / wall,
        "step_latency_median_ms": summary["step_latency_median_s"] * 1e3,
        "chromium_peak_rss_mib_per_browser": peak["chromium_rss"] / mib / browsers,
        "chromium_peak_pss_mib_per_browser": peak["chromium_pss"] / mib / browsers,
        "driver_peak_rss_mib_per_browser": peak["driver_rss"] / mib / browsers,
        "chromium_processes_per_browser": peak["chromium_processes"] / browsers,
    }


def web_fleet(sizes: tuple[int, ...] = (1, 2, 4), episodes_per_browser: int = 4) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            runs.append(run_web_collector(n, max(8, n * episodes_per_browser), os.path.join(tmp, f"n{n}")))
    for run in runs:
        run["speedup_vs_1"] = run["episodes_per_s"] / runs[0]["episodes_per_s"]
    return {
        "runs": runs,
        "cpus": os.cpu_count(),
        "notes": [
            "Explorer episodes of at most 8 steps on the embedded shop and docs sites, one shared"
            " local sites server; wall time includes starting the browsers.",
            "The machine is shared by several engineers (2 cores, busy): compare the rows with each"
            " other, not with other runs.",
        ],
    }


def markdown_lines(r: dict) -> list[str]:
    lines = [
        "| browsers | episodes | steps | episodes/s | steps/s | speed-up vs 1 | step median ms "
        "| Chromium RSS MiB / browser | Chromium PSS MiB / browser | driver RSS MiB / browser |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in r["runs"]:
        lines.append(
            f"| {run['browsers']} | {run['episodes']} | {run['steps']} | {run['episodes_per_s']:.3f} "
            f"| {run['steps_per_s']:.2f} | {run['speedup_vs_1']:.2f}x | {run['step_latency_median_ms']:.0f} "
            f"| {run['chromium_peak_rss_mib_per_browser']:.0f} "
            f"| {run['chromium_peak_pss_mib_per_browser']:.0f} "
            f"| {run['driver_peak_rss_mib_per_browser']:.0f} |"
        )
    return lines + [""] + [f"- {note}" for note in r["notes"]]


if __name__ == "__main__":
    json.dump(web_fleet(), sys.stdout, indent=2)
