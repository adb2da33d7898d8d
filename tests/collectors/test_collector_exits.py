"""What `collectors.cli.main` does the same for every collector: a run whose every episode ended in
an error exits 1, and a run on real sandboxes first removes what a collector that died left behind.

The collectors run in this process (their `main(argv)`, as `python -m` calls it).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.checks import process_exists
from sandboxes.http_server import LocalHTTPServer, Request, Response
from schemas import read_trajectories
from tests.collectors.conftest import QUICK_POLICY, run_main

COLLECTORS = list(QUICK_POLICY.items())
NAMES = list(QUICK_POLICY)


@pytest.mark.parametrize("collector", NAMES)
def test_each_spec_is_read_from_its_options_module(collector: str) -> None:
    spec = importlib.import_module(f"collectors.{collector}.__main__").SPEC
    options = importlib.import_module(f"collectors.{collector}.options")
    assert spec.package == collector and spec.description == options.DESCRIPTION
    assert spec.sandboxes is options.sandboxes and spec.explorer is options.explorer
    assert spec.check is options.check and spec.add_options is options.add_options


def _failing_model(request: Request) -> Response:
    """A world model endpoint that lists its model and refuses every completion (HTTP 400, which
    the OpenAI client does not retry): every simulated step fails."""
    if request.path == "/models":
        return Response(200, json.dumps({"object": "list", "data": [{"id": "broken"}]}), "application/json")
    return Response(400, json.dumps({"error": {"message": "this model refuses"}}), "application/json")


@pytest.fixture(scope="module")
def failing_endpoint() -> Iterator[str]:
    with LocalHTTPServer({"/v1": _failing_model}) as server:
        yield server.url("/v1")


@pytest.mark.parametrize(("collector", "policy"), COLLECTORS, ids=NAMES)
def test_a_run_whose_every_episode_failed_exits_1(
    collector: str, policy: str, failing_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "data"
    code = run_main(
        collector, "--backend", "simulator", "--model-endpoint", failing_endpoint, "--policy", policy,
        "--episodes", "2", "--max-steps", "2", "--out", str(out),
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 1, printed.err[-3000:]
    assert "every episode ended in an error (2)" in printed.err
    found = list(read_trajectories(str(out)))
    assert len(found) == 2 and {t.outcome.status for t in found} == {"error"}
    assert all("world model backend failed" in (t.outcome.error or "") for t in found)


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    assert not process_exists(done.pid)
    return done.pid


@pytest.fixture
def orphan_tmux_server() -> Iterator[int]:
    """A tmux server named as a terminal sandbox's of a collector that died (its owner pid gone);
    yields the server's pid, and kills it afterwards if the collector did not."""
    name = f"agentworld-{_dead_pid()}-{uuid.uuid4().hex[:12]}"
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "sleep 300"], check=True, timeout=30)
    found = subprocess.run(
        ["tmux", "-L", name, "display-message", "-p", "#{pid}"], capture_output=True, text=True, timeout=30
    )
    pid = int(found.stdout.strip())
    yield pid
    if process_exists(pid):
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, timeout=30)


# Options that get each collector past its host checks (a path that exists for --chromium, an SSH
# target for the desktop, Appium's fake driver) to the lock and the reaping; the missing task file
# then refuses the run (exit 2) before any sandbox starts.
PAST_HOST_CHECKS = {
    "web": ["--chromium", "/bin/sh"],
    "desktop": ["--ssh", "agent@127.0.0.1", "--known-hosts", "/nonexistent/known_hosts"],
    "android": ["--fake-driver"],
}


@pytest.mark.serial  # reaps machine-wide: a collector on another worker would reap first
@pytest.mark.tmux
@pytest.mark.parametrize("collector", NAMES)
def test_every_collector_reaps_what_a_dead_collector_left(
    collector: str, orphan_tmux_server: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert process_exists(orphan_tmux_server)
    missing = tmp_path / "no-tasks.jsonl"
    args = [*PAST_HOST_CHECKS.get(collector, []), "--tasks", str(missing), "--out", str(tmp_path / "out")]
    assert run_main(collector, *args) == 2
    err = capsys.readouterr().err
    assert "tmux servers and" in err and "left behind by a collector that died" in err, err
    assert f"cannot read task file {missing}" in err
    deadline = time.monotonic() + 5
    while process_exists(orphan_tmux_server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_exists(orphan_tmux_server), "the orphan tmux server is still running"
