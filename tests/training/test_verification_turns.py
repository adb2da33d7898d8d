"""Verification turns of a real bwrap terminal (schemas.verification_turns): each check of a `command`
verifier is recorded outside `steps` as the turn the simulated verifier asks (the wrapped check at
the agent's last prompt, the trusted run's word), and the simulated verifier's request is that turn."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from sandboxes.episode import Episode
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Action, Observation, Task
from schemas.render import chat_messages
from schemas.verification_turns import check_action, with_verification_turns
from tests.training.test_backends import scripted_chat_server
from tests.training.test_simulated_verify import check_world
from training.backends.openai_http import OpenAIBackend
from training.simulated_verify import GENERATION, Asides, ask_checks
from training.simulator import SimulatedSandbox

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]

PROMPT = "agent@sandbox:~$"
CHECKS = ["test -f done.txt", "grep -qx 3 count.txt", "test -d missing"]
TASK = Task(id="checks", verifier={"kind": "command", "checks": CHECKS})


@pytest.fixture
def terminal() -> Iterator[TerminalSandbox]:
    if shutil.which("bwrap") is None or shutil.which("tmux") is None:
        pytest.fail("bwrap and tmux are needed (apt-get install bubblewrap tmux)")
    sandbox = TerminalSandbox(TerminalConfig(backend=make_backend("bwrap")))
    sandbox.start()
    yield sandbox
    sandbox.close()


def played(sandbox: TerminalSandbox, commands: list[str], task: Task = TASK) -> Episode:
    episode = Episode(sandbox, task, 10)
    episode.reset()
    for command in commands:
        episode.step(command_action(command))
    episode.end()
    episode.verify()
    return episode


def test_each_check_is_a_real_turn_outside_the_steps(terminal: TerminalSandbox) -> None:
    episode = played(terminal, ["touch done.txt", "echo 3 > count.txt"])
    verification = episode.outcome.verification
    assert verification.reward == pytest.approx(2 / 3)  # the trusted run decides
    assert len(episode.steps) == 2  # the checks are not agent steps
    turns = verification.turns
    assert [t.index for t in turns] == [2, 3, 4]
    assert [t.action for t in turns] == [check_action(c) for c in CHECKS]
    assert turns[0].action == Action(
        "command",
        {"command": "{ test -f done.txt; } >/dev/null 2>&1 && echo PASS || echo FAIL"},
        "{ test -f done.txt; } >/dev/null 2>&1 && echo PASS || echo FAIL",
    )
    screen = episode.steps[-1].observation.text
    assert screen.endswith(f"{PROMPT} echo 3 > count.txt\n{PROMPT}")
    lines = screen.split("\n")[:-1]
    for turn, word in zip(turns, ["PASS", "PASS", "FAIL"], strict=True):
        # the agent's last real screen, the typed check at its prompt, the trusted word, the prompt
        lines = [*lines, f"{PROMPT} {turn.action.text}", word]
        assert turn.observation.text == "\n".join([*lines, PROMPT])
        assert turn.observation.format == "terminal_screen"
        assert turn.observation.data == {
            "exit_code": 0,
            "check_exit_code": 0 if word == "PASS" else 1,
            "composed": True,
        }
    assert [t.info for t in turns] == [
        {"verification": True, "check": c, "passed": p}
        for c, p in zip(CHECKS, [True, True, False], strict=True)
    ]


def test_the_agents_shell_cannot_sway_the_recorded_answer(terminal: TerminalSandbox) -> None:
    # the agent moved away and left a daemon that would break the file a second later: the checks
    # are not typed there, so the turn shows the trusted answer at the agent's own prompt
    daemon = "(setsid nohup sh -c 'sleep 1; rm -f ~/done.txt' >/dev/null 2>&1 </dev/null &)"
    task = Task(id="cwd", verifier={"kind": "command", "checks": ["sleep 2", "test -f done.txt"]})
    episode = played(terminal, ["touch done.txt", daemon, "mkdir sub && cd sub"], task)
    assert episode.outcome.reward == 1.0
    last = episode.outcome.verification.turns[-1]
    assert last.observation.text.endswith(
        f"agent@sandbox:~/sub$ {last.action.text}\nPASS\nagent@sandbox:~/sub$"
    )


def test_no_turns_when_the_agent_left_a_program_in_the_pane(terminal: TerminalSandbox) -> None:
    episode = Episode(terminal, TASK, 10)
    episode.reset()
    episode.step(command_action("touch done.txt"))
    episode.step(Action("keystrokes", {"keystrokes": [{"keystrokes": "cat\n", "duration": 0.5}]}))
    episode.end()
    verification = episode.verify()
    assert verification.reward == pytest.approx(1 / 3) and verification.turns == []


def test_the_simulated_verifier_asks_exactly_the_recorded_turns(terminal: TerminalSandbox) -> None:
    episode = played(terminal, ["touch done.txt", "echo 3 > count.txt"])
    turns = episode.outcome.verification.turns
    asked: list[Action] = []

    def ask(action: Action) -> Observation:
        asked.append(action)
        return Observation("terminal_screen", f"{PROMPT} {action.text}\nPASS\n{PROMPT}")

    ask_checks(TASK.verifier, Asides(ask, method=GENERATION))
    assert asked == [t.action for t in turns]

    # Through a simulated terminal over HTTP: each aside request ends with the recorded turn, rendered
    # as the corpus renders it (the episode's steps, then the verification turns).
    with scripted_chat_server(check_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url))
        sim.reset(TASK)
        for step in episode.steps:
            sim.step(step.action)
        sim.verify(TASK, [])
        requests = server.requests[len(episode.steps) :]
    recorded = with_verification_turns(_trajectory_of(episode))
    for k, request in enumerate(requests, start=len(episode.steps) + 1):
        assert request["messages"][-1] == chat_messages(recorded, k)[-1]
    assert len(requests) == len(CHECKS)


def _trajectory_of(episode: Episode):
    from datetime import UTC, datetime

    from schemas.records import Policy, Provenance, Trajectory

    now = datetime.now(UTC)
    return Trajectory(
        "t",
        "terminal",
        TerminalSandbox().describe(),
        episode.task,
        Policy("scripted"),
        episode.initial,
        episode.steps,
        episode.outcome,
        Provenance("test", "0", "host", now, now),
    )
