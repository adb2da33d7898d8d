"""Collector throughput writing to a local S3 server (moto) against writing to local disk.

The same terminal collection (bwrap sandboxes, scripted policy, the same tasks and seed) runs as
a real `python -m collectors.terminal` process into a fresh local directory and into a fresh
bucket, alternately, so both see the same machine load. Two write settings: the defaults (a
Parquet shard per 256 trajectories or per 30 s) and a commit after every trajectory (the most
object-store round trips a collector makes). Throughput is the fleet's own trajectories per second
(summary.json's wall time: from the resume scan to the last commit); the process wall time, with
interpreter start and lock, is reported beside it. Target: S3 >= 0.8x disk at the defaults.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fsspec

from benchmarks.timing import show
from tests.support_s3 import S3Server, running_s3_server

ROOT = Path(__file__).resolve().parents[1]
EPISODES = 40
SANDBOXES = 2
REPEATS = 3
TARGET_RATIO = 0.8
SETTINGS = {"defaults": [], "commit_each_trajectory": ["--shard-rows", "1"]}
TASKS = [
    {
        "id": f"bench-{i:02d}",
        "actions": [
            {"command": f"echo start-{i}"},
            {"command": "ls -la /"},
            {"command": f"seq 1 {20 + i} | tail -3"},
        ],
    }
    for i in range(20)
]


def _collect(out: str, tasks: str, extra: list[str], env: dict[str, str] | None) -> dict:
    argv = [
        sys.executable, "-m", "collectors.terminal", "--no-progress", "--backend", "bwrap",
        "--policy", "scripted", "--tasks", tasks, "--episodes", str(EPISODES),
        "--sandboxes", str(SANDBOXES), "--out", out, *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    process_s = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"collector into {out} failed ({result.returncode}): {result.stderr[-2000:]}")
    with fsspec.open(f"{out}/summary.json", "r") as handle:
        summary = json.load(handle)
    if summary["trajectories"] != EPISODES:
        raise RuntimeError(f"collector into {out} wrote {summary['trajectories']} of {EPISODES} trajectories")
    return {
        "fleet_s": summary["wall_s"],
        "process_s": round(process_s, 3),
        "trajectories_per_s": EPISODES / summary["wall_s"],
        "steps": summary["steps"],
    }


def _compare(server: S3Server, workdir: Path, tasks: str, extra: list[str]) -> dict:
    runs: dict[str, list[dict]] = {"disk": [], "s3": []}
    for repeat in range(REPEATS):
        runs["disk"].append(_collect(str(workdir / f"disk-{len(extra)}-{repeat}"), tasks, extra, None))
        bucket = server.bucket("bench")
        with server.use_in_process():
            runs["s3"].append(_collect(f"s3://{bucket}/run", tasks, extra, server.child_env()))
    medians = {
        target: {
            key: statistics.median(run[key] for run in results)
            for key in ("fleet_s", "process_s", "trajectories_per_s")
        }
        for target, results in runs.items()
    }
    return {
        "runs": runs,
        "median": medians,
        "s3_over_disk_throughput": medians["s3"]["trajectories_per_s"]
        / medians["disk"]["trajectories_per_s"],
        "s3_over_disk_process_speed": medians["disk"]["process_s"] / medians["s3"]["process_s"],
    }


def collector_storage() -> dict:
    with tempfile.TemporaryDirectory(prefix="collector-storage-") as tmp, running_s3_server() as server:
        workdir = Path(tmp)
        tasks = workdir / "tasks.jsonl"
        tasks.write_text("".join(json.dumps(task) + "\n" for task in TASKS))
        results = {name: _compare(server, workdir, str(tasks), extra) for name, extra in SETTINGS.items()}
    ratio = results["defaults"]["s3_over_disk_throughput"]
    return {
        "settings": {"episodes": EPISODES, "sandboxes": SANDBOXES, "repeats": REPEATS, "backend": "bwrap"},
        "results": results,
        "target_ratio": TARGET_RATIO,
        "met": ratio >= TARGET_RATIO,
    }


def markdown_lines(r: dict) -> list[str]:
    s = r["settings"]
    lines = [
        f"Terminal collector, {s['episodes']} episodes, {s['sandboxes']} {s['backend']} sandboxes, scripted"
        f" policy; medians of {s['repeats']} alternating runs per target.",
        "",
        "| write setting | target | fleet s | trajectories/s | process s | S3 / disk throughput |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, result in r["results"].items():
        for target in ("disk", "s3"):
            m = result["median"][target]
            ratio = f"{result['s3_over_disk_throughput']:.2f}x" if target == "s3" else "1.00x"
            lines.append(
                f"| {name} | {target} | {m['fleet_s']:.2f} | {m['trajectories_per_s']:.2f} "
                f"| {m['process_s']:.2f} | {ratio} |"
            )
    verdict = "met" if r["met"] else "NOT met"
    lines.append(f"\nTarget S3 >= {r['target_ratio']}x disk throughput at the default settings: {verdict}.")
    process = ", ".join(f"{name} {v['s3_over_disk_process_speed']:.2f}x" for name, v in r["results"].items())
    lines.append(
        f"Whole-process speed S3 / disk (interpreter start, s3fs import and client, lease, exit): {process}."
    )
    return lines


if __name__ == "__main__":
    show(collector_storage(), markdown_lines, indent=1)
