"""`make bench` importers: SWE-agent rows (the nebius/SWE-agent-trajectories layout) into our schema.

Speed: the same Parquet file is read by pyarrow alone (batches turned into Python rows, the least any
row-wise importer must do) and imported by `python -m collectors.importers swe_agent`'s loop (read
a batch at a time with pyarrow, convert, validate, write zstd shards), one process each, alternating.
Target: the import at least 0.5x pyarrow's speed.

Workers: 6,000 rows of the same kind imported with `workers=2` and with 1, alternating, in the same
run: rows/s of two over rows/s of one, the second worker's start (a spawned interpreter) inside the
time; the CPU seconds of all processes show what sharing costs. Target: at least 1.7x on two cores. The
machine's load average is recorded before and after: another process on the cores takes its share from
both workers.

Memory: 100,000 and 400,000 rows, each imported by a fresh process, whose peak RSS the kernel
reports (VmHWM at its end; `wait4`'s maximum also holds the RSS the benchmark's own process had when
it forked the child, before exec, which made it hundreds of MB too large). Target: less than 10%
growth from the smaller to the larger. These rows are short (two steps each) so that 400,000 of them
import in minutes; they have the real layout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SPEED_ROWS = 2_000
SPEED_ROUNDS = 2
MEMORY_ROWS = (100_000, 400_000)
SPEED_TARGET = 0.5
WORKERS = 2
WORKERS_ROWS = 6_000  # about 20 s for one worker here: an import long enough for its start to be small
WORKERS_ROUNDS = 2
WORKERS_TARGET = 1.7
MEMORY_TARGET = 0.10
_ROOT = str(Path(__file__).resolve().parent.parent)


def _message(role: str, text: str, system_prompt: str = "") -> dict[str, Any]:
    return {
        "role": role,
        "text": text,
        "system_prompt": system_prompt,
        "mask": role == "ai",
        "cutoff_date": "",
    }


def _state(open_file: str = "n/a") -> str:
    return f"\n(Open file: {open_file})\n(Current directory: /django__django)\nbash-$"


def swe_agent_row(i: int, windows: int) -> dict[str, Any]:
    """One row as the dataset card lays it out; `windows` file views (100 lines each) and as many
    searches, or a single short command when 0."""
    messages = [
        _message("system", "", "SETTING: You are an autonomous programmer, working in a command line..."),
        _message(
            "user", f"We're currently solving the following issue:\nISSUE:\nQuerySet.{i} breaks{_state()}"
        ),
    ]
    path = "/django__django/django/db/models/query.py"
    for j in range(windows):
        first = j * 100 + 1
        body = "\n".join(f"{k}:    value_{k} = compute({k}, {j})" for k in range(first, first + 100))
        messages += [
            _message("ai", f"Let's look at the code.\n```\nopen django/db/models/query.py {first}\n```"),
            _message(
                "user",
                f"[File: {path} (2000 lines total)]\n({first - 1} more lines above)\n{body}\n"
                f"({2000 - first - 99} more lines below){_state(path)}",
            ),
            _message("ai", f'Search for uses.\n```\nsearch_dir "value_{j}"\n```'),
            _message(
                "user",
                f'Found 1 matches for "value_{j}" in /django__django:\n{path} (1 matches)\n'
                f'End of matches for "value_{j}" in /django__django{_state()}',
            ),
        ]
    if not windows:
        messages += [
            _message("ai", "List.\n```\nls\n```"),
            _message("user", f"AUTHORS\ndjango\nsetup.py{_state()}"),
        ]
    return {
        "instance_id": f"django__django-{10000 + i % 997}",
        "model_name": "swe-agent-llama-70b",
        "target": i % 3 == 0,
        "trajectory": messages,
        "exit_status": "submitted",
        "generated_patch": "diff --git a/django/db/models/query.py b/django/db/models/query.py\n",
        "eval_logs": "Will execute following command for apply_patch: ...",
    }


def write_rows(path: Path, rows: int, windows: int, chunk: int = 5_000) -> None:
    """Written in chunks, so that making 400,000 rows does not take the memory the bench measures."""
    writer = None
    for start in range(0, rows, chunk):
        table = pa.Table.from_pylist(
            [swe_agent_row(i, windows) for i in range(start, min(rows, start + chunk))]
        )
        writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table)
    assert writer is not None
    writer.close()


def pyarrow_read(path: Path) -> float:
    started = time.perf_counter()
    rows = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1_000):
        rows += len(batch.to_pylist())
    return time.perf_counter() - started


IMPORT = """
import sys, time
from collectors.importers import load_importer
from collectors.importers.base import ImportContext
from collectors.importers.run import import_rows
context = ImportContext(dataset="bench", version="", license="", collector_version="bench", host="bench")
started = time.perf_counter()
summary = import_rows(
    load_importer("swe_agent"), [sys.argv[1]], sys.argv[2], context, progress=False, workers=int(sys.argv[3])
)
seconds = time.perf_counter() - started
peak_kb = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print(seconds, summary.imported, sum(summary.dead.values()), peak_kb)
"""


def imported(path: Path, out: Path, workers: int = 1) -> dict[str, float]:
    """Import `path` in a fresh process: seconds inside the loop (not the interpreter's start; with
    workers, their start is inside), rows, dead letters and the process's peak RSS."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": _ROOT, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", IMPORT, str(path), str(out), str(workers)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    output = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"the import exited with {proc.returncode}")
    seconds, rows, dead, peak_kb = output.split()
    return {
        "seconds": float(seconds),
        "rows": int(rows),
        "dead": int(dead),
        "peak_rss_mb": int(peak_kb) / 1024,  # this process's: a spawned worker's is its own
        "cpu_s": usage.ru_utime + usage.ru_stime,  # its spawned workers' included: it waits for them
    }


def workers_speed(work: Path) -> dict[str, Any]:
    """`workers=WORKERS` against one worker on the same file, alternating; the best run of each."""
    path = work / "workers.parquet"
    write_rows(path, WORKERS_ROWS, windows=10)
    runs: dict[int, list[dict[str, float]]] = {1: [], WORKERS: []}
    load_before = os.getloadavg()
    for _ in range(WORKERS_ROUNDS):
        for count in runs:
            runs[count].append(imported(path, work / "workers-out", workers=count))
    load_after = os.getloadavg()
    path.unlink()
    best = {count: min(found, key=lambda r: r["seconds"]) for count, found in runs.items()}
    result = {
        "workers": WORKERS,
        "rows": WORKERS_ROWS,
        "runs": {str(count): found for count, found in runs.items()},
        "one_s": best[1]["seconds"],
        "workers_s": best[WORKERS]["seconds"],
        "one_cpu_s": best[1]["cpu_s"],
        "workers_cpu_s": best[WORKERS]["cpu_s"],
        "ratio": best[1]["seconds"] / best[WORKERS]["seconds"],
        "imported": min(r["rows"] for found in runs.values() for r in found),
        "dead_letters": max(r["dead"] for found in runs.values() for r in found),
        "cores": len(os.sched_getaffinity(0)),
        "nice": os.nice(0),  # this run's niceness: other work at a lower one takes its cores first
        "load_before": load_before,
        "load_after": load_after,
        "target": WORKERS_TARGET,
    }
    result["met"] = result["ratio"] >= WORKERS_TARGET
    return result


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-importers-") as tmp:
        work = Path(tmp)
        speed_file = work / "speed.parquet"
        write_rows(speed_file, SPEED_ROWS, windows=10)
        reads, imports = [], []
        for _ in range(SPEED_ROUNDS):  # alternating, so drift on this noisy machine lands on both
            reads.append(pyarrow_read(speed_file))
            imports.append(imported(speed_file, work / "speed-out"))
        pyarrow_s = min(reads)
        import_s = min(i["seconds"] for i in imports)
        speed = {
            "rows": SPEED_ROWS,
            "steps_per_row": 20,
            "file_mb": speed_file.stat().st_size / 2**20,
            "pyarrow_s": pyarrow_s,
            "import_s": import_s,
            "pyarrow_rows_per_s": SPEED_ROWS / pyarrow_s,
            "import_rows_per_s": SPEED_ROWS / import_s,
            "ratio": pyarrow_s / import_s,
            "dead_letters": imports[-1]["dead"],
            "target": SPEED_TARGET,
        }
        speed["met"] = speed["ratio"] >= SPEED_TARGET
        workers = workers_speed(work)
        memory = []
        for rows in MEMORY_ROWS:
            path = work / f"memory-{rows}.parquet"
            write_rows(path, rows, windows=0)
            result = imported(path, work / "memory-out")
            memory.append({"rows": rows, **result, "rows_per_s": rows / result["seconds"]})
            path.unlink()
        growth = memory[-1]["peak_rss_mb"] / memory[0]["peak_rss_mb"] - 1
    return {
        "speed": speed,
        "workers": workers,
        "memory": {"runs": memory, "growth": growth, "target": MEMORY_TARGET, "met": growth < MEMORY_TARGET},
    }


def markdown_lines(r: dict[str, Any]) -> list[str]:
    s, m = r["speed"], r["memory"]
    lines = [
        f"**Speed** ({s['rows']:,} SWE-agent rows of {s['steps_per_row']} steps, "
        f"{s['file_mb'] * 1024:.0f} KiB of zstd Parquet, best of alternating runs):",
        "",
        "| reader | seconds | rows/s |",
        "|---|---|---|",
        f"| pyarrow alone (batches to Python rows) | {s['pyarrow_s']:.2f} | {s['pyarrow_rows_per_s']:,.0f} |",
        f"| `collectors.importers swe_agent` | {s['import_s']:.2f} | {s['import_rows_per_s']:,.0f} |",
        "",
        f"Import speed {s['ratio']:.3f}x pyarrow's (target >= {s['target']}x: "
        f"{'met' if s['met'] else 'NOT met'}); {s['dead_letters']} dead letters.",
        "",
        *_workers_lines(r["workers"]),
        "**Memory** (two-step rows, a fresh process each):",
        "",
        "| rows | seconds | rows/s | peak RSS MB |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {run['rows']:,} | {run['seconds']:.1f} | {run['rows_per_s']:,.0f} | {run['peak_rss_mb']:.0f} |"
        for run in m["runs"]
    ]
    lines.append(
        f"\nPeak RSS grew {m['growth'] * 100:.1f}% (target < {m['target'] * 100:.0f}%: "
        f"{'met' if m['met'] else 'NOT met'})."
    )
    return lines


def _workers_lines(w: dict[str, Any]) -> list[str]:
    def load(averages: list[float]) -> str:
        return ", ".join(f"{a:.1f}" for a in averages)

    rows = [
        f"| {count} | {run['seconds']:.2f} | {w['rows'] / run['seconds']:,.0f} | {run['cpu_s']:.2f} |"
        for count, found in w["runs"].items()
        for run in found
    ]
    verdict = "met" if w["met"] else "NOT met"
    return [
        f"**Workers** ({w['rows']:,} rows of the same kind, `workers={w['workers']}` and 1 alternating; "
        "the second worker's start inside the time; CPU seconds of all processes, the interpreters' "
        "start included):",
        "",
        "| workers | seconds | rows/s | CPU seconds |",
        "|---|---|---|---|",
        *rows,
        "",
        f"{w['workers']} workers, best run against best run: {w['ratio']:.2f}x the rows/s of one (target "
        f">= {w['target']}x on two cores: {verdict}); every run imported {w['imported']:,} rows, "
        f"{w['dead_letters']} dead letters. {w['cores']} cores, this run at nice {w['nice']}; load average "
        f"(1, 5, 15 min) {load(w['load_before'])} before these runs, {load(w['load_after'])} after.",
        "",
    ]
