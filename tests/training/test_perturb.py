"""The perturbation wrapper on a real bwrap terminal sandbox (and on the simulator)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from sandboxes.checks import check_sandbox, resource_exists
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Task
from tests.training.test_backends import scripted_chat_server
from training.backends.openai_http import OpenAIBackend
from training.perturb import PerturbationConfig, PerturbedSandbox
from training.simulator import SimulatedSandbox

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
SECRET = "4242-answer"
TASK = Task(id="secret", setup=[f"echo 'the code is {SECRET}' > secret.txt"])


def new_terminal() -> TerminalSandbox:
    for tool in ("tmux", "bwrap"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")
    return TerminalSandbox(TerminalConfig(backend=make_backend("bwrap")))


@pytest.fixture(scope="module")
def terminal() -> Iterator[TerminalSandbox]:
    """One real sandbox for the module; each test resets it (a fresh environment from the pool)."""
    sandbox = new_terminal()
    sandbox.start()
    held = set(sandbox.resources())
    yield sandbox
    held.update(sandbox.resources())
    sandbox.close()
    assert not [r for r in held if resource_exists(r)], "the terminal sandbox leaked resources"


def run(sandbox: PerturbedSandbox, command: str):
    return sandbox.step(command_action(command))


def test_check_sandbox_through_the_wrapper() -> None:
    config = PerturbationConfig(error_rate=0.5, page_lines=3, hidden_answers=(SECRET,), max_chars=200)
    check_sandbox(PerturbedSandbox(new_terminal(), config, seed=1), TASK, [command_action("cat secret.txt")])


def test_error_rate_one_fails_every_step_without_running_it(terminal) -> None:
    failing = PerturbedSandbox(terminal, PerturbationConfig(error_rate=1.0), seed=0)
    failing.reset(Task(id="t"))
    result = run(failing, "touch made.txt")
    assert result.observation.text.splitlines()[-3:] == [
        "agent@sandbox:~$ touch made.txt",
        "bash: touch: Input/output error",
        "agent@sandbox:~$",
    ]
    assert result.observation.format == "terminal_screen" and result.observation.data["injected_error"]
    assert result.info["perturbations"] == [
        {"kind": "error", "text": "bash: touch: Input/output error", "action_executed": False}
    ]
    assert result.observation.data["perturbations"] == result.info["perturbations"]
    # Same environment seen through a rate-0 wrapper: the failed command never ran.
    clean = PerturbedSandbox(terminal, PerturbationConfig(error_rate=0.0), seed=0)
    result = run(clean, "ls made.txt")
    assert result.observation.data["exit_code"] != 0 and "No such file" in result.observation.text
    assert result.info["perturbations"] == [] and result.observation.data["perturbations"] == []
    custom = PerturbedSandbox(terminal, PerturbationConfig(error_rate=1.0, error_template="E: {action}"), 0)
    custom.reset(Task(id="t"))
    assert run(custom, "ls -l").observation.text.splitlines()[-2] == "E: ls -l"


def test_hidden_answer_is_masked_in_text_data_and_attachments(terminal) -> None:
    config = PerturbationConfig(hidden_answers=(SECRET, "77"))
    wrapped = PerturbedSandbox(terminal, config, seed=0)
    wrapped.reset(TASK)
    result = run(wrapped, "cat secret.txt")
    assert SECRET not in result.observation.text and "the code is [hidden]" in result.observation.text
    assert {"kind": "hidden_answer", "text": 1, "data": 0, "attachments": 0} in result.info["perturbations"]
    # Output that scrolls off the screen is attached as output.txt: the answer must not leak there.
    result = run(wrapped, "seq 1 100")
    (attachment,) = result.observation.attachments
    assert attachment.content is not None and b"77" not in attachment.content
    assert b"\n[hidden]\n" in attachment.content and attachment.size == len(attachment.content)
    assert SECRET not in json.dumps(wrapped.describe().config), "the record must not spell out the answer"
    assert len(wrapped.describe().config["perturbations"]["hidden_answers"]) == 2


def test_pagination_and_truncation_markers(terminal) -> None:
    paged = PerturbedSandbox(terminal, PerturbationConfig(page_lines=5), seed=0)
    paged.reset(Task(id="t"))
    result = run(paged, "seq 1 20")
    lines = result.observation.text.splitlines()
    total = 22  # the command line, 20 numbers, the next prompt
    assert lines == ["agent@sandbox:~$ seq 1 20", "1", "2", "3", "4", "-- more (page 1/5) --"]
    assert result.info["perturbations"] == [{"kind": "pagination", "pages": 5, "lines": total}]
    assert run(paged, "clear; echo short").info["perturbations"] == [], "a short screen is left alone"
    cut = PerturbedSandbox(terminal, PerturbationConfig(max_chars=30), seed=0)
    cut.reset(Task(id="t"))
    result = run(cut, "seq 1 20")
    full = "agent@sandbox:~$ seq 1 20\n" + "\n".join(map(str, range(1, 21))) + "\nagent@sandbox:~$"
    removed = len(full) - 30
    assert result.observation.text == f"{full[:30]}\n[... output truncated: {removed} more characters]"
    assert result.info["perturbations"] == [{"kind": "truncation", "removed_chars": removed}]


def test_seeded_error_pattern_is_reproducible(terminal) -> None:
    def pattern(seed: int) -> list[bool]:
        wrapped = PerturbedSandbox(terminal, PerturbationConfig(error_rate=0.5), seed=seed)
        wrapped.reset(Task(id="t"))
        return [bool(run(wrapped, "true").info["perturbations"]) for _ in range(12)]

    first = pattern(7)
    assert first == pattern(7)
    assert first != pattern(8)
    assert 0 < sum(first) < 12


def test_perturbing_the_simulator_and_prompt_instructions() -> None:
    config = PerturbationConfig(error_rate=0.25, page_lines=10, hidden_answers=(SECRET,), max_chars=500)
    instructions = config.as_instructions()
    assert "25%" in instructions and "bash: {command}: Input/output error" in instructions
    assert f"`{SECRET}`" in instructions and "`[hidden]`" in instructions
    assert "-- more (page 1/K) --" in instructions and "500 characters" in instructions
    assert PerturbationConfig().as_instructions() == ""
    with pytest.raises(ValueError):
        PerturbationConfig(error_rate=1.5)

    def leaky_world(messages: list[dict]) -> str:
        return f"The file holds {SECRET}."  # no tags: a format failure whose raw reply holds the answer

    with scripted_chat_server(leaky_world) as server:
        simulated = SimulatedSandbox(OpenAIBackend(server.base_url), instructions=instructions)
        wrapped = PerturbedSandbox(simulated, PerturbationConfig(hidden_answers=(SECRET,)), seed=0)
        wrapped.reset(Task(id="t"))
        result = wrapped.step(command_action("cat secret.txt"))
        assert SECRET in server.requests[-1]["messages"][0]["content"], "the simulator is told what to hide"
    assert SECRET not in result.observation.text and SECRET not in json.dumps(result.observation.data)
    assert result.observation.data["format_failure"] is True
    assert {"kind": "hidden_answer", "text": 1, "data": 1, "attachments": 0} in result.info["perturbations"]
