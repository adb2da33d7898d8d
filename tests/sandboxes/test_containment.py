"""ProcessBox on real processes, as a cgroup and as the subreaper launcher (forced): a setsid'd
process and a double-forked one, each writing its pid, are gone after `kill()`, after `close()`,
and after the owner of the box is killed with SIGKILL (a child Python process plays the collector,
spawning from a worker thread as collectors do)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandboxes import containment
from sandboxes.checks import proc_files, process_exists
from sandboxes.containment import ProcessBox

ROOT = Path(__file__).resolve().parents[2]
MODES = ["cgroup", "subreaper"]


def orphan_maker(pids: Path) -> str:
    """Bash that leaves a setsid'd process and a double-forked one behind; each writes its pid."""
    keep = f"echo $$ >> {pids}; exec sleep 300"
    return f"setsid sh -c '{keep}' & (sh -c '{keep}' &); "


def until_written(pids: Path, count: int) -> str:
    """Shell that waits until `count` pids are in the file: a command that exits at once could
    otherwise see its leftovers killed before they write theirs."""
    return f"until [ $(cat {pids} 2>/dev/null | wc -l) -ge {count} ]; do sleep 0.01; done; "


def wait_for_pids(pids: Path, count: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [int(line) for line in pids.read_text().split()] if pids.exists() else []
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"the command did not write {count} pids to {pids} within {timeout} s")


def survivors(pids: list[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    while (alive := [pid for pid in pids if process_exists(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def make_box(mode: str) -> ProcessBox:
    if mode == "cgroup" and containment.cgroups_unusable() is not None:
        pytest.fail(f"cgroup boxes need root and cgroup v2: {containment.cgroups_unusable()}")
    box = ProcessBox(use_cgroup=mode == "cgroup")
    assert (box.cgroup is not None) == (mode == "cgroup")
    return box


@pytest.mark.parametrize("mode", MODES)
def test_kill_ends_what_left_the_process_group_and_the_box_stays_usable(tmp_path: Path, mode: str) -> None:
    pids = tmp_path / "pids"
    box = make_box(mode)
    held = box.resources()
    try:
        command = subprocess.Popen(
            box.wrap(["bash", "-c", orphan_maker(pids) + "sleep 300"]),
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        started = wait_for_pids(pids, 2)
        box.kill()
        assert command.wait(timeout=5) != 0
        assert not survivors([*started, command.pid], within=2.0)
        again = subprocess.run(box.wrap(["sh", "-c", "echo again; exit 3"]), capture_output=True, text=True)
        assert (again.stdout, again.returncode) == ("again\n", 3)
    finally:
        box.close()
    assert not [r for r in held if r.startswith("path:") and os.path.exists(r[5:])]
    if box.cgroup:
        assert not _watchdogs(box.cgroup, expected=False), "the watchdog outlived close()"


def test_the_launcher_ends_leftovers_when_its_command_exits(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    box = make_box("subreaper")
    try:
        done = subprocess.run(
            box.wrap(["bash", "-c", orphan_maker(pids) + until_written(pids, 2) + "exit 7"]), timeout=20
        )
        assert done.returncode == 7
        assert not survivors(wait_for_pids(pids, 2), within=2.0)
        missing = subprocess.run(box.wrap(["no-such-program-here"]), capture_output=True, text=True)
        assert missing.returncode == 127 and "no-such-program-here" in missing.stderr
    finally:
        box.close()


OWNER = """
import subprocess, sys, threading, time
from sandboxes.containment import ProcessBox
box = ProcessBox(use_cgroup=sys.argv[1] == "cgroup")
def work():
    subprocess.Popen(box.wrap(["bash", "-c", sys.argv[2] + "sleep 300"]), start_new_session=True)
    time.sleep(600)
threading.Thread(target=work, daemon=True).start()
print(box.cgroup or "-", flush=True)
time.sleep(600)
"""


def start_owner(mode: str, pids: Path) -> tuple[subprocess.Popen[str], str, list[int]]:
    """A process that makes a box and starts the orphan maker in it: (process, cgroup, pids)."""
    if mode == "cgroup" and containment.cgroups_unusable() is not None:
        pytest.fail(f"cgroup boxes need root and cgroup v2: {containment.cgroups_unusable()}")
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER), mode, orphan_maker(pids)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    cgroup = owner.stdout.readline().strip()
    return owner, "" if cgroup == "-" else cgroup, wait_for_pids(pids, 2)


@pytest.mark.parametrize("mode", MODES)
def test_nothing_survives_the_owner_killed_with_sigkill(tmp_path: Path, mode: str) -> None:
    owner, cgroup, started = start_owner(mode, tmp_path / "pids")
    owner.kill()
    owner.wait()
    assert not survivors(started, within=10.0)
    if cgroup:
        assert _gone_soon(cgroup), f"the watchdog did not remove {cgroup}"


def _gone_soon(path: str) -> bool:
    deadline = time.monotonic() + 10.0
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not os.path.exists(path)


@pytest.mark.serial  # reaps machine-wide: a collector on another worker would reap first
def test_reap_orphans_ends_a_box_whose_owner_and_watchdog_both_died(tmp_path: Path) -> None:
    owner, cgroup, started = start_owner("cgroup", tmp_path / "pids")
    for pid in _watchdogs(cgroup):
        os.kill(pid, signal.SIGKILL)
    owner.kill()
    owner.wait()
    assert survivors(started, within=1.0) == started, "with its watchdog dead, nothing ends the box"
    assert containment.reap_orphans() >= 1
    assert not survivors(started, within=2.0)
    assert not os.path.exists(cgroup)


def _watchdogs(cgroup: str, expected: bool = True) -> list[int]:
    """The watchdog of a box: the `sh` waiting on the pipe, found by its argument."""
    watchdog = [b"sh", b"-c", containment.WATCHDOG.encode()]
    found = []
    for pid, (cmdline,) in proc_files("cmdline"):
        argv = cmdline.split(b"\0")
        if argv[:3] == watchdog and cgroup.encode() in argv:
            found.append(pid)
    assert found or not expected, f"no watchdog found for {cgroup}"
    return found


def test_temp_dirs_of_dead_owners_are_reaped_and_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    assert not process_exists(dead_pid)
    left = tmp_path / f"agentworld-mcp-{dead_pid}-ab12cd_3"
    (left / "workdir").mkdir(parents=True)
    (left / "workdir" / "file").write_text("x")
    downloads = tmp_path / f"agentworld-web-downloads-{dead_pid}-zz99yy00"
    downloads.mkdir()
    live = tmp_path / f"agentworld-terminal-{os.getpid()}-ef34gh56"
    live.mkdir()
    unrelated = tmp_path / "agentworld-swe-home-12345678"
    unrelated.mkdir()

    assert containment.reap_tmpdirs(str(tmp_path)) == 2
    assert not left.exists() and not downloads.exists()
    assert live.is_dir() and unrelated.is_dir()


def test_a_sandbox_tmpdir_carries_its_owner_pid() -> None:
    made = Path(containment.sandbox_tmpdir("swe"))
    try:
        assert made.name.startswith(f"agentworld-swe-{os.getpid()}-")
        assert containment.reap_tmpdirs(str(made.parent)) >= 0 and made.is_dir()  # its owner lives
    finally:
        made.rmdir()
