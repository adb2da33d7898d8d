"""SWE step latency: `read` and `edit` through the sandbox against SWE-ReX's `read_file` and
`write_file` (swerex.runtime.local.LocalRuntime) on the same files of the same workspace, same run;
`bash` step latency reported beside them.

The files are real Python sources of three sizes (from the interpreter's standard library), copied
into a git repository that is the task's template. Calls alternate between ours and SWE-ReX so
that drift of a noisy machine hits both alike.

- read: ours = `read(path=...)` (path checks, cat -n numbering, the observation; a file larger
  than the 32 KiB page shows its first page and a marker, reading only that much);
  SWE-ReX = `read_file` (the whole file's text, nothing more).
- edit: ours = `edit(command='str_replace', ...)` (read, uniqueness check, write, unified diff);
  SWE-ReX = `write_file` of the new content (what the issue names), and, for scale,
  `read_file` + replace + `write_file` (the least a str_replace costs through SWE-ReX).

SWE-ReX's runtime is async; a synchronous caller (like our sandbox's callers) drives it with a
long-lived event loop, `loop.run_until_complete(...)` per call: that is the baseline. The cost of
the awaited call alone, inside one coroutine, is reported too (`*_awaited`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from swerex.runtime.abstract import ReadFileRequest, WriteFileRequest
from swerex.runtime.local import LocalRuntime

from benchmarks.timing import latency_ms, show
from sandboxes.swe import SweSandbox, bash_action, edit_action, make_config, read_action
from sandboxes.swe.repos import init_repository
from schemas.records import Task

TARGET_RATIO = 1.0
ROUNDS = int(os.environ.get("SWE_BENCH_ROUNDS", "300"))
# Standard-library modules as the files: small, medium and large.
SOURCES = {"small": "json/scanner.py", "medium": "textwrap.py", "large": "argparse.py"}


def _template(root: Path) -> dict[str, str]:
    """A git repository with the source files; {size: path in the repository}."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = {}
    for size, source in SOURCES.items():
        target = root / "src" / f"{size}_{Path(source).name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stdlib / source, target)
        files[size] = str(target.relative_to(root))
    init_repository(root, "t")
    return files


def _unique_line(text: str) -> str:
    """A line of `text` that occurs once, for a str_replace that toggles it."""
    for line in text.splitlines():
        if len(line.strip()) > 20 and text.count(line) == 1:
            return line
    raise ValueError("no unique line")


def _alternating(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    for call in calls.values():  # warm-up: page cache, imports, first-use paths
        for _ in range(20):
            call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - started)
    return samples


def _awaited(runtime: LocalRuntime, loop: asyncio.AbstractEventLoop, path: str, rounds: int) -> dict:
    async def run() -> dict[str, list[float]]:
        reads, writes = [], []
        content = Path(path).read_text()
        for _ in range(rounds):
            started = time.perf_counter()
            await runtime.read_file(ReadFileRequest(path=path))
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            await runtime.write_file(WriteFileRequest(path=path, content=content))
            writes.append(time.perf_counter() - started)
        return {"read_file": reads, "write_file": writes}

    return {name: latency_ms(s) for name, s in loop.run_until_complete(run()).items()}


def _file_latency(
    sandbox: SweSandbox, runtime: LocalRuntime, loop: asyncio.AbstractEventLoop, rel: str
) -> dict:
    workspace = sandbox.workspace
    assert workspace is not None
    path = os.path.join(workspace, rel)
    text = Path(path).read_text()
    line = _unique_line(text)
    edited = line + "  # edited"
    contents = {False: text, True: text.replace(line, edited)}
    state = {"edited": False}  # ours and SWE-ReX's edits toggle the same line of the same file

    def toggle() -> tuple[str, str]:
        old, new = (edited, line) if state["edited"] else (line, edited)
        state["edited"] = not state["edited"]
        return old, new

    def ours_read() -> None:
        obs = sandbox.step(read_action(rel)).observation
        assert not obs.data["error"], obs.text

    def ours_edit() -> None:
        old, new = toggle()
        obs = sandbox.step(edit_action("str_replace", rel, old_str=old, new_str=new)).observation
        assert obs.data["diff"], obs.text

    def rex_read() -> None:
        loop.run_until_complete(runtime.read_file(ReadFileRequest(path=path)))

    def rex_write() -> None:
        content = contents[state["edited"]]  # the file as it is: the write changes nothing
        loop.run_until_complete(runtime.write_file(WriteFileRequest(path=path, content=content)))

    def rex_read_replace_write() -> None:
        old, new = toggle()
        content = loop.run_until_complete(runtime.read_file(ReadFileRequest(path=path))).content
        assert content.count(old) == 1
        replaced = content.replace(old, new)
        loop.run_until_complete(runtime.write_file(WriteFileRequest(path=path, content=replaced)))

    samples = _alternating(
        {
            "ours_read": ours_read,
            "swerex_read_file": rex_read,
            "ours_edit": ours_edit,
            "swerex_write_file": rex_write,
            "swerex_read_replace_write": rex_read_replace_write,
        },
        ROUNDS,
    )
    latency = {name: latency_ms(s) for name, s in samples.items()}
    awaited = _awaited(runtime, loop, path, ROUNDS)
    latency["swerex_read_file_awaited"] = awaited["read_file"]
    latency["swerex_write_file_awaited"] = awaited["write_file"]
    med = {name: v["median_ms"] for name, v in latency.items()}
    ratios = {
        "read_over_swerex_read_file": med["ours_read"] / med["swerex_read_file"],
        "edit_over_swerex_write_file": med["ours_edit"] / med["swerex_write_file"],
        "edit_over_swerex_read_replace_write": med["ours_edit"] / med["swerex_read_replace_write"],
        "read_over_swerex_read_file_awaited": med["ours_read"] / med["swerex_read_file_awaited"],
        "edit_over_swerex_write_file_awaited": med["ours_edit"] / med["swerex_write_file_awaited"],
    }
    return {
        "file": rel,
        "bytes": len(text.encode()),
        "lines": text.count("\n"),
        "latency": latency,
        "ratios": ratios,
    }


def _bash_latency(sandbox: SweSandbox, rounds: int) -> dict:
    calls = {
        "true": bash_action("true"),
        "git_status": bash_action("git status --short"),
        "python_version": bash_action("python -c 'import sys; print(sys.version_info[:2])'"),
    }
    return {
        name: latency_ms(_alternating({name: lambda a=action: sandbox.step(a)}, rounds)[name])
        for name, action in calls.items()
    }


def swe_latency(backend: str = "bwrap") -> dict:
    root = Path(tempfile.mkdtemp(prefix="agentworld-swe-bench-"))
    try:
        files = _template(root / "repo")
        task = Task(id="bench", metadata={"template": str(root / "repo"), "repo": "bench"})
        runtime = LocalRuntime()
        loop = asyncio.new_event_loop()
        with SweSandbox(make_config(backend)) as sandbox:
            sandbox.reset(task)
            per_file = {size: _file_latency(sandbox, runtime, loop, rel) for size, rel in files.items()}
            bash = _bash_latency(sandbox, 30)
        loop.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    worst = {
        "read": max(f["ratios"]["read_over_swerex_read_file"] for f in per_file.values()),
        "edit": max(f["ratios"]["edit_over_swerex_write_file"] for f in per_file.values()),
    }
    return {
        "backend": backend,
        "rounds": ROUNDS,
        "files": per_file,
        "bash": bash,
        "target_ratio": TARGET_RATIO,
        "worst_ratio": worst,
        "met": all(r <= TARGET_RATIO for r in worst.values()),
    }


def markdown_lines(r: dict) -> list[str]:
    lines = [
        f"Backend {r['backend']}; {r['rounds']} calls of each kind per file, ours and SWE-ReX alternating. "
        "Ours: a step through the sandbox (numbered text; the large file shows its first 32 KiB page). "
        "SWE-ReX: LocalRuntime calls driven by one event loop (`*_awaited`: the await alone).\n",
        "| file | lines | call | median ms | p95 ms |",
        "|---|---|---|---|---|",
    ]
    for size, f in r["files"].items():
        for name, v in f["latency"].items():
            lines.append(
                f"| {size} ({f['file']}) | {f['lines']} | {name} | {v['median_ms']:.3f} | {v['p95_ms']:.3f} |"
            )
    lines += ["", "| file | ratio | value |", "|---|---|---|"]
    for size, f in r["files"].items():
        lines += [f"| {size} | {name} | {value:.2f}x |" for name, value in f["ratios"].items()]
    lines += ["", "| bash step | median ms | p95 ms | n |", "|---|---|---|---|"]
    lines += [f"| {n} | {v['median_ms']:.1f} | {v['p95_ms']:.1f} | {v['n']} |" for n, v in r["bash"].items()]
    worst = r["worst_ratio"]
    lines.append(
        f"\nTarget: ours / SWE-ReX (read_file, write_file) <= {r['target_ratio']:.1f}x on every file; "
        f"worst read {worst['read']:.2f}x, edit {worst['edit']:.2f}x: {'met' if r['met'] else 'NOT met'}."
    )
    return lines


if __name__ == "__main__":
    show(swe_latency(), markdown_lines)
