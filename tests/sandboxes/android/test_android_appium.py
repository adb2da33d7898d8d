"""The Android sandbox against a real Appium 3 server with the real fake driver (@appium/fake-driver),
on app XML files these tests write. One shared server for the module; the sandboxes that must own
their server (leak check, a killed server) start their own.

The fake driver keeps its page source as loaded; what an action changes is the driver's own state:
an element's click count, a field's value (which the tree shows), and the W3C action log
(`get_log("actions")`), which holds every pointer and key sequence the sandbox sent.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.android import AndroidConfig, AndroidSandbox, AppiumServer, parse_action
from sandboxes.android import install as appium_install
from sandboxes.android.__main__ import main as android_cli
from sandboxes.android.fleet import Device
from sandboxes.base import InvalidActionError, SandboxClosedError, SandboxCrashedError, SandboxError
from sandboxes.checks import check_sandbox, process_exists
from schemas.records import Action, Task
from tests.sandboxes.android.fake_apps import NOTES_APP, NOTES_TREE, long_list_app, write_app

SAVE, TITLE, DELETE, SCROLL = 2, 1, 3, 4  # node indexes in NOTES_TREE


@pytest.fixture(scope="module")
def server() -> Iterator[AppiumServer]:
    try:
        appium_install.install()  # a no-op after `make setup`
    except SandboxError as exc:
        pytest.fail(f"Appium could not be installed: {exc}")
    with AppiumServer() as shared:
        yield shared


@pytest.fixture(scope="module")
def notes_app(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_app(tmp_path_factory.mktemp("apps"), NOTES_APP)


@pytest.fixture
def sandbox(server: AppiumServer, notes_app: str) -> Iterator[AndroidSandbox]:
    config = AndroidConfig(automation_name="Fake", app=notes_app, swipe_ms=50, long_press_ms=300)
    made = AndroidSandbox(config, server=server)
    made.start()
    try:
        yield made
    finally:
        made.close()


def _step(sandbox: AndroidSandbox, kind: str, **arguments: object) -> tuple[str, str]:
    observation = sandbox.step(parse_action(kind, arguments)).observation
    return observation.text, observation.data["error"]


def _pointer_actions(sandbox: AndroidSandbox) -> list[list[dict]]:
    """The items of each W3C input source that did more than pause, in the order the driver got them."""
    sequences = []
    for sequence in sandbox.driver.get_log("actions"):
        for source in sequence:
            if any(item["type"] != "pause" for item in source["actions"]):
                sequences.append(source["actions"])
    return sequences


def test_check_sandbox_and_no_leaks(notes_app: str) -> None:
    sandbox = AndroidSandbox(AndroidConfig(automation_name="Fake", app=notes_app))
    actions = [
        parse_action("click", {"index": SAVE}),
        parse_action("input_text", {"index": TITLE, "text": "a"}),
    ]
    check_sandbox(sandbox, Task(id="notes"), actions)
    assert sandbox._server is not None and not process_exists(sandbox._server.pid or 0)


def test_reset_observes_tree_package_and_screenshot(sandbox: AndroidSandbox) -> None:
    observation = sandbox.reset(Task(id="notes"))
    assert observation.format == "android_ui_tree"
    assert observation.text == NOTES_TREE
    assert observation.data == {
        "package": "com.example.notes",
        "activity": "unknown",
        "nodes": 6,
        "truncated": False,
        "error": "",
    }
    (shot,) = observation.attachments
    assert shot.name == "screenshot.png" and shot.media_type == "image/png"
    assert shot.content is not None and shot.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert sandbox.last_reset == "new-session"
    assert sandbox.describe().backend == "appium-fake"


def test_click_by_index_clicks_that_element(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    save = sandbox.driver.find_element("xpath", sandbox._screen.nodes[SAVE].xpath)
    assert save.get_attribute("clicks") in (None, "")
    _, error = _step(sandbox, "click", index=SAVE)
    assert error == ""
    assert save.get_attribute("clicks") == "1"


def test_input_text_types_into_the_field_and_the_tree_shows_it(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    text, error = _step(sandbox, "input_text", index=TITLE, text='groceries "today"')
    assert error == ""
    assert (
        '[1] android.widget.EditText "groceries \\"today\\"" id=com.example.notes:id/title'
        " @(40,200,1040,320) clickable,editable,focused" in text.splitlines()
    )
    # A button takes no text: the driver refuses and the agent reads why.
    text, error = _step(sandbox, "input_text", index=SAVE, text="x")
    assert error.startswith("input_text on node [2] refused:") and text.startswith(f"Error: {error}")
    # A new episode starts from the app as loaded.
    assert sandbox.reset(Task(id="notes")).text == NOTES_TREE


def test_pointer_and_key_actions_reach_the_driver(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    steps = [
        ("click", {"x": 100, "y": 250}),
        ("long_press", {"index": DELETE}),
        ("swipe", {"x": 500, "y": 1500, "to_x": 500, "to_y": 600}),
        ("scroll", {"direction": "down", "index": SCROLL}),
        ("scroll", {"direction": "right"}),
        ("input_text", {"text": "hi"}),
        ("keyboard_enter", {}),
    ]
    for kind, arguments in steps:
        assert _step(sandbox, kind, **arguments)[1] == "", kind
    taps = [
        [(i["type"], i.get("x"), i.get("y"), i.get("duration")) for i in seq]
        for seq in _pointer_actions(sandbox)
    ]
    down, up = ("pointerDown", None, None, 0), ("pointerUp", None, None, 0)
    assert taps[0] == [("pointerMove", 100, 250, 250), down, ("pause", None, None, 100), up]
    # The long press holds the centre of the Delete button for long_press_ms.
    assert taps[1] == [("pointerMove", 800, 460, 250), down, ("pause", None, None, 300), up]
    assert [(t[0], t[1], t[2]) for t in taps[2]] == [
        ("pointerMove", 500, 1500),
        ("pointerDown", None, None),
        ("pointerMove", 500, 600),
        ("pointerUp", None, None),
    ]
    # Scrolling down inside the ScrollView (0,560)-(1080,1920): the finger moves up its middle.
    assert [(t[1], t[2]) for t in taps[3] if t[0] == "pointerMove"] == [(540, 1580), (540, 900)]
    # Scrolling right on the whole screen (the app's 1080x1920): the finger moves from right to left.
    assert [(t[1], t[2]) for t in taps[4] if t[0] == "pointerMove"] == [(810, 960), (270, 960)]
    keys = [[i["value"] for i in seq if i["type"] == "keyDown"] for seq in _pointer_actions(sandbox)[5:]]
    assert keys == [["h", "i"], ["\ue007"]]


def test_what_the_fake_driver_lacks_is_an_error_the_agent_sees(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    for kind, arguments, command in [
        ("navigate_back", {}, "Method has not yet been implemented"),
        ("navigate_home", {}, "Unsupported execute method 'mobile: pressKey'"),
        (
            "open_app",
            {"app_name": "com.android.settings"},
            "Unsupported execute method 'mobile: activateApp'",
        ),
    ]:
        text, error = _step(sandbox, kind, **arguments)
        assert error.startswith(f"{kind} is not supported by the Fake driver: ") and command in error
        assert text.splitlines()[1:] == NOTES_TREE.splitlines()  # the screen is still observed
    _, error = _step(sandbox, "open_app", app_name="Calendar")
    assert error == "no app named 'Calendar'; known apps: none configured; give a package name"


def test_wait_waits(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    began = time.monotonic()
    text, error = _step(sandbox, "wait", seconds=0.5)
    assert time.monotonic() - began >= 0.5 and error == "" and text == NOTES_TREE


def test_invalid_actions(sandbox: AndroidSandbox) -> None:
    sandbox.reset(Task(id="notes"))
    with pytest.raises(InvalidActionError, match="'direction' must be one of"):
        sandbox.step(Action(kind="scroll", arguments={"direction": "north"}))
    text, error = _step(sandbox, "click", index=6)
    assert error == "no node [6] on the screen; the last observation shows [0]..[5]"
    assert text.splitlines()[0] == f"Error: {error}" and text.splitlines()[1:] == NOTES_TREE.splitlines()


def test_task_app_xml_and_truncation(server: AppiumServer) -> None:
    config = AndroidConfig(automation_name="Fake", max_nodes=5, screenshots=False)
    with AndroidSandbox(config, server=server) as sandbox:
        observation = sandbox.reset(Task(id="list", metadata={"app_xml": long_list_app(12)}))
        assert (
            observation.text.splitlines()[1]
            == '[0] android.widget.TextView "Item 0" @(0,0,1080,10) clickable'
        )
        assert observation.text.splitlines()[-1] == "[... 7 more nodes not shown]"
        assert observation.data["truncated"] and observation.attachments == []
        with pytest.raises(ValueError, match="needs an app XML"):
            sandbox.reset(Task(id="no-app"))
        with pytest.raises(
            ValueError, match="task broken: the fake driver cannot load the app XML: .*mismatch"
        ):
            sandbox.reset(Task(id="broken", metadata={"app_xml": "<app><unclosed></app>"}))
        assert sandbox.reset(Task(id="list", metadata={"app_xml": long_list_app(2)})).data["nodes"] == 2


def test_a_deleted_session_is_a_crash_and_reset_recovers(
    sandbox: AndroidSandbox, server: AppiumServer
) -> None:
    sandbox.reset(Task(id="notes"))
    request = urllib.request.Request(f"{server.url}/session/{sandbox.driver.session_id}", method="DELETE")
    urllib.request.urlopen(request, timeout=10).close()
    with pytest.raises(SandboxCrashedError, match="session died"):
        sandbox.step(parse_action("click", {"index": SAVE}))
    assert not sandbox.alive
    with pytest.raises(SandboxCrashedError):
        sandbox.step(parse_action("click", {"index": SAVE}))
    assert sandbox.reset(Task(id="notes")).text == NOTES_TREE and sandbox.alive
    assert _step(sandbox, "click", index=SAVE)[1] == ""


def test_a_killed_server_is_a_crash_and_reset_restarts_it(notes_app: str) -> None:
    sandbox = AndroidSandbox(AndroidConfig(automation_name="Fake", app=notes_app, screenshots=False))
    sandbox.start()
    try:
        sandbox.reset(Task(id="notes"))
        first = sandbox._server
        assert first is not None and first.pid is not None
        old_pid = first.pid
        first.kill()
        with pytest.raises(SandboxCrashedError, match="session died"):
            sandbox.step(parse_action("click", {"index": SAVE}))
        assert not sandbox.alive
        assert sandbox.reset(Task(id="notes")).text == NOTES_TREE
        assert sandbox.alive and first.pid != old_pid
        pids = [int(r.split(":")[1]) for r in sandbox.resources()]
    finally:
        sandbox.close()
    assert pids and not any(process_exists(pid) for pid in pids + [old_pid])
    with pytest.raises(SandboxClosedError):
        sandbox.step(parse_action("wait", {"seconds": 0}))


def test_device_sessions_carry_their_own_ports(server: AppiumServer) -> None:
    devices = [
        Device("emulator-5554", "pixel", 5554, 5555, 8554, 8200, 9200, 0),
        Device("emulator-5556", "pixel", 5556, 5557, 8556, 8201, 9201, 0),
    ]
    caps = [
        AndroidSandbox(
            AndroidConfig(app_package="com.android.settings"), device=d, server=server
        )._capabilities("")
        for d in devices
    ]
    assert [(c["appium:udid"], c["appium:systemPort"], c["appium:mjpegServerPort"]) for c in caps] == [
        ("emulator-5554", 8200, 9200),
        ("emulator-5556", 8201, 9201),
    ]
    assert caps[0]["appium:automationName"] == "UiAutomator2" and caps[0]["appium:noReset"] is True


def test_server_start_is_bounded(tmp_path: Path) -> None:
    silent = tmp_path / "appium"
    silent.write_text("#!/bin/sh\nexec sleep 60\n")
    silent.chmod(0o755)
    hung = AppiumServer(program=silent, ready_timeout_s=1.0, log_path=tmp_path / "hung.log")
    began = time.monotonic()
    with pytest.raises(SandboxError, match="did not answer .* within 1 s"):
        hung.start()
    assert time.monotonic() - began < 15 and not hung.alive
    assert hung.pid is not None and not process_exists(hung.pid)
    crashing = tmp_path / "crashing"
    crashing.write_text("#!/bin/sh\necho 'Error: Cannot find module appium' >&2\nexit 3\n")
    crashing.chmod(0o755)
    with pytest.raises(SandboxError, match="exited with status 3(.|\n)*Cannot find module appium"):
        AppiumServer(program=crashing, log_path=tmp_path / "crash.log").start()
    with pytest.raises(SandboxError, match="python -m sandboxes.android install"):
        AppiumServer(program=tmp_path / "missing").start()


def test_install_cli_is_a_no_op_when_installed(
    server: AppiumServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert appium_install.is_installed()
    assert android_cli(["install"]) == 0
    out = capsys.readouterr().out
    assert "already installed" in out and "appium 3.8.0" in out and "@appium/fake-driver 6.2.4" in out


class _SharedAt:
    """A server someone else runs, known by a URL with a trailing slash (as a collector's --appium-url)."""

    def __init__(self, server: AppiumServer) -> None:
        self.url, self.alive = server.url + "/", True

    def start(self) -> None:
        return None

    def resources(self) -> list[str]:
        return []

    def close(self) -> None:
        return None


def test_a_server_url_with_a_trailing_slash(server: AppiumServer, notes_app: str) -> None:
    config = AndroidConfig(automation_name="Fake", app=notes_app, screenshots=False)
    with AndroidSandbox(config, server=_SharedAt(server)) as sandbox:  # type: ignore[arg-type]
        assert sandbox.reset(Task(id="notes")).text == NOTES_TREE
    assert server.alive  # not the sandbox's to stop


def test_a_server_left_running_dies_with_the_interpreter(server: AppiumServer) -> None:
    # The server runs in its own session (stop() takes its whole group), so the interpreter's exit
    # must take it too when nobody called stop().
    program = "from sandboxes.android import AppiumServer\ns = AppiumServer()\ns.start()\nprint(s.pid)\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    deadline = time.monotonic() + 10
    while process_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_exists(pid)
