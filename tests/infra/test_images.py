"""The container images (infra/images/build.sh): a sandbox from each runs a step.

One session fixture builds every image (cached: seconds when nothing changed); each test starts its
image's container, drives one real step through the project's own sandbox code, and removes the
container. Docker must answer (infra/setup-host.sh starts it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.android import AndroidConfig, AndroidSandbox, parse_action
from sandboxes.desktop import DesktopConfig, DesktopSandbox
from sandboxes.desktop.ssh import HostKeyError, SshTarget, SshTransport
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Action, Task
from schemas.storage import read_trajectories
from tests.sandboxes.android.fake_apps import NOTES_APP, write_app
from tests.sandboxes.desktop.desktop_helpers import find_node

ROOT = Path(__file__).resolve().parents[2]
VERSION = "1"  # infra/images/build.sh's VERSION
IMAGE_CACHE = Path(os.environ.get("AGENTWORLD_IMAGE_CACHE", "/var/cache/agentworld/images"))
# A fresh build of every image takes many minutes on a 2-core host; a cached one, seconds.
BUILD_TIMEOUT_S = 3600
pytestmark = [pytest.mark.docker, pytest.mark.images, pytest.mark.timeout(BUILD_TIMEOUT_S + 300)]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


@pytest.fixture(scope="session")
def images() -> None:
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.fail("Docker does not answer: run infra/setup-host.sh (it starts dockerd)")
    for script in ("infra/terminal-image/build.sh", "infra/images/build.sh"):
        done = subprocess.run(
            ["bash", script], cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
        )
        assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture
def container() -> Iterator[list[str]]:
    """Names of containers a test started; all are removed at teardown."""
    names: list[str] = []
    yield names
    for name in names:
        docker("rm", "-f", name, check=False)


def run_detached(names: list[str], *args: str) -> str:
    name = f"agentworld-smoke-{uuid.uuid4().hex[:10]}"
    names.append(name)
    docker("run", "-d", "--name", name, *args)
    return name


def wait_for(what: str, ready, timeout_s: float, name: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.5)
    logs = docker("logs", "--tail", "40", name, check=False)
    raise AssertionError(f"{what} not ready in {timeout_s:.0f} s; container log:\n{logs.stdout}{logs.stderr}")


def keygen(path: Path) -> str:
    """A fresh ed25519 key pair at `path`; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)
    return path.with_suffix(".pub").read_text().strip()


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def test_terminal_image_runs_a_command(images: None) -> None:
    sandbox = TerminalSandbox(TerminalConfig(backend=make_backend("docker")))
    try:
        sandbox.reset(Task(id="smoke"))
        obs = sandbox.step(command_action("cat /etc/debian_version && whoami")).observation
        assert "agent" in obs.text and obs.data["exit_code"] == 0, obs.text
    finally:
        sandbox.close()


def test_collector_image_records_a_terminal_episode(images: None, tmp_path: Path) -> None:
    usage = docker("run", "--rm", f"agentworld/collector:{VERSION}").stdout
    assert "terminal" in usage and "web" in usage, usage
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)  # the image runs as uid 1000
    done = docker(
        "run", "--rm", "--network", "none", "-v", f"{out}:/data",
        f"agentworld/collector:{VERSION}", "terminal", "--backend", "local", "--policy", "scripted",
        "--episodes", "1", "--out", "/data/terminal",
        timeout=300,
    )  # fmt: skip
    trajectories = list(read_trajectories(str(out / "terminal"), validate=True))
    assert len(trajectories) == 1, f"collector output:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert trajectories[0].steps and trajectories[0].outcome != "error", trajectories[0].outcome


def test_browser_image_runs_a_web_step(images: None) -> None:
    done = docker(
        "run", "--rm", "--network", "none", "--shm-size=512m", "--entrypoint", "python",
        "-v", f"{ROOT / 'tests/infra/image_smoke'}:/smoke:ro",
        f"agentworld/browser:{VERSION}", "/smoke/web_step.py",
        timeout=180,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["reset_url"] == "http://shop.agentworld.test/"
    assert result["reset_title"] == "Home - Agentworld Shop"
    assert result["step_url"] == "http://shop.agentworld.test/cart" and result["step_error"] == "", result


@pytest.fixture
def desktop(images: None, container: list[str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A desktop container on an internal network (no route out), and the user key that logs in."""
    key = tmp_path / "agent_key"
    public = keygen(key)
    network = f"agentworld-smoke-{uuid.uuid4().hex[:8]}"
    docker("network", "create", "--internal", network)
    try:
        image = f"agentworld/desktop:{VERSION}"
        name = run_detached(container, "--network", network, "-e", f"AUTHORIZED_KEY={public}", image)
        address = docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name
        ).stdout.strip()
        wait_for("sshd", lambda: port_open(address, 22), 30, name)
        yield address, key
    finally:
        for name in container:
            docker("rm", "-f", name, check=False)
        docker("network", "rm", network, check=False)


def test_desktop_image_over_ssh_with_the_exported_host_key(desktop: tuple[str, Path], tmp_path: Path) -> None:
    address, key = desktop
    host_key = (IMAGE_CACHE / "desktop" / VERSION / "host_key.pub").read_text().split()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"{address} {host_key[0]} {host_key[1]}\n")
    # A key other than the exported one is refused: the client really verifies the host.
    stranger = keygen(tmp_path / "stranger").split()
    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"{address} {stranger[0]} {stranger[1]}\n")
    with pytest.raises(HostKeyError):
        SshTransport(SshTarget(address, "agent", str(key), str(wrong))).run(["true"])

    transport = SshTransport(SshTarget(address, "agent", str(key), str(known_hosts)))
    sandbox = DesktopSandbox(
        DesktopConfig(screenshot=False, start_timeout=120, app_timeout=120), transport=transport
    )
    try:
        obs = sandbox.reset(Task(id="editor", metadata={"apps": ["editor"]}))
        assert obs.data["backend"] == "ssh"
        assert obs.text.splitlines()[0] == "Focused: mousepad — Untitled 1 - Mousepad", obs.text[:500]
        typed = sandbox.step(Action(kind="computer", arguments={"action": "type", "text": "hello image"}))
        assert typed.observation.data["error"] == ""
        assert find_node(typed.observation.text, "text", "").value == "hello image"
    finally:
        sandbox.close()


class ContainerAppium:
    """The Appium server of an android-host container, in the shape AndroidSandbox uses."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        state = docker("inspect", "-f", "{{.State.Running}}", self.name, check=False).stdout.strip()
        return state == "true"

    def start(self) -> None:
        if not self.alive:
            raise AssertionError(f"the Appium container {self.name} is not running")

    def resources(self) -> list[str]:
        return []

    def close(self) -> None:
        """The container is the test's; it is removed at teardown."""


def test_android_host_image_serves_a_fake_device_step(
    images: None, container: list[str], tmp_path: Path
) -> None:
    apps = tmp_path / "apps"
    apps.mkdir()
    apps.chmod(0o755)
    app = write_app(apps, NOTES_APP)
    name = run_detached(
        container, "-p", "127.0.0.1::4723", "-v", f"{apps}:{apps}:ro", f"agentworld/android-host:{VERSION}"
    )
    port = int(docker("port", name, "4723/tcp").stdout.strip().splitlines()[0].rsplit(":", 1)[1])

    def answers() -> bool:
        try:
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    wait_for("Appium", answers, 60, name)
    server = ContainerAppium(name, port)
    sandbox = AndroidSandbox(AndroidConfig(automation_name="Fake", app=app, screenshots=False), server=server)  # type: ignore[arg-type]
    try:
        sandbox.start()
        obs = sandbox.reset(Task(id="notes"))
        assert obs.text.startswith("Package: com.example.notes"), obs.text
        typed = sandbox.step(parse_action("input_text", {"index": 1, "text": "hello"})).observation
        assert '"hello"' in typed.text, typed.text
    finally:
        sandbox.close()
    assert server.alive  # the sandbox left the container's server alone


BEAM_SMOKE = """
import os, sys
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, PortableOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import Environment

# --save_main_session stages one artifact: boot's artifact retrieval takes the current API only when
# the environment lists dependencies; with none it asks FnApiRunner for the legacy manifest, which
# FnApiRunner does not serve.
options = PipelineOptions(
    ["--environment_type=EXTERNAL", "--environment_config=localhost:50000", "--save_main_session"]
)
# FnApiRunner takes its environment as an argument, not from the options: the same flags, resolved.
runner = FnApiRunner(default_environment=Environment.from_options(options.view_as(PortableOptions)))
with beam.Pipeline(runner=runner, options=options) as p:
    (p | beam.Create(["a", "b", "c"])
       | beam.Map(lambda x: f"{x}:{os.path.exists('/opt/apache/beam/boot')}")
       | beam.io.WriteToText(sys.argv[1], shard_name_template=""))
"""


def test_beam_worker_image_runs_a_pipeline_through_its_worker_pool(
    images: None, container: list[str], tmp_path: Path
) -> None:
    if port_open("127.0.0.1", 50000):
        pytest.fail("port 50000 (Beam's worker pool port) is taken on this host; stop what holds it")
    name = run_detached(
        container, "--network", "host", "-v", f"{tmp_path}:{tmp_path}", f"agentworld/beam-worker:{VERSION}",
        "--worker_pool",
    )  # fmt: skip
    wait_for("the worker pool", lambda: port_open("127.0.0.1", 50000), 60, name)
    out = tmp_path / "out.txt"
    # The worker writes the output, so the directory is the container's too (same path).
    done = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "-c", BEAM_SMOKE, str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # /opt/apache/beam/boot exists only in the image: True means the transforms ran in the worker.
    assert sorted(out.read_text().split()) == ["a:True", "b:True", "c:True"]
