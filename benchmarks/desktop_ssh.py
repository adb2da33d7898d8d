"""Desktop over SSH: step latency through `SshTransport` against bare paramiko, same sshd, same run.

The server is a real OpenSSH on 127.0.0.1 (the tests' `LocalSshd`); the desktop is the real guest
agent (Xvfb, AT-SPI, gnome-calculator) started over it. Measured, in alternating rounds with both
sessions open at once:
- desktop step: one action to settled tree, (a) `DesktopSandbox.step` over `SshTransport` and (b)
  the same request line to a second guest agent (same options) on a bare paramiko `exec_command`
  channel (`stdin.write` / `stdout.readline`), with and without the screenshot. Target (a)/(b)
  <= 1.2x, the issue's target for the VM, here on loopback.
- transport round trip: one line to a line-echo program and back, through `SshTransport` and
  through a bare paramiko channel, and a bare one-shot `exec_command("true")` for scale (what a
  design that ran one command per step would pay).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import paramiko

from benchmarks.timing import latency_ms
from sandboxes.desktop import DesktopConfig, DesktopSandbox
from sandboxes.desktop.sandbox import GUEST_FILES
from sandboxes.desktop.ssh import SshTarget, SshTransport
from schemas.records import Action, Task
from tests.sandboxes.desktop.sshd import LocalSshd

TARGET_RATIO = 1.2
ONE_SHOT_ROUNDS = 20
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"
CALCULATOR = Task(id="bench", metadata={"apps": ["calculator"]})


def _bare_client(target: SshTarget) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(target.known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        target.host, target.port, username=target.user, key_filename=target.key_file,
        allow_agent=False, look_for_keys=False,
    )  # fmt: skip
    return client


class _BareLines:
    """A program under a bare paramiko exec_command, one line in, one line out."""

    def __init__(self, client: paramiko.SSHClient, command: str) -> None:
        self.stdin, self.stdout, _ = client.exec_command(command)

    def ask(self, line: str) -> str:
        self.stdin.write(line + "\n")
        self.stdin.flush()
        return self.stdout.readline()

    def close(self) -> None:
        self.stdin.close()
        self.stdout.channel.close()


def _alternate(rounds: int, contenders: dict[str, Callable[[int], object]]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for i in range(rounds):
        for name, once in contenders.items():
            t0 = time.perf_counter()
            once(i)
            times[name].append(time.perf_counter() - t0)
    return times


def _one_shot_true(client: paramiko.SSHClient) -> None:
    _, stdout, _ = client.exec_command("true")
    assert stdout.channel.recv_exit_status() == 0


def transport_round_trip(sshd: LocalSshd, root: Path, rounds: int) -> dict:
    ssh = SshTransport(sshd.target())
    bare = _bare_client(sshd.target())
    try:
        program = root / "echo.py"
        program.write_text(ECHO)
        remote = f"{ssh.workdir()}/echo.py"
        ssh.put_file(program, remote)
        ours = ssh.spawn(["/usr/bin/python3", remote], {})
        theirs = _BareLines(bare, f"/usr/bin/python3 {remote}")

        def ours_once(i: int) -> None:
            ours.send_line(f"ping {i}")
            assert ours.recv_line(10) == f"ping {i}"

        def bare_once(i: int) -> None:
            assert theirs.ask(f"ping {i}") == f"ping {i}\n"

        for i in range(20):  # warm-up
            ours_once(i), bare_once(i)
        times = _alternate(rounds, {"ours": ours_once, "bare_channel": bare_once})
        # A new session per command costs hundreds of ms: a few samples show the scale.
        times.update(_alternate(ONE_SHOT_ROUNDS, {"bare_exec_true": lambda i: _one_shot_true(bare)}))
        theirs.close()
    finally:
        ssh.close()
        bare.close()
    result = {name: latency_ms(samples) for name, samples in times.items()}
    result["ours_over_bare_channel"] = result["ours"]["median_ms"] / result["bare_channel"]["median_ms"]
    return result


def _move(i: int) -> Action:
    return Action(kind="computer", arguments={"action": "move", "x": 40 + 10 * (i % 2), "y": 40})


def desktop_step(sshd: LocalSshd, rounds: int, screenshot: bool) -> dict:
    """`DesktopSandbox.step` over `SshTransport` against the same request line to a second guest
    agent (same options) on a bare paramiko `exec_command` channel."""
    config = DesktopConfig(screenshot=screenshot)
    ours = DesktopSandbox(config, transport=SshTransport(sshd.target()))
    bare = _bare_client(sshd.target())
    theirs: _BareLines | None = None
    workdir = ""
    try:
        nodes = ours.reset(CALCULATOR).data["nodes"]
        _, out, _ = bare.exec_command("mktemp -d")
        workdir = out.read().decode().strip()
        with bare.open_sftp() as sftp:
            for path in GUEST_FILES:
                sftp.put(str(path), f"{workdir}/{path.name}")
        command = shlex.join(
            [config.python, f"{workdir}/agent.py", "--workdir", workdir, *config.guest_args()]
        )
        theirs = _BareLines(bare, command)
        assert json.loads(theirs.stdout.readline())["ok"]
        reset = {"op": "reset", "apps": ["calculator"], "files": {}}
        assert json.loads(theirs.ask(json.dumps(reset)))["nodes"] > 10
        requests = [
            json.dumps({"op": "act", "action": {"kind": "computer", **_move(i).arguments}}) for i in (0, 1)
        ]

        def ours_once(i: int) -> None:
            assert ours.step(_move(i)).observation.data["error"] == ""

        def bare_once(i: int) -> None:
            assert json.loads(theirs.ask(requests[i % 2]))["error"] == ""

        for i in range(3):
            ours_once(i), bare_once(i)
        times = _alternate(rounds, {"ours": ours_once, "bare_channel": bare_once})
    finally:
        ours.close()
        if theirs is not None:
            theirs.close()
        if workdir:
            bare.exec_command(shlex.join(["rm", "-rf", "--", workdir]))[1].channel.recv_exit_status()
        bare.close()
    result: dict = {name: latency_ms(samples) for name, samples in times.items()}
    result["tree_nodes"] = nodes
    result["ours_over_bare_channel"] = result["ours"]["median_ms"] / result["bare_channel"]["median_ms"]
    return result


def desktop_ssh(transport_rounds: int = 300, step_rounds: int = 40) -> dict:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, LocalSshd(Path(tmp) / "sshd") as sshd:
        transport = transport_round_trip(sshd, Path(tmp), transport_rounds)
        steps = {
            "no_screenshot": desktop_step(sshd, step_rounds, screenshot=False),
            "screenshot": desktop_step(sshd, step_rounds, screenshot=True),
        }
    worst = max(step["ours_over_bare_channel"] for step in steps.values())
    return {
        "desktop_step": steps,
        "transport_round_trip": transport,
        "target_ratio": TARGET_RATIO,
        "met": worst <= TARGET_RATIO,
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def markdown_lines(r: dict) -> list[str]:
    rt = r["transport_round_trip"]
    lines = [
        "| measurement | ours ms (median / p95) | bare paramiko ms (median / p95) | ours/bare | n |",
        "|---|---|---|---|---|",
    ]
    for name, step in r["desktop_step"].items():
        lines.append(
            f"| desktop step, {name.replace('_', ' ')} (move; settled tree of {step['tree_nodes']} nodes) "
            f"| {step['ours']['median_ms']:.1f} / {step['ours']['p95_ms']:.1f} "
            f"| {step['bare_channel']['median_ms']:.1f} / {step['bare_channel']['p95_ms']:.1f} "
            f"| {step['ours_over_bare_channel']:.2f}x | {step['ours']['n']} |"
        )
    return [
        *lines,
        f"| line round trip to an echo program "
        f"| {rt['ours']['median_ms']:.3f} / {rt['ours']['p95_ms']:.3f} "
        f"| {rt['bare_channel']['median_ms']:.3f} / {rt['bare_channel']['p95_ms']:.3f} "
        f"| {rt['ours_over_bare_channel']:.2f}x | {rt['ours']['n']} |",
        '| one-shot `exec_command("true")`, for scale (a new session: includes the remote user\'s shell '
        f"start-up files) | | {rt['bare_exec_true']['median_ms']:.2f} / "
        f"{rt['bare_exec_true']['p95_ms']:.2f} | | {rt['bare_exec_true']['n']} |",
        "",
        "Real OpenSSH on 127.0.0.1, both sessions open, alternating rounds. Ours: `DesktopSandbox.step` over "
        "`SshTransport`; bare: the same request line to the same guest agent on a bare paramiko "
        f"`exec_command` channel. Target ours / bare on the desktop step <= {r['target_ratio']}x: "
        f"{'met' if r['met'] else 'NOT met'}. Load average (1 min) before / after: "
        f"{r['load_average_1min'][0]} / {r['load_average_1min'][1]} on {os.cpu_count()} CPUs.",
    ]
