"""Peak RSS of `build_corpus` at given input sizes, one run per size (issue 7's memory target).

    .venv/bin/python -m benchmarks.corpus_memory_scale 20000 40000

The corpus benchmark (`benchmarks.run corpus`) measures memory at n and 2n after its throughput
rows; at the target's sizes that is over an hour on two cores. This runs only the pipeline, at each
size given, and prints the summed RSS peak of its process tree (psutil, sampled every 0.1 s, as the
corpus benchmark samples it) with the largest per-process peaks, so a run can be split across
sessions. Inputs come from `benchmarks.corpus_data.build_corpus` (cached).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import psutil

from benchmarks.corpus_data import build_corpus
from benchmarks.corpus_throughput import ROOT, WORK


def code_revision() -> str:
    """The pipeline code measured: the commit, marked when the working tree differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    changed = git("status", "--porcelain", "beam_pipelines", "schemas")
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")


def peak_rss(n: int) -> dict:
    out = os.path.join(WORK, f"memory-{n}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "beam_pipelines.build_corpus", "--input", build_corpus(n), "--output", out]
    code, started_utc = code_revision(), time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    started, tree_peak, peaks = time.monotonic(), 0, {}
    while proc.poll() is None:
        total = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            name = "runner" if p.pid == proc.pid else f"worker {p.pid}"
            peaks[name] = max(peaks.get(name, 0), rss)
        tree_peak = max(tree_peak, total)
        time.sleep(0.1)
    if proc.returncode != 0:
        raise RuntimeError(f"build_corpus failed at {n} trajectories (exit {proc.returncode})")
    largest = dict(sorted(peaks.items(), key=lambda kv: -kv[1])[:3])
    return {
        "n": n,
        "code": code,
        "run_utc": started_utc,
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mib": round(tree_peak / 2**20),
        "largest_process_peaks_mib": {k: round(v / 2**20) for k, v in largest.items()},
    }


if __name__ == "__main__":
    for size in map(int, sys.argv[1:]):
        print(json.dumps(peak_rss(size)), flush=True)
