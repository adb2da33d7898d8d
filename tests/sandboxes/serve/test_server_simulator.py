"""The simulated sandbox through the server: a world model (SmolLM2-135M on llama.cpp's server) behind
sandboxes.plugins.simulator_factory (as the CLI's --simulator builds it), driven by openenv-core's
GenericEnvClient like a real sandbox."""

from __future__ import annotations

from openenv.core.generic_client import GenericEnvClient

from sandboxes.serve.__main__ import parser, sandbox_factory
from sandboxes.serve.server import build_app
from sandboxes.tasks import embedded_tasks
from tests.llm_server import LLMServer
from tests.sandboxes.serve.conftest import serving

TASK = "files-create-notes"  # a command verifier, which the simulator asks of the world model


def test_openenv_client_plays_a_simulated_terminal_episode(llm_server: LLMServer) -> None:
    # Built as `python -m sandboxes.serve --simulator URL --simulator-model NAME` builds it.
    args = ["--domain", "terminal", "--simulator", llm_server.base_url, "--simulator-model", llm_server.model]
    factory = sandbox_factory(parser().parse_args([*args, "--simulator-max-tokens", "32"]))
    app = build_app(factory, [s.task for s in embedded_tasks("terminal")], domain="terminal", max_sessions=1)
    asked = llm_server.chat_requests()
    with serving(app) as url, GenericEnvClient(base_url=url, message_timeout_s=120).sync() as env:
        first = env.reset(task_id=TASK)
        assert first.observation["data"]["simulated"] is True and "notes" in first.observation["instruction"]
        step = env.step({"kind": "command", "arguments": {"command": "printf 'a\\nb\\nc\\n' > notes.txt"}})
        assert not step.done and step.observation["format"] == "terminal_screen"
        refused = env.step({"kind": "command", "arguments": {}})  # the domain's own parser refuses it
        assert "command action needs a 'command' string" in refused.observation["error"]
        last = env.step({"kind": "done"})
        state = env.state()
    # The verifier asks the world model whether `test "$(wc -l < notes.txt)" -eq 3` passes: PASS or FAIL
    # is a reward of 1 or 0, and a screen with neither (a 135M model's usual answer) is None, not 0.
    assert last.done and (last.reward is None or last.reward in (0.0, 1.0))
    assert state["simulated"] and state["environment"]["backend"] == "simulator"
    assert state["environment"]["model"] == llm_server.model and state["reward"] == last.reward
    # The step and the verifier's check were each a completion of the model; the refused action none.
    assert llm_server.chat_requests() - asked >= 2
