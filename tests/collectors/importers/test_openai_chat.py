"""The openai_chat importer on JSON Lines of OpenAI Chat Completions conversations: assistant
`tool_calls` with JSON-string arguments, `role: "tool"` results matched by `tool_call_id`, `tools` as
function definitions (https://platform.openai.com/docs/api-reference/chat/create)."""

from __future__ import annotations

import json
from pathlib import Path

from collectors.importers.__main__ import main
from schemas import read_trajectories
from tests.collectors.conftest import run_import

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_directory",
            "description": "List a directory.",
            "parameters": {"type": "object"},
        },
    },
]
SEARCH_TOOLS = [
    {"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "web_extractor", "parameters": {"type": "object"}}},
]
RESULTS = [
    {
        "title": "asyncio.gather",
        "url": "https://docs.python.org/3/library/asyncio-task.html",
        "snippet": "Run aws",
    },
    {"title": "Tasks", "link": "https://example.org/tasks", "content": "Coroutines and tasks"},
]


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def mcp_row() -> dict:
    """Two calls in one message, answered out of order; one result as a list of text parts."""
    return {
        "id": "chat-mcp-1",
        "model": "gpt-4o-2024-08-06",
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": "What is in the workspace, and what does README.md say?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    tool_call("call_1", "list_directory", {"path": "."}),
                    tool_call("call_2", "read_file", {"path": "README.md"}),
                ],
            },
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "# Demo"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc/"},
            {"role": "assistant", "content": "The workspace holds README.md (a heading) and src/."},
        ],
    }


def search_row() -> dict:
    return {
        "id": "chat-search-1",
        "tools": SEARCH_TOOLS,
        "messages": [
            {"role": "user", "content": "How do I gather coroutines?"},
            {"role": "assistant", "tool_calls": [tool_call("s1", "web_search", {"query": "asyncio gather"})]},
            {"role": "tool", "tool_call_id": "s1", "content": json.dumps({"results": RESULTS})},
            {
                "role": "assistant",
                "tool_calls": [tool_call("s2", "web_extractor", {"url": "https://example.org/tasks"})],
            },
            {"role": "tool", "tool_call_id": "s2", "content": "Tasks\n\nUse asyncio.gather(*aws)."},
            {"role": "assistant", "content": "Use asyncio.gather."},
        ],
    }


def write_sample(directory: Path) -> Path:
    """A JSON Lines chat log: an MCP-style row and a search row."""
    path = directory / "chat_logs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (mcp_row(), search_row())))
    return path


def by_row(out: Path) -> dict:
    return {t.provenance.source.row_id: t for t in read_trajectories(str(out), validate=True)}


def test_sample_imports_through_the_cli_as_mcp_and_search_steps(tmp_path: Path):
    source, out = write_sample(tmp_path), tmp_path / "out"
    provenance = ["--dataset", "example/chat-logs", "--license", "CC-BY-4.0"]
    done = run_import("openai_chat", source, out, *provenance)
    assert done.returncode == 0, done.stderr
    assert "imported 2 of 2 rows" in done.stdout and "mcp 1, search 1" in done.stdout

    found = by_row(out)
    t = found["chat-mcp-1"]
    source_row = t.provenance.source
    assert (source_row.dataset, source_row.format, source_row.license, source_row.uri) == (
        "example/chat-logs", "openai_chat", "CC-BY-4.0", str(source),
    )  # fmt: skip
    assert t.domain == "mcp" and t.outcome.status == "completed"
    assert t.initial_observation.text == (
        "Connected to an MCP server (not named in the source): 2 tools (read_file, list_directory)."
    )
    assert [tool.name for tool in t.environment.tools] == ["read_file", "list_directory"]
    assert t.environment.tools[0].input_schema["required"] == ["path"]
    # Calls in the order they were made, each with the result its tool_call_id names.
    assert [s.action.text for s in t.steps] == [
        '{"name": "list_directory", "arguments": {"path": "."}}',
        '{"name": "read_file", "arguments": {"path": "README.md"}}',
    ]
    assert json.loads(t.steps[0].observation.text) == {
        "content": [{"type": "text", "text": "README.md\nsrc/"}],
        "isError": False,
    }
    assert json.loads(t.steps[1].observation.text)["content"] == [{"type": "text", "text": "# Demo"}]
    assert [s.info["tool_call_id"] for s in t.steps] == ["call_1", "call_2"]
    assert t.steps[1].done and not t.steps[0].done
    assert t.task.instruction == "What is in the workspace, and what does README.md say?"
    assert t.policy.config == {"model": "gpt-4o-2024-08-06"}

    s = found["chat-search-1"]
    assert s.domain == "search" and s.environment.tools == []
    assert s.initial_observation.text == "A web search engine is ready. No search has been made yet."
    assert [step.action.text for step in s.steps] == [
        "web_search(query='asyncio gather')",
        "web_extractor(url='https://example.org/tasks')",
    ]
    assert s.steps[0].observation.text == "\n".join([
        'Results 1-2 for "asyncio gather"',
        "",
        "[1] https://docs.python.org/3/library/asyncio-task.html",
        "Title: asyncio.gather",
        "Snippet: Run aws",
        "",
        "[2] https://example.org/tasks",
        "Title: Tasks",
        "Snippet: Coroutines and tasks",
    ])  # fmt: skip
    assert s.steps[0].observation.format == "search_results"
    assert (
        s.steps[1].observation.text == "URL: https://example.org/tasks\n\nTasks\n\nUse asyncio.gather(*aws)."
    )
    assert s.steps[1].observation.format == "markdown"


def bad_lines() -> list[str]:
    row = mcp_row()
    wrong_id = {**row, "id": "bad-id"}
    wrong_id["messages"] = row["messages"][:4] + [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]
    arguments = {**row, "id": "bad-arguments"}
    arguments["messages"] = [
        row["messages"][1],
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "read_file", "arguments": "{path:"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "x"},
    ]  # fmt: skip
    no_calls = {
        "id": "bad-no-calls",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    }
    return [json.dumps(wrong_id), "{not json", json.dumps(arguments), json.dumps(no_calls)]


def test_bad_rows_go_to_the_dead_letter_file_and_a_rerun_imports_nothing_new(tmp_path: Path):
    source, out = write_sample(tmp_path), tmp_path / "out"
    with source.open("a") as handle:
        handle.write("\n".join(bad_lines()) + "\n")
    assert main(["openai_chat", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert sorted(by_row(out)) == ["chat-mcp-1", "chat-search-1"]
    letters = [
        json.loads(line)
        for line in (out / "dead_letter" / "import-openai_chat.jsonl").read_text().splitlines()
    ]
    reasons = {letter["row_id"]: (letter["kind"], letter["reason"]) for letter in letters}
    assert reasons["bad-id"] == (
        "bad_row",
        "message 4 answers tool_call_id 'call_9', which no unanswered call has",
    )
    assert reasons["bad-arguments"][1].startswith(
        "the arguments of tool call 0 of message 1 (read_file) is not valid JSON"
    )
    assert "makes no tool call" in reasons["bad-no-calls"][1]
    assert reasons["chat_logs.jsonl#3"][0] == "unreadable"

    assert main(["openai_chat", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert len(list(read_trajectories(str(out)))) == 2


def test_domain_override_truncation_and_search_calls_outside_our_form(tmp_path: Path):
    cut = mcp_row() | {"id": "cut"}
    cut["messages"] = cut["messages"][:4]  # call_1 never answered, call_2 answered: a gap
    tail = mcp_row() | {"id": "tail"}
    tail["messages"] = tail["messages"][:5] + [
        {"role": "assistant", "tool_calls": [tool_call("call_3", "read_file", {"path": "src/main.py"})]}
    ]
    odd_search = search_row() | {"id": "odd-search"}
    odd_search["messages"][1] = {
        "role": "assistant",
        "tool_calls": [tool_call("s1", "web_search", {"query": "asyncio", "search_depth": "advanced"})],
    }
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in (cut, tail, odd_search, search_row())))
    out = tmp_path / "out"
    assert main(["openai_chat", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    found = by_row(out)
    assert found["tail"].outcome.status == "truncated" and len(found["tail"].steps) == 2
    assert "read_file" in found["tail"].outcome.error
    # Arguments our web_search does not take: imported as a generic tool call, not forced into search.
    assert found["odd-search"].domain == "mcp"
    assert found["odd-search"].steps[0].action.arguments["arguments"]["search_depth"] == "advanced"
    letters = (out / "dead_letter" / "import-openai_chat.jsonl").read_text()
    assert "has no result, but later calls do" in letters and '"row_id": "cut"' in letters

    forced = tmp_path / "forced"
    assert (
        main(
            ["openai_chat", "--input", str(source), "--out", str(forced), "--domain", "mcp", "--no-progress"]
        )
        == 0
    )
    assert by_row(forced)["chat-search-1"].domain == "mcp"
    wrong = tmp_path / "wrong"
    assert (
        main(["openai_chat", "--input", str(source), "--out", str(wrong), "--domain", "web", "--no-progress"])
        == 0
    )
    assert (
        "--domain mcp or --domain search" in (wrong / "dead_letter" / "import-openai_chat.jsonl").read_text()
    )
