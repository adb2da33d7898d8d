"""Redaction covers every field the MCP and SWE domains fill: tool definitions (descriptions and
schemas), nested tool-call arguments, structured content (values and keys) and the JSON texts."""

from __future__ import annotations

import json

import pytest

from beam_pipelines.redaction import Redactor
from beam_pipelines.stages.redact import redact_all, secret_finder
from schemas import to_row, validate
from tests.schemas.mcp_swe_records import mcp_text, mcp_trajectory, swe_trajectory

DB_PASSWORD = "Zk8!pW3qR7xT"
GITHUB_TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl"
ACCOUNT_PASSWORD = "Tr0ub4dor&3-horse"
LLM_KEY = "sk-proj-8hG2kL9mN4pQ7rS1tV6wX3yZ"
EMAIL = "maria.lopez@acme-mail.example.com"
CONTACT = "b.chen@example-corp.com"
SERVER_TOKEN = "xoxb-4821-Rk2mZ9qLw7Pv3Tn8"
FLAG_KEY = "Hq4-vN8kP2mX7rT5"
PLANTED = (
    DB_PASSWORD,
    GITHUB_TOKEN,
    BEARER,
    ACCOUNT_PASSWORD,
    LLM_KEY,
    EMAIL,
    CONTACT,
    SERVER_TOKEN,
    FLAG_KEY,
)


@pytest.fixture(scope="module")
def finder():
    return secret_finder()


def _planted_mcp():
    t = mcp_trajectory("mcp-planted")
    # The catalogue entry the sandbox records: the server's environment and command line.
    t.environment.config["entry"] = {
        "command": ["mcp-server-slack", f"--api-key={FLAG_KEY}"],
        "env": {"SLACK_BOT_TOKEN": SERVER_TOKEN},
    }
    tool = t.environment.tools[1]
    # A server's description and schemas may quote its environment.
    tool.description += f" Stored in postgres://crm:{DB_PASSWORD}@10.0.0.5/crm."
    tool.input_schema["properties"]["token"] = {"type": "string", "default": GITHUB_TOKEN}
    tool.output_schema = {"type": "object", "description": f"Owner: {EMAIL}"}
    # Nested tool-call arguments, and the action text that shows them.
    payload = {
        "name": "create_entities",
        "arguments": {
            "entities": [{"name": "alice"}],
            "request": {
                "headers": {"Authorization": f"Bearer {BEARER}"},
                "auth": {"password": ACCOUNT_PASSWORD},
            },
        },
    }
    step = t.steps[1]
    step.action.arguments, step.action.text = payload, json.dumps(payload, ensure_ascii=False)
    # Structured content: a secret value under a secret-naming key, an e-mail value and an e-mail key.
    structured = {"user": {"email": EMAIL, "api_key": LLM_KEY}, "contacts": {CONTACT: "friend"}}
    result = {
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
        "isError": False,
    }
    step.observation.text = mcp_text(result)
    step.observation.data["structured_content"] = structured
    return t


def _leaks(t) -> list[str]:
    text = json.dumps(to_row(t), ensure_ascii=False, default=str)
    return [s for s in PLANTED if s in text or json.dumps(s)[1:-1] in text]


def test_secrets_in_tools_arguments_and_structured_content_are_gone(finder) -> None:
    t = _planted_mcp()
    assert _leaks(t) == list(PLANTED)  # planted in every form a reader could see
    redactor = Redactor(finder)
    out = redact_all(t, redactor)
    validate(out)
    assert _leaks(out) == []
    tool = out.environment.tools[1]
    assert "<REDACTED:url_credentials:1>" in tool.description
    assert tool.input_schema["properties"]["token"]["default"].startswith("<REDACTED:github_token:")
    assert tool.output_schema["description"].startswith("Owner: <REDACTED:email:")
    # The same value has the same placeholder in the arguments, the action text, the data and the text.
    step = out.steps[1]
    password = step.action.arguments["arguments"]["request"]["auth"]["password"]
    assert password.startswith("<REDACTED:password:") and password in step.action.text
    structured = step.observation.data["structured_content"]
    assert structured["user"]["api_key"] in step.observation.text
    assert [structured["user"]["email"]] == [k for k in structured["contacts"]][:0] + [
        structured["user"]["email"]
    ]
    (contact_key,) = structured["contacts"]
    assert contact_key.startswith("<REDACTED:email:") and contact_key != structured["user"]["email"]
    assert set(redactor.counts) >= {"url_credentials", "github_token", "email", "password"}
    entry = out.environment.config["entry"]
    assert entry["env"]["SLACK_BOT_TOKEN"].startswith("<REDACTED:token:")
    assert entry["command"][0] == "mcp-server-slack" and "<REDACTED:secret:" in entry["command"][1]
    # Structure and ordinary content stay: tool names, schema keys, times, ids.
    assert [x.name for x in out.environment.tools] == ["get_current_time", "create_entities"]
    assert out.steps[0] is t.steps[0] and "2026-11-30T10:30:00+01:00" in out.steps[0].observation.text
    assert list(structured) == ["user", "contacts"]


def test_swe_commands_edits_and_outputs_are_redacted(finder) -> None:
    t = swe_trajectory("swe-planted")
    edit = t.steps[3].action
    edit.arguments["new_str"] = f'API_TOKEN = "{LLM_KEY}"'
    edit.text = f"edit(command='str_replace', path='src/core.py', new_str={edit.arguments['new_str']!r})"
    t.steps[3].observation.text += f'\n+API_TOKEN = "{LLM_KEY}"'
    t.steps[3].observation.data["diff"] = t.steps[3].observation.text
    bash = t.steps[0]
    bash.observation.text = f"export OPENAI_API_KEY={LLM_KEY}\nmail to {EMAIL}\n[exit status: 0]"
    out = redact_all(t, Redactor(finder))
    assert _leaks(out) == []
    assert out.steps[0].observation.text.endswith("[exit status: 0]")
    assert out.steps[3].observation.data["diff"] == out.steps[3].observation.text
    # Nothing to redact: the very same objects come back.
    clean = swe_trajectory("swe-clean")
    assert redact_all(clean, Redactor(finder)) is clean
