"""The terminal sandbox on real tmux, bash, docker and bwrap."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from sandboxes import containment
from sandboxes.base import InvalidActionError, SandboxClosedError, SandboxCrashedError, SandboxError
from sandboxes.checks import check_sandbox, resource_exists
from sandboxes.terminal import command_action, keystrokes_action
from sandboxes.terminal.reaper import reap_orphans, reap_own, tmux_socket_path
from schemas.records import Action, Task
from tests.sandboxes.test_containment import orphan_maker, survivors, wait_for_pids

BACKENDS = [
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.tmux]),
    pytest.param("bwrap", marks=[pytest.mark.bwrap, pytest.mark.tmux]),
]
TASK = Task(id="t1", setup=["echo seeded > notes.txt"])


def run(sandbox, command: str, timeout: float | None = None):
    return sandbox.step(command_action(command, timeout=timeout)).observation


@pytest.mark.parametrize("backend", BACKENDS)
def test_check_sandbox_conformance(make_sandbox, backend: str) -> None:
    actions = [command_action("cat notes.txt"), keystrokes_action([("echo hi\n", 2.0), ("C-c", 0.2)])]
    check_sandbox(make_sandbox(backend), TASK, actions)


@pytest.mark.parametrize("backend", BACKENDS)
def test_screen_exit_status_cwd_and_setup(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    first = sandbox.reset(TASK)
    assert first.format == "terminal_screen"
    assert first.text == "agent@sandbox:~$", "setup output must not show on the first screen"
    obs = run(sandbox, "echo hi")
    assert obs.text.splitlines()[-3:] == ["agent@sandbox:~$ echo hi", "hi", "agent@sandbox:~$"]
    assert obs.data == {
        "exit_code": 0,
        "cwd": "/home/agent",
        "timed_out": False,
        "output_bytes": obs.data["output_bytes"],
        "output_truncated": False,
    }
    assert "\x1b" not in obs.text and "133;" not in obs.text, "shell-integration marks leaked onto the screen"
    assert run(sandbox, "false").data["exit_code"] == 1
    obs = run(sandbox, "cd /tmp")
    assert (obs.data["cwd"], obs.text.splitlines()[-1]) == ("/tmp", "agent@sandbox:/tmp$")
    assert "seeded" in run(sandbox, "cat ~/notes.txt").text
    # A fresh environment: files and cwd from the previous episode are gone.
    sandbox.reset(Task(id="t2"))
    obs = run(sandbox, "ls ~/notes.txt")
    assert obs.data["exit_code"] != 0 and obs.data["cwd"] == "/home/agent"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("command", ["sleep 1000", "yes"])
def test_timeout_interrupts_and_shell_stays_usable(make_sandbox, backend: str, command: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    started = time.monotonic()
    obs = run(sandbox, command, timeout=1.0)
    assert time.monotonic() - started < 8
    assert obs.data["timed_out"] is True and obs.data["exit_code"] == 130
    assert obs.text.endswith("[command timed out after 1 s and was interrupted]")
    after = run(sandbox, "echo still-here")
    assert after.data["exit_code"] == 0 and after.data["timed_out"] is False
    assert after.text.splitlines()[-2:] == ["still-here", "agent@sandbox:~$"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_output_is_bounded_and_linear(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend, max_output_bytes=1 << 20)
    sandbox.reset(Task(id="t"))

    def timed(size: int):
        started = time.monotonic()
        obs = run(sandbox, f"head -c {size} /dev/zero | tr '\\0' a", timeout=60)
        return obs, time.monotonic() - started

    # The pane's output goes through tmux's control mode at the speed of this machine's CPU (8-18 s for
    # 50 MB here on two cores): the test asks for time linear in the output, not for a throughput.
    _, small = timed(5_000_000)
    obs, big = timed(50_000_000)
    assert big < 20 * small, f"5 MB of output took {small:.1f} s, 50 MB {big:.1f} s"
    assert obs.data["timed_out"] is False
    assert obs.data["exit_code"] == 0 and obs.data["output_truncated"] is True
    assert obs.data["output_bytes"] >= 50_000_000
    assert len(obs.text) < 10_000
    assert (
        obs.text.startswith("[... ") and "full output in attachment output.txt]" in obs.text.splitlines()[0]
    )
    (attachment,) = obs.attachments
    assert attachment.name == "output.txt" and attachment.media_type == "text/plain"
    assert attachment.content is not None and attachment.size == len(attachment.content) <= (1 << 20) + 100
    dropped = re.search(rb"\n\[\.\.\. (\d+) of (\d+) bytes of output dropped \.\.\.\]\n", attachment.content)
    assert dropped and int(dropped[2]) == obs.data["output_bytes"], attachment.content[:200]
    assert int(dropped[1]) == int(dropped[2]) - (1 << 20)  # the first and last 512 KiB are kept
    obs = run(sandbox, "seq 1 5000")
    assert obs.text.splitlines()[-2:] == ["5000", "agent@sandbox:~$"]
    assert obs.attachments[0].content.splitlines()[1:3] == [b"1", b"2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_output_does_not_break_capture(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    obs = run(sandbox, "head -c 4096 /dev/urandom; echo")
    assert obs.data["exit_code"] == 0 and isinstance(obs.text, str)
    assert run(sandbox, "reset; echo clean").data["exit_code"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_interactive_programs_through_keystrokes(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    obs = sandbox.step(keystrokes_action([("python3\n", 3.0), ("6 * 7\n", 1.0)])).observation
    assert ">>> 6 * 7" in obs.text and "42" in obs.text.splitlines()
    obs = sandbox.step(keystrokes_action([("exit()\n", 3.0)])).observation
    assert obs.text.endswith("agent@sandbox:~$") and obs.data["exit_code"] == 0
    run(sandbox, "no-such-program")  # leaves exit status 127 behind
    obs = sandbox.step(keystrokes_action([("vi poem.txt\n", 1.5), ("i", 0.2)])).observation
    assert obs.data["exit_code"] is None  # still inside vim: no status belongs to this step
    vim = [("roses are red", 0.2), ("Escape", 0.2), (":wq\n", 2.0)]
    obs = sandbox.step(keystrokes_action(vim)).observation
    assert obs.data["exit_code"] == 0
    assert run(sandbox, "cat poem.txt").text.splitlines()[-2] == "roses are red"


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_network(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    with _listener() as server:
        port = server.getsockname()[1]
        connect = f"socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        obs = run(sandbox, f"python3 -c \"import socket; {connect}; print('CONNECTED')\"")
    assert obs.data["exit_code"] != 0 and "CONNECTED" not in obs.text.splitlines()
    obs = run(sandbox, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"")
    assert obs.data["exit_code"] != 0 and "unreachable" in obs.text.lower()
    obs = run(sandbox, 'python3 -c "import socket; print(sorted(n for _, n in socket.if_nameindex()))"')
    assert obs.text.splitlines()[-2] == "['lo']"


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_file_system_is_not_writable(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    host_dir = tempfile.mkdtemp(dir="/var/tmp", prefix="agentworld-hostdir-")
    os.chmod(host_dir, 0o777)  # only the sandbox's isolation may stop the write
    try:
        for target in ("/etc/agentworld-x", "/root/agentworld-x", f"{host_dir}/x"):
            obs = run(sandbox, f"touch {target}")
            assert obs.data["exit_code"] != 0, f"touch {target} succeeded inside the {backend} sandbox"
        assert not os.path.exists("/etc/agentworld-x") and not os.listdir(host_dir)
    finally:
        os.rmdir(host_dir)


@pytest.mark.docker
@pytest.mark.tmux
def test_container_killed_mid_episode_raises_crashed(make_sandbox) -> None:
    sandbox = make_sandbox("docker")
    sandbox.reset(Task(id="t"))
    (container,) = [r.split(":", 1)[1] for r in sandbox.resources() if r.startswith("container:")][:1]
    subprocess.run(["docker", "kill", container], check=True, capture_output=True)
    with pytest.raises(SandboxCrashedError, match=r"container exited \(137\)"):
        run(sandbox, "echo hi")
    assert not sandbox.alive
    sandbox.reset(Task(id="again"))  # a crash is recoverable: reset brings a fresh environment
    assert sandbox.alive and run(sandbox, "echo back").data["exit_code"] == 0


@pytest.mark.docker
@pytest.mark.tmux
def test_fork_bomb_is_contained_by_the_pids_limit(make_sandbox) -> None:
    sandbox = make_sandbox("docker")
    sandbox.reset(Task(id="t"))
    held = sandbox.resources()
    run(sandbox, "bomb() { bomb | bomb & }; bomb", timeout=3)
    time.sleep(1)
    assert subprocess.run(["true"]).returncode == 0, "the host cannot start processes"
    started = time.monotonic()
    sandbox.close()
    assert time.monotonic() - started < 20
    assert not [r for r in held if resource_exists(r)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_setup_failure_names_the_command(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    with pytest.raises(SandboxError, match=r"setup command 'ls /nonexistent-dir' failed \(exit status 2\)"):
        sandbox.reset(Task(id="bad", setup=["ls /nonexistent-dir"]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_sandbox_and_invalid_actions(make_sandbox, backend: str) -> None:
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    with pytest.raises(InvalidActionError, match="unknown terminal action kind"):
        sandbox.step(Action(kind="click", arguments={}))
    with pytest.raises(InvalidActionError):
        sandbox.step(Action(kind="keystrokes", arguments={"keystrokes": "ls"}))
    assert run(sandbox, "echo fine").data["exit_code"] == 0
    held = sandbox.resources()
    assert any(r.startswith("pid:") for r in held)
    sandbox.close()
    assert not sandbox.alive and not [r for r in held if resource_exists(r)]
    with pytest.raises(SandboxClosedError, match="sandbox is closed"):
        run(sandbox, "echo hi")


@pytest.mark.tmux
def test_local_backend_runs_in_a_temporary_home(make_sandbox) -> None:
    sandbox = make_sandbox("local")
    sandbox.reset(Task(id="t"))
    obs = run(sandbox, "echo $HOME")
    assert obs.data["exit_code"] == 0 and "agentworld-terminal-" in obs.text
    assert sandbox.describe().backend == "local"


@pytest.mark.parametrize("backend", BACKENDS)
def test_reap_own_removes_what_an_unclosed_sandbox_holds(make_sandbox, backend: str) -> None:
    """The collector's last resort when a worker does not stop: its own containers and tmux
    servers go, found by owner and socket name alone."""
    sandbox = make_sandbox(backend)
    sandbox.reset(Task(id="t"))
    deadline = time.monotonic() + 30
    while len([r for r in sandbox.resources() if "/tmux-" in r]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the spare for the next episode is still booting
    held = [r for r in sandbox.resources() if r.startswith(("container:", "pid:"))]
    removed = reap_own()
    assert removed["tmux_servers"] >= 2  # the episode's and the booted spare's
    assert removed["containers"] == (2 if backend == "docker" else 0)
    deadline = time.monotonic() + 5
    while [r for r in held if resource_exists(r)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [r for r in held if resource_exists(r)]


def _reset_into(sandbox, outcome: list[BaseException | None]) -> None:
    try:
        sandbox.reset(Task(id="second", setup=["sleep 0.3", "echo ready"]))
        outcome.append(None)
    except SandboxError as exc:
        outcome.append(exc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_from_another_thread_during_reset_leaves_nothing(make_sandbox, backend: str) -> None:
    """A collector stopping on a signal closes sandboxes from its main thread while workers are
    anywhere in reset: waiting for the spare to boot, swapping it in, running setup."""
    for delay in (0.0, 0.02, 0.1, 0.3, 0.8):
        sandbox = make_sandbox(backend)
        sandbox.reset(Task(id="first"))
        outcome: list[BaseException | None] = []
        worker = threading.Thread(target=_reset_into, args=(sandbox, outcome))
        worker.start()
        time.sleep(delay)
        sandbox.close()
        worker.join(timeout=60)
        assert outcome and not sandbox.alive, f"close after {delay} s"
        time.sleep(0.5)  # a boot that close() missed would finish about now
        left = reap_own()
        assert left == {"containers": 0, "tmux_servers": 0, "process_boxes": 0}, (
            f"close after {delay} s left these"
        )


@pytest.mark.tmux
@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_local_shell_leaves_no_process_after_close(make_sandbox, mode: str, monkeypatch, tmp_path) -> None:
    """The local backend's tmux server and what its shell left running (setsid, a double fork)
    end at close: a cgroup box, or the subreaper launcher (forced by declaring cgroups unusable)."""
    if mode == "subreaper":
        monkeypatch.setattr(containment, "cgroups_unusable", lambda: "forced by the test")
    sandbox = make_sandbox("local")
    sandbox.reset(Task(id="t"))
    pids = tmp_path / "pids"
    assert run(sandbox, orphan_maker(pids) + "echo started").data["exit_code"] == 0
    started = wait_for_pids(pids, 2)
    servers = [int(r[4:]) for r in sandbox.resources() if r.startswith("pid:")]
    assert any(containment.BOX_PREFIX in r for r in sandbox.resources()) == (mode == "cgroup")
    assert len(survivors([*started, *servers], within=0.0)) == len(started) + len(servers)
    sandbox.close()
    assert not survivors([*started, *servers], within=2.0)


@pytest.mark.serial  # reaps machine-wide: a collector on another worker would reap first
@pytest.mark.tmux
def test_reap_orphans_kills_a_dead_owners_tmux_server_even_without_its_socket() -> None:
    """A server whose socket file is gone cannot be asked to exit: the reaper finds it by the
    owner pid in its command line and kills it by pid."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no live process has
    name = f"agentworld-{gone.pid}-{os.urandom(6).hex()}"
    subprocess.run(["tmux", "-L", name, "-f", "/dev/null", "new-session", "-d", "sleep", "300"], check=True)
    server = int(subprocess.check_output(["tmux", "-L", name, "display-message", "-p", "#{pid}"], text=True))
    os.unlink(tmux_socket_path(name))
    assert reap_orphans()["tmux_servers"] >= 1
    assert not survivors([server], within=2.0)
