"""SimulatedSandbox: the sandbox contract on a real local model, a real llama.cpp server, and a real
HTTP server whose model is a deterministic function (see `scripted_chat_server` for why)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from collectors.policies.base import Policy
from collectors.policies.scripted import ScriptedPolicy
from collectors.runner import FleetConfig, FleetSummary, run_fleet
from collectors.tasks import TaskSpec
from sandboxes.base import InvalidActionError, SandboxClosedError, SandboxError
from sandboxes.checks import check_sandbox
from sandboxes.terminal import command_action, keystrokes_action
from sandboxes.terminal.actions import parse_action
from schemas import read_trajectories
from schemas.records import Action, Observation, Task
from schemas.render import strip_think
from tests.llm_server import LLMServer
from tests.training.test_backends import scripted_chat_server, tiny_backend  # noqa: F401 (fixture)
from training.backends.base import GenerationConfig, WorldModelBackend
from training.backends.openai_http import OpenAIBackend
from training.simulator import SimulatedSandbox

TASK = Task(id="t1")
ACTIONS = [command_action("echo hi"), keystrokes_action([("ls\n", 0.5), ("C-c", 0.1)])]
SHORT = GenerationConfig(max_new_tokens=8)


def echo_world(messages: list[dict]) -> str:
    """A deterministic terminal world model: `echo X` prints X, anything else prints nothing."""
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    shown = action.removeprefix("echo ") if action.startswith("echo ") else None
    screen = "\n".join(["agent@sandbox:~$ " + action, *([shown] if shown else []), "agent@sandbox:~$"])
    thought = f"<think>\nThe shell runs `{action}`.\n</think>\n\n"
    return f"{thought}<predicted_observation>\n{screen}\n</predicted_observation>"


def test_check_sandbox_with_the_local_transformers_model(tiny_backend) -> None:  # noqa: F811
    check_sandbox(SimulatedSandbox(tiny_backend, generation=SHORT), TASK, ACTIONS)
    # Random weights never write the tags: every step is a recorded format failure, not a crash.
    sim = SimulatedSandbox(tiny_backend, generation=SHORT)
    assert sim.reset(TASK).text == "agent@sandbox:~$"
    result = sim.step(ACTIONS[0])
    assert result.info["format_failure"] is True and result.info["simulated"] is True
    assert result.observation.format == "terminal_screen"
    assert result.observation.data["format_failure"] is True
    assert result.observation.text == strip_think(result.observation.data["raw_reply"]).strip()
    env = sim.describe()
    assert (env.name, env.backend, env.config["backend"]) == ("terminal", "simulator", "transformers")
    sim.close()


@pytest.mark.llm
def test_check_sandbox_with_the_http_backend_on_llama_cpp(llm_server: LLMServer) -> None:
    backend = OpenAIBackend(llm_server.base_url, llm_server.model)
    generation = GenerationConfig(max_new_tokens=12)
    check_sandbox(SimulatedSandbox(backend, generation=generation), TASK, ACTIONS[:1])
    sim = SimulatedSandbox(backend, generation=generation)
    sim.reset(TASK)
    result = sim.step(ACTIONS[0])
    # SmolLM2-135M may or may not follow the format; either way the step says which, consistently.
    failed = result.observation.data["format_failure"]
    assert result.info["format_failure"] is failed and ("raw_reply" in result.observation.data) is failed
    assert env_backend(sim) == ("simulator", "openai", llm_server.model)
    backend.close()


def env_backend(sim: SimulatedSandbox) -> tuple[str, str, str]:
    env = sim.describe()
    return env.backend, env.config["backend"], env.config["model"]


def test_well_formed_prediction_is_extracted_and_becomes_the_history() -> None:
    with scripted_chat_server(echo_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), instructions="- Every command fails.")
        sim.reset(TASK)
        first = sim.step(command_action("echo hi"))
        assert first.observation.text == "agent@sandbox:~$ echo hi\nhi\nagent@sandbox:~$"
        assert first.observation.data == {"simulated": True, "format_failure": False}
        assert first.info["format_failure"] is False and first.info["model_latency_s"] > 0
        second = sim.step(command_action("pwd"))
        assert second.observation.text == "agent@sandbox:~$ pwd\nagent@sandbox:~$"
        system, *turns = server.requests[-1]["messages"]
        assert system["role"] == "system" and "## Initial state" in system["content"]
        assert system["content"].endswith("## Simulation controls\n- Every command fails.")
        # The simulator's own first prediction is the history of the second turn (closed loop).
        assert [m["role"] for m in turns] == ["user", "assistant", "user"]
        assert turns[0]["content"] == "### Turn 1\n\n**Action:**\necho hi"
        assert turns[1]["content"] == "**Environment Observation:**\n" + first.observation.text
        assert turns[2]["content"] == "### Turn 2\n\n**Action:**\npwd"
        # A new episode starts from an empty history.
        sim.reset(TASK)
        sim.step(command_action("echo again"))
        assert len(server.requests[-1]["messages"]) == 2


@pytest.mark.parametrize(
    "reply",
    [
        "The screen shows hi.",  # no tag at all
        "<predicted_observation>\nagent@sandbox:~$ echo hi\nhi",  # opened, never closed
        "<think>\n<predicted_observation>\nhi\n</predicted_observation>\n</think>\nDone.",  # only in <think>
        (None, {"reasoning_content": "<predicted_observation>\nhi\n</predicted_observation>"}),
    ],
    ids=["no-tag", "unclosed", "inside-think", "inside-reasoning-content"],
)
def test_malformed_answers_are_recorded_format_failures(reply) -> None:
    with scripted_chat_server(lambda messages: reply) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url))
        sim.reset(TASK)
        result = sim.step(command_action("echo hi"))
        obs = result.observation
        assert result.info["format_failure"] is True
        assert obs.format == "terminal_screen" and obs.data["format_failure"] is True
        assert obs.data["raw_reply"] and obs.text == strip_think(obs.data["raw_reply"]).strip()
        assert "<think>" not in obs.text
        json.dumps(obs.data)
        # The episode goes on after a format failure.
        assert sim.step(command_action("ls")).info["format_failure"] is True


def test_initial_observation_from_task_constructor_or_domain_default() -> None:
    with scripted_chat_server(echo_world) as server:
        backend = OpenAIBackend(server.base_url)
        given = Observation(format="terminal_screen", text="root@box:/srv#")
        sim = SimulatedSandbox(backend, initial_observation=given)
        assert sim.reset(TASK).text == "root@box:/srv#"
        task = Task(id="t2", metadata={"initial_observation": {"text": "me@host:~/repo$", "data": {"x": 1}}})
        first = sim.reset(task)
        assert (first.format, first.text, first.data) == (
            "terminal_screen",
            "me@host:~/repo$",
            {"x": 1, "simulated": True},
        )
        sim.step(command_action("ls"))
        assert "me@host:~/repo$" in server.requests[-1]["messages"][0]["content"]
        assert SimulatedSandbox(backend).reset(TASK).text == "agent@sandbox:~$"
        assert SimulatedSandbox(backend, domain="mcp").reset(TASK).format == "mcp_result"
        assert SimulatedSandbox(backend, domain="os").reset(TASK).format == "desktop_a11y_tree"


def test_history_budget_drops_the_oldest_turns() -> None:
    with scripted_chat_server(echo_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), history_budget_tokens=700)
        sim.reset(TASK)
        for k in range(12):
            sim.step(command_action(f"echo {'word ' * 20}{k}"))
        sent = server.requests[-1]["messages"]
        assert sent[0]["role"] == "system" and sent[-1]["content"].endswith("11")
        assert 3 <= len(sent) < 2 + 2 * 11, f"{len(sent)} messages: the budget should drop old turns"
        assert sent[1]["content"].startswith("### Turn "), "turns are dropped in (action, observation) pairs"


def test_errors_are_sandbox_errors_and_bad_actions_are_rejected() -> None:
    # Nothing listens on port 9 (discard): the transport fails after the SDK's retries.
    sim = SimulatedSandbox(OpenAIBackend("http://127.0.0.1:9/v1", model="m", max_retries=0, timeout=2))
    with pytest.raises(SandboxClosedError):
        sim.step(ACTIONS[0])
    sim.reset(TASK)
    with pytest.raises(InvalidActionError):
        sim.step(Action(kind="command", arguments={"command": 42}))
    with pytest.raises(SandboxError, match="world model backend failed"):
        sim.step(ACTIONS[0])
    sim.close()
    with pytest.raises(SandboxClosedError):
        sim.step(ACTIONS[0])


def simulated_fleet(
    backend: WorldModelBackend,
    policy_factory: Callable[[], Policy],
    specs: list[TaskSpec],
    out: Path,
    domain: str = "terminal",
    **options: Any,
) -> FleetSummary:
    """`run_fleet` of `domain` on sandboxes simulated by `backend`, as a test runs it: no progress bar,
    and pytest keeps its own signal handlers."""
    config = FleetConfig(
        domain=domain,
        sandbox_factory=lambda: SimulatedSandbox(backend, domain=domain),
        policy_factory=policy_factory,
        tasks=specs,
        out=str(out),
        progress=False,
        handle_signals=False,
        **options,
    )
    return run_fleet(config)


def test_run_fleet_collects_simulated_trajectories_in_the_same_schema(tmp_path) -> None:
    specs = [TaskSpec(task=Task(id="hello"), actions=[{"command": "echo one"}, {"command": "echo two"}])]
    with scripted_chat_server(echo_world) as server:
        backend = OpenAIBackend(server.base_url)
        summary = simulated_fleet(
            backend, lambda: ScriptedPolicy(specs, parse_action), specs, tmp_path, sandboxes=2, episodes=2
        )
    assert summary is not None
    trajectories = list(read_trajectories(str(tmp_path)))
    assert len(trajectories) == 2
    for trajectory in trajectories:
        assert trajectory.environment.backend == "simulator" and trajectory.outcome.status == "completed"
        assert [s.observation.text.splitlines()[1] for s in trajectory.steps] == ["one", "two"]
        assert trajectory.provenance.simulated is True
        assert all(s.observation.data["simulated"] for s in trajectory.steps)
        assert trajectory.initial_observation.data == {"simulated": True}
