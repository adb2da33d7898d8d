"""`python -m collectors.android` end to end: the real Appium 3 server with the real fake driver on the
embedded app XML tasks (no emulator can run here), explorer and scripted episodes written as
trajectories with trees that change and valid actions; the resource plan (--dry-run, and the stop
with exit status 2 on a host without an SDK); option errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.android.__main__ import main
from sandboxes.android import install
from sandboxes.android.actions import parse_action
from sandboxes.android.server import AppiumServer
from sandboxes.android.tree_text import parse_tree
from schemas import read_trajectories
from schemas.invalid_actions import INVALID


@pytest.fixture(scope="module", autouse=True)
def appium_installed() -> None:
    install.install()  # the pinned Appium and fake driver in the cache; a no-op when they are there


def _trajectories(out: Path) -> list:
    return sorted(read_trajectories(str(out)), key=lambda t: t.task.metadata["slot"])


@pytest.fixture(scope="module")
def explored(tmp_path_factory) -> list:
    out = tmp_path_factory.mktemp("android") / "explore"
    argv = ["--fake-driver", "--emulators", "2", "--episodes", "6", "--max-steps", "8", "--seed", "3"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    return _trajectories(out)


def test_explorer_episodes_on_the_fake_driver_are_written_with_trees_and_screenshots(explored) -> None:
    assert len(explored) == 6
    assert {t.task.id for t in explored} == {"fake-settings", "fake-contacts", "fake-clock"}
    for t in explored:
        assert t.domain == "android" and t.environment.backend == "appium-fake"
        assert t.policy.name == "android-explorer" and t.outcome.status in ("completed", "truncated")
        assert t.task.metadata["app_xml"].lstrip().startswith("<?xml")  # the app travels with the task
        first = parse_tree(t.initial_observation.text)
        assert first.has_head and first.package.startswith("com.") and len(first.nodes) >= 10
        for step in t.steps:
            if step.action.kind == INVALID:  # refused by the parser: the runner's error, no screen
                assert step.observation.format == "error" and not step.observation.attachments
                continue
            assert step.observation.format == "android_ui_tree"
            assert parse_tree(step.observation.text).has_head, step.observation.text
            shot = step.observation.attachments[0]
            assert shot.media_type == "image/png" and shot.uri.startswith("attachments/sha256/")


def test_explorer_actions_are_mostly_valid_and_trees_change(explored) -> None:
    steps = [s for t in explored for s in t.steps]
    assert len(steps) >= 20
    for step in steps:
        if step.action.kind != INVALID:  # the canonical JSON the sandbox parses back to itself
            assert parse_action(step.action.kind, json.loads(step.action.text)).text == step.action.text
    failed = [s for s in steps if s.action.kind == INVALID or parse_tree(s.observation.text).error]
    assert len(failed) < 0.5 * len(steps)
    # Typing shows: an editable node carries the typed text in the next tree.
    typed = [s for s in steps if s.action.kind == "input_text" and "index" in s.action.arguments]
    assert typed
    for step in typed:
        node = parse_tree(step.observation.text).node(step.action.arguments["index"])
        assert node is not None and "editable" in node.flags
        assert node.text.endswith(step.action.arguments["text"])
    texts = {s.observation.text for t in explored for s in t.steps}
    assert len(texts) > len(explored)  # not one screen per episode: the trees change within episodes


def test_scripted_tasks_fill_the_contact_form(tmp_path: Path) -> None:
    out = tmp_path / "scripted"
    argv = ["--fake-driver", "--policy", "scripted", "--episodes", "3", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    contacts = next(t for t in _trajectories(out) if t.task.id == "fake-contacts")
    assert [s.action.kind for s in contacts.steps] == ["input_text"] * 3 + ["click"]
    last = parse_tree(contacts.steps[-1].observation.text)
    assert [last.node(i).text for i in (4, 5, 6)] == ["Ines", "Haddad", "5550142"]
    assert not any(parse_tree(s.observation.text).error for s in contacts.steps)


def test_an_appium_server_given_by_url_is_used_and_left_running(tmp_path: Path) -> None:
    with AppiumServer() as server:
        argv = ["--fake-driver", "--appium-url", server.url, "--episodes", "1", "--max-steps", "3"]
        assert main([*argv, "--out", str(tmp_path / "remote"), "--no-progress"]) == 0
        assert server.alive
    assert len(_trajectories(tmp_path / "remote")) == 1


def test_dry_run_prints_the_plan_anywhere(capsys) -> None:
    assert main(["--emulators", "64", "--dry-run", "--out", "/nonexistent/never-written"]) == 0
    plan = capsys.readouterr().out
    assert plan.startswith("Android emulator fleet plan: 64 emulators")
    for part in ("per emulator (assumed)", "needed in total: 128 cores", "KVM", "ports: console 5554-"):
        assert part in plan
    assert not Path("/nonexistent/never-written").exists()


def test_without_an_sdk_the_plan_is_printed_and_the_run_stops_with_status_2(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    for name in ("ANDROID_SDK_ROOT", "ANDROID_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `emulator` or `adb` there
    out = tmp_path / "never"
    assert main(["--emulators", "64", "--avd", "pixel", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("Android emulator fleet plan: 64 emulators")
    assert "cannot start 64 emulators here" in captured.err and "Traceback" not in captured.err
    assert "emulator, adb" in captured.err and "--fake-driver" in captured.err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--emulators", "2"], "--avd NAME is required"),
        (["--fake-driver", "--appium-url", "ftp://x"], "--appium-url must be an http(s) URL"),
        (["--fake-driver", "--appium-url", "http://127.0.0.1:9/"], "no Appium server answers"),
        (["--fake-driver", "--batch-size", "0"], "must be at least 1"),
    ],
)
def test_option_errors_exit_2_with_the_reason(argv: list[str], message: str, tmp_path: Path, capsys) -> None:
    try:
        code = main([*argv, "--out", str(tmp_path / "o")])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_host_without_kvm_is_named_as_the_reason(tmp_path: Path, monkeypatch) -> None:
    from collectors.android.__main__ import SPEC
    from collectors.android.options import host_problems
    from collectors.cli import parse_args
    from sandboxes.android.fleet import DEFAULT_BUDGET
    from sandboxes.android.fleet.resources import HostResources, make_plan

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no `emulator` or `adb` there
    host = HostResources(64, 512 * 1024, 4 * 1024 * 1024, "/tmp", False, "/dev/kvm does not exist")
    plan = make_plan(4, host, DEFAULT_BUDGET)
    argv = ["--emulators", "4", "--avd", "pixel", "--sdk", str(tmp_path), "--out", str(tmp_path)]
    args = parse_args(SPEC, argv)
    problems = host_problems(args, plan)
    assert problems[0] == "no usable KVM: /dev/kvm does not exist; Android emulators need it"
    assert any(f"the SDK at {tmp_path}" in p for p in problems)  # an empty --sdk has no emulator
    assert "verdict: refuse" in plan.text() and "KVM is required" in plan.text()
