"""Fidelity replays go past recorded invalid actions, answering them as the fleet runner recorded them."""

from __future__ import annotations

import shutil

import pytest

from sandboxes.episode import Episode
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.invalid_actions import INVALID, invalid_action, invalid_action_observation
from schemas.records import Action, Task
from training.fidelity.replay import replay_actions, replay_step


@pytest.fixture(scope="module")
def sandbox():
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (apt-get install tmux)")
    box = TerminalSandbox(TerminalConfig(backend=make_backend("local")))
    yield box
    box.close()


@pytest.mark.tmux
def test_invalid_steps_replay_as_the_runner_recorded_them(sandbox) -> None:
    policy_failed = invalid_action("click the thing", "no JSON object in the reply")
    refused = Action("command", {"command": "echo a\necho b"}, "echo a")  # multi-line: the sandbox refuses
    actions = [command_action("echo before"), policy_failed, refused, command_action("echo after")]
    observations, error = replay_actions(sandbox, Task(id="invalid-replay"), actions)
    assert error == "" and len(observations) == 4
    assert observations[1] == "invalid action: no JSON object in the reply"
    assert observations[2].startswith("invalid action: command action takes one line")
    assert "after" in observations[3] and "before" in observations[3]
    # The runner records the very same texts for both kinds (its episodes are Episodes).
    assert policy_failed.kind == INVALID
    episode = Episode(sandbox, Task(id="invalid-replay"), max_steps=5)
    recorded = episode.step(policy_failed)
    assert recorded is not None and recorded.observation == invalid_action_observation(
        "no JSON object in the reply"
    )
    recorded = episode.step(refused)
    assert recorded is not None and recorded.observation.text == replay_step(sandbox, refused)
