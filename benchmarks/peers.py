"""Baselines for the terminal step latency, each timed on the same machine in the same run.

- docker exec: one `docker exec <container> true` per step (no screen);
- SWE-ReX: a local bash session, `run_in_session` (PyPI `swe-rex`);
- terminal-bench's layout: tmux inside the container driven by `docker exec` (send-keys with
  `tmux wait -S`, `tmux wait`, `capture-pane`). terminal-bench itself needs Python >= 3.12, so its
  three-call step is re-created here with the same tmux commands;
- the floor: a persistent bash over a pty with pexpect (`delaybeforesend=None`).
Each function returns per-step wall times in seconds.
"""

from __future__ import annotations

import asyncio
import subprocess
import time


def _timed(fn, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def docker_exec(container: str, n: int) -> list[float]:
    return _timed(lambda: subprocess.run(["docker", "exec", container, "true"], check=True), n)


def terminal_bench_layout(container: str, n: int) -> list[float]:
    def dexec(*args: str) -> str:
        return subprocess.run(
            ["docker", "exec", container, *args], check=True, capture_output=True, text=True
        ).stdout

    dexec("tmux", "new-session", "-d", "-s", "tb", "-x", "160", "-y", "40")

    def step() -> None:
        dexec("tmux", "send-keys", "-t", "tb", "true; tmux wait -S done", "Enter")
        dexec("tmux", "wait", "done")
        dexec("tmux", "capture-pane", "-p", "-t", "tb")

    try:
        return _timed(step, n)
    finally:
        subprocess.run(["docker", "exec", container, "tmux", "kill-server"], capture_output=True)


def swerex_session(n: int) -> list[float]:
    from swerex.deployment.local import LocalDeployment
    from swerex.runtime.abstract import BashAction, CreateBashSessionRequest

    async def run() -> list[float]:
        deployment = LocalDeployment()
        await deployment.start()
        try:
            runtime = deployment.runtime
            await runtime.create_session(CreateBashSessionRequest())
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                await runtime.run_in_session(BashAction(command="true", check="silent"))
                times.append(time.perf_counter() - t0)
            return times
        finally:
            await deployment.stop()

    return asyncio.run(run())


def pexpect_floor(n: int) -> list[float]:
    import pexpect

    prompt = "__BENCH_PROMPT__> "
    child = pexpect.spawn(
        "bash", ["--norc", "--noprofile"], env={"PS1": prompt, "PATH": "/usr/bin:/bin"}, encoding="utf-8"
    )
    child.delaybeforesend = None
    try:
        child.expect_exact(prompt)

        def step() -> None:
            child.sendline("true")
            child.expect_exact(prompt)

        return _timed(step, n)
    finally:
        child.close(force=True)
