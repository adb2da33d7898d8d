"""LLMPolicy: reply parsing (pure), and the policy against a real llama.cpp server and broken endpoints."""

from __future__ import annotations

import random
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

from collectors.policies.base import INVALID
from collectors.policies.llm import LLMPolicy, first_json_object, parse_reply
from sandboxes.terminal.config import DEFAULT_IMAGE
from schemas.records import Action, Observation, Task
from tests.collectors.conftest import run_collector, trajectories
from tests.llm_server import LLMServer, free_port

TASK = Task(id="t1", instruction="Create a file named hello.txt containing the word hello.")
PROMPT = "root@sandbox:~# "


def screen(text: str) -> Observation:
    return Observation(format="terminal_screen", text=text)


def assert_well_formed(action: Action | None) -> None:
    """Every reply becomes None (done), a valid command/keystrokes action, or an invalid one."""
    if action is None:
        return
    if action.kind == INVALID:
        assert isinstance(action.arguments["raw"], str) and action.arguments["error"]
    elif action.kind == "command":
        assert action.arguments["command"].strip()
    else:
        assert action.kind == "keystrokes", action
        for item in action.arguments["keystrokes"]:
            assert isinstance(item["keystrokes"], str) and item["duration"] >= 0


# --- parsing: pure and fast ---------------------------------------------------------------------


def test_fenced_json_command() -> None:
    action = parse_reply('Sure.\n```json\n{"command": "echo hello > hello.txt"}\n```\n')
    assert action is not None and action.kind == "command"
    assert action.arguments["command"] == "echo hello > hello.txt"


def test_prose_around_json_and_braces_in_strings() -> None:
    reply = 'I think {this} is needed: {"command": "awk \'{print $1}\' f"} and then {"done": true}'
    action = parse_reply(reply)
    assert action is not None and action.arguments["command"] == "awk '{print $1}' f"


def test_keystrokes_list() -> None:
    reply = '{"keystrokes": [{"keystrokes": "C-c", "duration": 0.5}, {"keystrokes": "ls", "duration": 0}]}'
    action = parse_reply(reply)
    assert action is not None and action.kind == "keystrokes"
    assert action.arguments["keystrokes"] == [
        {"keystrokes": "C-c", "duration": 0.5},
        {"keystrokes": "ls", "duration": 0.0},
    ]


def test_command_timeout_and_extra_keys() -> None:
    action = parse_reply('{"thought": "build it", "command": "make", "timeout": 120}')
    assert action is not None and action.arguments == {"command": "make", "timeout": 120.0}


def test_done_ends_the_episode() -> None:
    assert parse_reply('Finished. {"done": true}') is None


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would list the files.", "no JSON object"),
        ('{"command": "ls"', "no JSON object"),  # unbalanced
        ("[1, 2]", "no JSON object"),
        ('{"cmd": "ls"}', "exactly one of"),
        ('{"command": "ls", "done": true}', "exactly one of"),
        ('{"done": false}', "'done' must be true"),
        ('{"command": ["ls"]}', "'command' string"),
        ('{"command": "ls\\nrm -rf /"}', "one line"),
        ('{"command": "sleep 9", "timeout": "soon"}', "number of seconds"),
        ('{"keystrokes": []}', "non-empty list"),
        ('{"keystrokes": "ls"}', "non-empty list"),
        ('{"keystrokes": [{"keys": "ls"}]}', "item 0 must be"),
        ('{"keystrokes": [{"keystrokes": "ls", "duration": -1}]}', "between 0 and"),
        ('{"keystrokes": [{"keystrokes": "ls", "duration": true}]}', "number of seconds"),
    ],
)
def test_garbage_is_invalid_with_reason(reply: str, reason: str) -> None:
    action = parse_reply(reply)
    assert action is not None and action.kind == INVALID
    assert action.arguments["raw"] == reply == action.text
    assert reason in action.arguments["error"]


def test_first_json_object_skips_non_objects() -> None:
    assert first_json_object('["a"] then {"b": {"c": 1}}') == {"b": {"c": 1}}


def test_config_never_records_the_api_key() -> None:
    policy = LLMPolicy("http://127.0.0.1:1/v1", "m", api_key="sk-secret", temperature=0.2, max_tokens=9)
    assert policy.config() == {
        "base_url": "http://127.0.0.1:1/v1",
        "model": "m",
        "temperature": 0.2,
        "max_tokens": 9,
        "json_mode": False,
    }
    assert "sk-secret" not in repr(policy.config())


# --- broken endpoints -----------------------------------------------------------------------------


def test_unreachable_endpoint_raises_clear_error_quickly() -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    policy = LLMPolicy(base_url, "m", timeout=2.0, max_retries=2)
    policy.reset(TASK, screen(PROMPT), random.Random(0))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=base_url.replace(".", r"\.")):
        policy.act(screen(PROMPT))
    assert time.monotonic() - started < 15


@pytest.fixture
def failing_endpoint() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server that answers every request with 503, counting the requests."""
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            paths.append(self.path)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", paths
    finally:
        server.shutdown()
        server.server_close()


def test_server_errors_are_retried_then_raised(failing_endpoint: tuple[str, list[str]]) -> None:
    base_url, paths = failing_endpoint
    policy = LLMPolicy(base_url, "m", timeout=2.0, max_retries=2)
    policy.reset(TASK, screen(PROMPT), random.Random(0))
    with pytest.raises(RuntimeError, match="InternalServerError"):
        policy.act(screen(PROMPT))
    assert paths == ["/v1/chat/completions"] * 3  # one try and two retries


# --- against a real llama.cpp server --------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.parametrize("json_mode", [False, True])
def test_real_server_drives_steps_without_exceptions(llm_server: LLMServer, json_mode: bool) -> None:
    server = llm_server
    policy = LLMPolicy(server.base_url, server.model, max_tokens=48, max_history=2, json_mode=json_mode)
    policy.reset(TASK, screen(PROMPT), random.Random(7))
    actions = [policy.act(screen(f"{PROMPT}\nstep {i}\n{PROMPT}")) for i in range(4)]
    for action in actions:
        assert_well_formed(action)
    if json_mode:
        # Constrained to JSON, even a 135M model answers with a real action now and then (seeded run).
        assert any(a is None or a.kind != INVALID for a in actions), actions
    # Bounded history: system, the last two turns (user + assistant each), then the new screen.
    messages = policy.messages("Current screen:\nnext")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"].splitlines()[2] for m in messages[1:5:2]] == ["step 2", "step 3"]
    assert TASK.instruction in messages[0]["content"]


@pytest.mark.llm
def test_real_server_unparseable_reply_is_recorded_raw(llm_server: LLMServer) -> None:
    # One token can never hold a complete action object, so the reply must come back invalid.
    policy = LLMPolicy(llm_server.base_url, llm_server.model, temperature=0.0, max_tokens=1)
    policy.reset(TASK, screen(PROMPT), random.Random(3))
    observation = screen(PROMPT)
    messages = policy.messages(f"Current screen:\n{observation.text}")
    action = policy.act(observation)
    assert action is not None and action.kind == INVALID and action.arguments["error"]
    # The same request, sent directly, shows the recorded raw text is the model's reply verbatim.
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="EMPTY")
    direct = client.chat.completions.create(
        model=llm_server.model,
        messages=messages,
        temperature=0.0,
        max_tokens=1,  # type: ignore[arg-type]
    )
    assert action.arguments["raw"] == (direct.choices[0].message.content or "")


@pytest.mark.llm
def test_real_server_prose_reply_is_invalid(llm_server: LLMServer) -> None:
    prose_only = "You are a poet. Answer with one short sentence of plain English about the sea."
    policy = LLMPolicy(
        llm_server.base_url, llm_server.model, temperature=0.0, max_tokens=24, system_prompt=prose_only
    )
    policy.reset(Task(id="t2"), screen(PROMPT), random.Random(0))
    action = policy.act(screen("Write about the sea."))
    assert action is not None and action.kind == INVALID
    assert action.arguments["raw"].strip() and "no JSON object" in action.arguments["error"]


def isolated_backend() -> str:
    """Docker when its image is there, else bubblewrap: model-written commands never run on the host."""
    inspect = ["docker", "image", "inspect", DEFAULT_IMAGE]
    if shutil.which("docker") and subprocess.run(inspect, capture_output=True).returncode == 0:
        return "docker"
    if shutil.which("bwrap"):
        return "bwrap"
    pytest.fail(f"need docker with image {DEFAULT_IMAGE} (bash infra/terminal-image/build.sh) or bwrap")


@pytest.mark.llm
def test_terminal_collector_records_llm_steps(llm_server: LLMServer, tmp_path: Path) -> None:
    out = tmp_path / "data"
    result = run_collector(
        "--policy", "llm", "--llm-base-url", llm_server.base_url, "--llm-model", llm_server.model,
        "--llm-api-key", "sk-test-secret", "--llm-max-tokens", "64", "--backend", isolated_backend(),
        "--sandboxes", "1", "--episodes", "1", "--max-steps", "3", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [trajectory] = trajectories(out)
    assert trajectory.policy.name == "llm" and trajectory.policy.config["model"] == llm_server.model
    assert trajectory.policy.config["max_tokens"] == 64
    assert "sk-test-secret" not in repr(trajectory.policy.config)
    assert trajectory.outcome.status in ("completed", "truncated"), trajectory.outcome
    assert 1 <= len(trajectory.steps) <= 3
    for step in trajectory.steps:
        assert_well_formed(step.action)
        if step.action.kind == INVALID:
            # Recorded, never sent to the shell: the runner's error observation names the reason.
            assert step.observation.format == "error" and step.action.arguments["raw"] == step.action.text
