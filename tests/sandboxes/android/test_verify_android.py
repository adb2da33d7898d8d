"""The android domain's `android_state` verifier through the real collector, on the real Appium 3
server with its real fake driver (the stand-in for an emulator, which cannot run here): the fake
tasks' scripted actions (the oracle) score 1, a wrong end state 0, a half-done one its share; the
real-device checks are skipped there and said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import collectors.android
from collectors.android.__main__ import main
from sandboxes.android import install
from sandboxes.android.tree_text import parse_tree
from sandboxes.android.verify import evaluate, parse_checks
from sandboxes.base import VerifierError
from schemas import read_trajectories
from schemas.records import Trajectory

TASKS = Path(collectors.android.__file__).parent / "tasks.jsonl"


def _typed(text: str, index: int) -> dict:
    return {"kind": "input_text", "arguments": {"text": text, "index": index}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trajectory]:
    install.install()  # the pinned Appium and fake driver in the cache; a no-op when they are there
    tasks = {json.loads(line)["id"]: json.loads(line) for line in TASKS.read_text().splitlines()}
    for task in tasks.values():  # a task file of our own carries its app XML, as the embedded ones do
        if "app" in task["metadata"]:
            task["metadata"]["app_xml"] = (TASKS.parent / "apps" / task["metadata"].pop("app")).read_text()
    contacts, settings, clock = tasks["fake-contacts"], tasks["fake-settings"], tasks["fake-clock"]
    chosen = [
        contacts,
        settings,
        clock,
        {**contacts, "id": "half-contact", "actions": [_typed("Ines", 4), _typed("5550199", 6)]},
        {**settings, "id": "wrong-search", "actions": [_typed("wifi", 1)]},
        {**settings, "id": "device-only", "verifier": tasks["settings-dark-theme"]["verifier"]},
    ]
    root = tmp_path_factory.mktemp("android_verify")
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in chosen))
    out = root / "out"
    argv = ["--fake-driver", "--policy", "scripted", "--tasks", str(root / "tasks.jsonl"), "--no-progress"]
    assert main([*argv, "--episodes", str(len(chosen)), "--out", str(out)]) == 0
    return {t.task.id: t for t in read_trajectories(str(out), validate=True)}


def test_the_oracle_scores_one_on_the_fake_driver(recorded: dict[str, Trajectory]) -> None:
    for task_id in ("fake-contacts", "fake-settings", "fake-clock"):
        outcome = recorded[task_id].outcome
        assert outcome.reward == 1.0, outcome.verification
        assert outcome.verification.verifier == "android_state" and outcome.verification.error == ""
    clock = recorded["fake-clock"].outcome.verification
    # The alarm switch cannot change under the fake driver: its check is for real devices, skipped here.
    assert clock.details["total"] == 1 and len(clock.details["skipped"]) == 1
    assert "SKIP" in clock.output and "needs a real device" in clock.output


def test_a_wrong_end_state_scores_zero_and_a_half_done_one_its_share(recorded: dict[str, Trajectory]) -> None:
    wrong = recorded["wrong-search"].outcome
    assert wrong.reward == 0.0 and "seen instead: android.widget.EditText 'wifi'" in wrong.verification.output
    half = recorded["half-contact"].outcome
    assert half.reward == pytest.approx(1 / 3)
    assert [c["passed"] for c in half.verification.details["checks"]] == [True, False, False]


def test_device_only_checks_on_the_fake_driver_have_no_reward(recorded: dict[str, Trajectory]) -> None:
    outcome = recorded["device-only"].outcome
    assert outcome.status == "completed" and outcome.reward is None
    assert "needs a real device" in outcome.verification.output
    assert "every check of this verifier needs a real device" in outcome.verification.error


SCREEN = "\n".join(
    [
        "Package: com.google.android.deskclock  Activity: unknown",
        '[0] android.widget.FrameLayout "" @(0,0,1080,2400)',
        '  [1] android.widget.Switch "" desc="8:30 AM alarm" id=com.google.android.deskclock:id/onoff'
        " @(900,440,1040,520) clickable,checked",
        '  [2] android.widget.TextView "Timer" desc="Timer" @(540,2200,810,2400) clickable,selected',
    ]
)


def test_device_checks_run_on_a_real_device_with_the_shells_output() -> None:
    """The real-device path's logic: shell output as a device would print it (no device runs here)."""
    verifier = {
        "kind": "android_state",
        "device_checks": [
            {"shell": "settings get secure ui_night_mode", "equals": "2"},
            {"package": "com.google.android.deskclock"},
            {"node": {"desc": "8:30 AM alarm", "flags": ["checked"]}},
            {"node": {"desc": "Timer", "flags": ["selected"]}},
        ],
    }
    asked: list[str] = []
    result = evaluate(verifier, parse_tree(SCREEN), True, lambda command: asked.append(command) or "2\n")
    assert result.reward == 1.0 and asked == ["settings get secure ui_night_mode"]
    light = evaluate(verifier, parse_tree(SCREEN), True, lambda command: "1")
    assert light.reward == 0.75 and "FAIL" in light.output and "output '1'" in light.output


@pytest.mark.parametrize(
    "verifier",
    [
        {"kind": "android_state"},
        {"kind": "android_state", "checks": [{"shell": "id", "equals": "0"}]},
        {"kind": "android_state", "checks": [{"node": {"colour": "red"}}]},
        {"kind": "android_state", "device_checks": [{"shell": "id"}]},
        {"kind": "android_state", "checks": [{"node": {"text_regex": "("}}]},
    ],
)
def test_malformed_verifiers_are_refused(verifier: dict) -> None:
    with pytest.raises(VerifierError):
        parse_checks(verifier)
