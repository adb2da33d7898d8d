"""`python -m training.fidelity` on the android domain: a contact-form trajectory recorded here with the
real Appium server and fake driver (the app XML carried in the task, as the collector records it),
replayed in a fresh sandbox for the noise floor, scored with the tree metrics, with a world model
served over real HTTP that predicts nothing changes."""

from __future__ import annotations

from pathlib import Path

from sandboxes.android import FAKE, AndroidConfig, AndroidSandbox, install, parse_action
from sandboxes.domains import domain_spec
from schemas.records import Task
from tests.training.test_fidelity_domains import check_tree_model, record, replay_ceiling, run_fidelity

CONTACTS_XML = Path(__file__).parents[2] / "collectors" / "android" / "apps" / "contacts.xml"


def test_android_noise_floor_from_a_fresh_session_and_tree_metrics(tmp_path: Path) -> None:
    install.install()  # the pinned Appium and fake driver; a no-op when they are there
    task = Task(
        id="fake-contacts",
        instruction="Fill in a new contact.",
        metadata={"apps": ["contacts"], "app_xml": CONTACTS_XML.read_text()},
    )
    plan = [
        parse_action("input_text", {"text": "Ines", "index": 4}),
        parse_action("click", {"index": 40}),  # not on the screen
        parse_action("click", {"index": 2}),
    ]
    with AndroidSandbox(AndroidConfig(automation_name=FAKE, screenshots=False)) as sandbox:
        trajectory = record(sandbox, task, plan)
    assert 'android.widget.EditText "Ines"' in trajectory.steps[0].observation.text
    assert trajectory.steps[1].observation.text.startswith("Error: no node [40]")
    # The prompt wording names the header lines the sandbox really writes.
    for line in trajectory.steps[1].observation.text.split("\n")[:2]:
        assert f"`{line.split(':', 1)[0]}: " in domain_spec("android").prompt.environment
    report = run_fidelity(trajectory, tmp_path, replays=1)
    ceiling = replay_ceiling(report, "android")
    # A fresh session shows the same form, the same typed name and the same error.
    for metric in ("node_f1", "node_flag_f1", "position_within_tolerance", "package_match", "error_match"):
        assert ceiling[metric] == 1.0, (metric, ceiling)
    # "Nothing changes" misses the typed name of the first turn and the error of the second.
    check_tree_model(
        report, tmp_path, "android", ("node_f1", "node_flag_f1", "position_within_tolerance"), "Android"
    )
