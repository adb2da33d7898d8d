"""The openai_chat importer on JSON Lines of OpenAI Chat Completions conversations: assistant
`tool_calls` with JSON-string arguments, `role: "tool"` results matched by `tool_call_id`, `tools` as
function definitions (https://platform.openai.com/docs/api-reference/chat/create); and on real public
files: tau-bench's published GPT-4o airline runs and SWE-Gym's OpenHands chats (read where they lie,
../shared/public-samples, see its SOURCES.md)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from collectors.importers.__main__ import main
from schemas import read_trajectories
from tests.collectors.conftest import run_import

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples"
TAU_BENCH = SAMPLES / "openai_chat" / "tau-bench_gpt-4o-airline.json"
SWE_GYM = SAMPLES / "openhands" / "adp_swe-gym_openhands_sampled_5rows.json"

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


def public_sample(path: Path) -> Path:
    assert path.is_file(), f"{path} is missing: the public samples must sit beside the repository"
    return path


def mcp_text(step) -> str:
    """The one text item of an MCP result observation."""
    (item,) = json.loads(step.observation.text)["content"]
    return item["text"]


def test_tau_bench_runs_import_with_the_simulated_user_as_the_respond_tool(tmp_path: Path):
    out = tmp_path / "out"
    done = run_import("openai_chat", public_sample(TAU_BENCH), out)
    assert done.returncode == 0, done.stderr
    assert "imported 200 of 200 rows" in done.stdout and "steps: 2,454" in done.stdout
    assert not (out / "dead_letter").exists()
    found = by_row(out)
    assert Counter(t.outcome.status for t in found.values()) == {"completed": 195, "truncated": 5}
    assert sum(t.outcome.reward for t in found.values()) == 84.0

    first = found["tau-bench_gpt-4o-airline.json#0"]
    assert first.domain == "mcp" and len(first.steps) == 15
    assert first.task.id == "task-0"
    assert first.task.instruction == "Hi! I'm looking to book a flight from New York to Seattle on May 20th."
    assert first.task.metadata["user_instruction"].startswith("You are mia_li_3668. You want to fly from")
    assert first.task.metadata["expected_actions"][0]["name"] == "book_reservation"
    # No tool list in the file: the tools its calls name, and the user as `respond`.
    assert [tool.name for tool in first.environment.tools] == [
        "get_user_details", "search_direct_flight", "search_onestop_flight", "calculate",
        "book_reservation", "think", "respond",
    ]  # fmt: skip
    assert first.environment.tools[-1].input_schema["required"] == ["content"]
    assert first.environment.config["tools_from"] == "calls"
    assert first.environment.config["source_shape"] == "tau-bench"
    assert first.environment.config["agent_system_prompt"].startswith("# Airline Agent Policy\n")
    # The agent's message to the user is an action; the user's reply is what the environment answers.
    ask = first.steps[0]
    assert ask.action.text == (
        '{"name": "respond", "arguments": {"content": "To assist you with booking a flight, '
        "I'll need your user ID. Could you please provide that?\"}}"
    )
    assert json.loads(ask.observation.text) == {
        "content": [{"type": "text", "text": "Sure, my user ID is mia_li_3668."}],
        "isError": False,
    }
    lookup = first.steps[2]
    assert lookup.action.text == '{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}'
    assert lookup.info["tool_call_id"] == "call_oIHazX6yQrB8hUwl4cRilFKj"
    assert (
        mcp_text(first.steps[9]) == "Error: payment amount does not add up, total price is 305, but paid 255"
    )
    assert mcp_text(first.steps[-1]) == "Thank you so much for your help! ###STOP###"
    assert first.outcome.status == "completed" and first.outcome.reward == 0.0
    assert first.outcome.verification.verifier == "imported:tau-bench"
    assert first.outcome.verification.details["r_actions"] == 0.0

    transferred = found["tau-bench_gpt-4o-airline.json#4"]
    assert len(transferred.steps) == 12 and transferred.outcome.status == "completed"
    assert transferred.steps[-1].action.arguments["name"] == "transfer_to_human_agents"
    assert mcp_text(transferred.steps[-1]) == "Transfer successful"

    cut = found["tau-bench_gpt-4o-airline.json#33"]
    assert len(cut.steps) == 30 and cut.outcome.status == "truncated"
    assert cut.outcome.error_kind == "step_limit" and cut.outcome.reward == 0.0
    assert cut.steps[-1].action.text == (
        '{"name": "search_direct_flight", "arguments": {"origin": "ORD", "destination": "PHL", '
        '"date": "2024-05-10"}}'
    )
    assert mcp_text(cut.steps[-1]) == "[]"


def test_swe_gym_chats_end_with_finish_and_available_tools_are_read(tmp_path: Path):
    out = tmp_path / "out"
    done = run_import("openai_chat", public_sample(SWE_GYM), out)
    assert done.returncode == 0, done.stderr
    assert "imported 5 of 5 rows" in done.stdout and "steps: 82" in done.stdout
    found = by_row(out)
    assert [len(found[f"adp_swe-gym_openhands_sampled_5rows.json#{i}"].steps) for i in range(5)] == [
        20, 8, 10, 16, 28,
    ]  # fmt: skip
    finished = found["adp_swe-gym_openhands_sampled_5rows.json#0"]
    # A last `finish` gets no result: that is how the agent ends, not a cut.
    assert finished.outcome.status == "completed"
    assert finished.task.metadata["final_call"] == {"name": "finish", "arguments": {}}
    assert [tool.name for tool in finished.environment.tools] == [
        "execute_bash", "finish", "str_replace_editor",
    ]  # fmt: skip
    assert finished.steps[0].action.text == (
        '{"name": "str_replace_editor", "arguments": {"command": "view", '
        '"path": "/workspace/python__mypy__1.6", "view_range": [0, -1]}}'
    )
    assert mcp_text(finished.steps[0]) == (
        "OBSERVATION:\nERROR:\nThe `view_range` parameter is not allowed when `path` points to a directory."
    )
    cut = found["adp_swe-gym_openhands_sampled_5rows.json#4"]
    assert cut.outcome.status == "truncated" and cut.outcome.error == (
        "the log ends with 1 tool call(s) that got no result: str_replace_editor"
    )

    renamed = mcp_row() | {"id": "listed-as-available"}
    renamed["available_tools"] = renamed.pop("tools")
    source = tmp_path / "available.jsonl"
    source.write_text(json.dumps(renamed) + "\n")
    assert main(["openai_chat", "--input", str(source), "--out", str(tmp_path / "o2"), "--no-progress"]) == 0
    listed = by_row(tmp_path / "o2")["listed-as-available"]
    assert [tool.name for tool in listed.environment.tools] == ["read_file", "list_directory"]
    assert listed.environment.tools[0].description == "Read a file of the workspace."
    assert "tools_from" not in listed.environment.config


def tau_run(task_id: int, traj: list[dict], reward: float = 1.0, info: dict | None = None) -> dict:
    """A run as tau-bench's run.py writes it (EnvRunResult: task_id, reward, info, traj, trial)."""
    return {"task_id": task_id, "reward": reward, "info": info or {}, "traj": traj, "trial": 0}


def test_tau_bench_failed_runs_are_dead_letters_and_a_last_unanswered_reply_is_no_step(tmp_path: Path):
    lookup = tool_call("c1", "get_order", {"order_id": "#W1"})
    short = [
        {"role": "system", "content": "# Retail agent policy"},
        {"role": "user", "content": "Where is order #W1?"},
        {"role": "assistant", "content": None, "tool_calls": [lookup]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_order", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It has shipped."},
        {"role": "user", "content": "Thanks! ###STOP###"},
        {"role": "assistant", "content": "Glad to help."},  # never answered: no observation, no step
    ]
    failed = tau_run(1, [], 0.0, {"error": "RateLimitError: slow down", "traceback": "..."})
    source = tmp_path / "retail.json"
    source.write_text(json.dumps([tau_run(0, short), failed]))
    out = tmp_path / "out"
    assert main(["openai_chat", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    (run,) = by_row(out).values()
    assert [step.action.arguments["name"] for step in run.steps] == ["get_order", "respond"]
    assert run.steps[1].action.arguments["arguments"] == {"content": "It has shipped."}
    assert mcp_text(run.steps[1]) == "Thanks! ###STOP###"
    assert run.outcome.status == "completed" and run.outcome.reward == 1.0
    assert run.task.instruction == "Where is order #W1?"
    letters = [
        json.loads(line)
        for line in (out / "dead_letter" / "import-openai_chat.jsonl").read_text().splitlines()
    ]
    assert [(letter["row_id"], letter["reason"]) for letter in letters] == [
        ("retail.json#1", "the run failed before its first step: RateLimitError: slow down")
    ]

    searched = tmp_path / "searched"
    argv = ["openai_chat", "--input", str(source), "--out", str(searched), "--domain", "search"]
    assert main([*argv, "--no-progress"]) == 0
    assert (
        "imports into the mcp domain, not 'search'"
        in (searched / "dead_letter" / "import-openai_chat.jsonl").read_text()
    )
