"""The same corpus built by each of Beam's local runners in one run (issue 12): FnApiRunner (the
baseline and today's default), Prism (Beam's Go runner, `--prism_location`, LOOPBACK workers), and the
FlinkRunner on a local cluster.

Each build is `python -m beam_pipelines.build_corpus` as a subprocess on the same n-trajectory input
(`benchmarks.corpus_data.build_corpus(n)`, n from CORPUS_RUNNERS_N, default 1,000); wall time from
process start to exit, as a ratio against FnApiRunner's. Each output is compared with FnApiRunner's
by `beam_pipelines.compare` (same files; records where order is free).

Flink needs Beam's Flink job server jar from Maven; where `infra/flink/install.sh` could not fetch it,
the Flink row says so and carries no build time; the local cluster (JobManager + 2 TaskManagers) is
still started and its start-up time to two registered TaskManagers is measured.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from beam_pipelines.compare import compare_outputs
from beam_pipelines.flink.cluster import LocalFlinkCluster
from beam_pipelines.local_flink import FLINK_MINOR, default_flink_home, flink_runner_args, job_metrics
from beam_pipelines.options import prism_binary
from benchmarks.corpus_data import CACHE, build_corpus

ROOT = Path(__file__).resolve().parent.parent
WORK = os.path.join(CACHE, "runners")


def _flink(data: str, baseline_out: str, baseline: float) -> dict:
    """Start the local cluster; build on it when the job server jar is installed."""
    from beam_pipelines.local_flink import job_server_jar

    row: dict = {"runner": f"Flink {FLINK_MINOR} local cluster (LOOPBACK)"}
    started = time.monotonic()
    with LocalFlinkCluster(default_flink_home(), start_timeout_s=300) as cluster:
        row["cluster_start_s"] = time.monotonic() - started
        try:
            jar = job_server_jar()
        except FileNotFoundError:
            row["reason"] = (
                f"org.apache.beam:beam-runners-flink-{FLINK_MINOR}-job-server is not served by the Maven "
                "mirror this machine reaches (infra/flink/install.sh), so no pipeline ran on the cluster"
            )
            return row
        out = os.path.join(WORK, "flink")
        row["seconds"] = _build(data, out, flink_runner_args(cluster, jar))
        row["jobs"] = job_metrics(cluster)
    differences = compare_outputs(baseline_out, out)
    row.update(ratio=row["seconds"] / baseline, equal=not differences, differences=differences[:10])
    return row


def _build(data: str, out: str, runner_args: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "beam_pipelines.build_corpus", "--input", data, "--output", out]
    started = time.monotonic()
    proc = subprocess.run([*cmd, *runner_args], cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"build failed ({runner_args}):\n{proc.stderr[-3000:]}")
    return seconds


def corpus_runners(n: int | None = None) -> dict:
    n = n or int(os.environ.get("CORPUS_RUNNERS_N", "1000"))
    data = build_corpus(n)
    os.makedirs(WORK, exist_ok=True)
    baseline_out = os.path.join(WORK, "fnapi")
    baseline = _build(data, baseline_out, [])
    rows = [{"runner": "FnApiRunner (default)", "seconds": baseline, "ratio": 1.0, "equal": True}]

    prism_out = os.path.join(WORK, "prism")
    prism_args = ["--runner=PrismRunner", f"--prism_location={prism_binary()}", "--environment_type=LOOPBACK"]
    seconds = _build(data, prism_out, prism_args)
    differences = compare_outputs(baseline_out, prism_out)
    rows.append(
        {
            "runner": "Prism (LOOPBACK)",
            "seconds": seconds,
            "ratio": seconds / baseline,
            "equal": not differences,
            "differences": differences[:10],
        }
    )

    rows.append(_flink(data, baseline_out, baseline))
    return {"trajectories": n, "input": data, "rows": rows, "prism_beats_fnapi": rows[1]["ratio"] < 1.0}


def markdown_lines(r: dict) -> list[str]:
    lines = [
        "",
        f"The same {r['trajectories']:,}-trajectory corpus built by each runner (build_corpus subprocess, "
        "wall time to exit); equal = same files as FnApiRunner's, records compared where order is free.",
        "",
        "| runner | wall s | / FnApiRunner | output equals FnApiRunner's |",
        "|---|---:|---:|---|",
    ]
    for row in r["rows"]:
        if "seconds" in row:
            lines.append(f"| {row['runner']} | {row['seconds']:.1f} | {row['ratio']:.2f} | {row['equal']} |")
        else:
            lines.append(f"| {row['runner']} | not run | - | - |")
    lines.append("")
    for row in r["rows"]:
        if "cluster_start_s" in row:
            lines.append(
                f"- local Flink cluster up (2 TaskManagers registered) in {row['cluster_start_s']:.1f} s"
            )
        lines += [
            f"- Flink job {j['job_id']}: {j['duration_ms'] / 1000:.1f} s, {j['vertices']} vertices, "
            f"records in/out {j['read_records']:,}/{j['write_records']:,}"
            for j in row.get("jobs", [])
        ]
        if "reason" in row:
            lines.append(f"- {row['runner']}: {row['reason']}")
    lines.append(f"- Prism faster than FnApiRunner: {r['prism_beats_fnapi']}")
    return lines


if __name__ == "__main__":
    from benchmarks.timing import show

    show(corpus_runners(), markdown_lines, indent=1)
