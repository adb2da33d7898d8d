"""The toucan importer on Parquet files laid out as the Hub stores Agent-Ark/Toucan-1.5M: a folder per
config (`Kimi-K2/train-00000-of-00001.parquet`), every column a string, nested values as JSON text
(column names from the dataset card; message and metadata shapes from the Toucan pipeline's code);
and on the one public Toucan-shaped row found, ADP's sample (read where it lies,
../shared/public-samples, see its SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.importers.__main__ import main
from collectors.importers.base import BadRow, ImportContext, SourceRow
from collectors.importers.toucan import IMPORTER
from schemas import read_trajectories
from tests.collectors.conftest import run_import

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples"
ADP_ROW = SAMPLES / "toucan" / "adp_toucan_1row.json"

COLUMNS = (
    "uuid",
    "subset_name",
    "messages",
    "question",
    "available_tools",
    "target_tools",
    "question_quality_assessment",
    "response_quality_assessment",
    "metadata",
)
TIME_TOOLS = [
    {
        "name": "current_time",
        "description": "Get the current date and time.",
        "input_schema": {
            "type": "object",
            "properties": {"format": {"type": "string"}},
            "required": ["format"],
        },
        "annotations": None,
    },
    {
        "name": "convert_time",
        "description": "Convert time between timezones.",
        "input_schema": {
            "type": "object",
            "properties": {"sourceTimezone": {"type": "string"}, "targetTimezone": {"type": "string"}},
        },
        "annotations": None,
    },
]
WEATHER_TOOLS = [
    {"name": "get_forecast", "description": "Forecast for a city.", "input_schema": {"type": "object"}},
    {"name": "status", "description": "Weather service status.", "input_schema": {"type": "object"}},
]
NEWS_TOOLS = [{"name": "status", "description": "News service status.", "input_schema": {"type": "object"}}]


def server(name: str, tools: list[dict], server_id: int) -> dict:
    return {
        "server_id": server_id,
        "server_name": name,
        "remote_server_response": {"url": "https://server.example/mcp", "is_success": True, "tools": tools},
        "labels": {"primary_label": "Time & Calendar"},
    }


def openai_tools(prefix: str, tools: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": prefix + t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
            },
        }
        for t in tools
    ]


def call(name: str, arguments: dict, content: str = "", **extra: str) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "function_call": {"name": name, "arguments": json.dumps(arguments), **extra},
    }


def result(name: str, content: str) -> dict:
    return {"role": "function", "name": name, "content": content}


def metadata(servers: list[dict], agent: str, model: str) -> str:
    configs = [
        {"model": "kimik2", "generation_params": {"engine": "vllm_api", "step": "1.2"}, "timestamp": 1},
        {
            "model": model,
            "generation_params": {"agent": agent, "model_path": model, "step": "3.1"},
            "timestamp": 2,
        },
    ]
    return json.dumps({"mcp_servers": servers, "synthetic_data_gen_configs": configs, "prompt_id": "p1"})


def quality() -> tuple[str, str]:
    question = {
        "tool_selection_difficulty": {"reasoning": "clear", "score": 2},
        "question_quality": {"reasoning": "fine", "score": 4},
    }
    response = {
        "completeness": {"reasoning": "all done", "score": 5},
        "conciseness": {"reasoning": "short", "score": 4},
        "overall_score": 4.5,
        "desired_tools_used_percentage": 1.0,
        "order_correctness": True,
    }
    return json.dumps(question), json.dumps(response)


def row(
    uuid: str, subset: str, messages: list[dict], tools: list[dict], target_tools: str, servers: list[dict],
    agent: str, model: str,
) -> dict:  # fmt: skip
    """A row as the release stores it (JSON text columns); its question is the first user message."""
    question_q, response_q = quality()
    return {
        "uuid": uuid,
        "subset_name": subset,
        "messages": json.dumps(messages),
        "question": next(m["content"] for m in messages if m["role"] == "user"),
        "available_tools": json.dumps(tools),
        "target_tools": target_tools,
        "question_quality_assessment": question_q,
        "response_quality_assessment": response_q,
        "metadata": metadata(servers, agent, model),
    }


def kimi_rows() -> list[dict]:
    """Qwen-Agent runs: tools prefixed with the server's slug; parallel calls answered in order."""
    time_server = server("Time MCP Server", TIME_TOOLS, 38)
    single = [
        {"role": "system", "content": "<|im_system|>tool_declare<|im_middle|>[...]"},
        {"role": "user", "content": "What time is it in Tokyo, and in Paris?"},
        call("time-mcp-server-current_time", {"format": "YYYY-MM-DD HH:mm:ss"}),
        result("time-mcp-server-current_time", "2025-07-08 10:00:00"),
        call("time-mcp-server-convert_time", {"sourceTimezone": "UTC", "targetTimezone": "Asia/Tokyo"}),
        call("time-mcp-server-convert_time", {"sourceTimezone": "UTC", "targetTimezone": "Europe/Paris"}),
        result("time-mcp-server-convert_time", "19:00 JST"),
        result("time-mcp-server-convert_time", "12:00 CEST"),
        {"role": "assistant", "content": "Tokyo: 19:00, Paris: 12:00."},
    ]
    weather, news = server("Weather Hub", WEATHER_TOOLS, 7), server("News Now", NEWS_TOOLS, 9)
    multi = [
        {"role": "user", "content": "Are the weather and news services up?"},
        call("weather-hub-status", {}),
        result("weather-hub-status", '{"ok": true}'),
        call("news-now-status", {}),
        result("news-now-status", "degraded"),
        {"role": "assistant", "content": "Weather is up; news is degraded."},
    ]
    kimi = ("qwen_agent", "moonshotai/Kimi-K2-Instruct")
    return [
        row(
            "ac0907b0-4f43-52e3-aafe-2d6a6f3e3213", "single-turn-original", single,
            openai_tools("time-mcp-server-", TIME_TOOLS), "current_time, convert_time", [time_server], *kimi,
        ),
        row(
            "0b1c2d3e-0000-5000-8000-000000000002", "multi-server", multi,
            openai_tools("weather-hub-", WEATHER_TOOLS) + openai_tools("news-now-", NEWS_TOOLS),
            "Weather Hub::status, News Now::status", [weather, news], *kimi,
        ),
    ]  # fmt: skip


def oss_rows() -> list[dict]:
    """An OpenAI-Agents run: tools under their own names, reasoning in its own assistant message."""
    messages = [
        {"role": "system", "content": "# Tools\n\n..."},
        {"role": "user", "content": "Forecast for Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": "I should call get_forecast."},
        call("get_forecast", {"city": "Oslo"}, call_id="call_abc"),
        result("get_forecast", '{"city": "Oslo", "forecast": "rain"}'),
        {"role": "assistant", "content": "Rain in Oslo."},
    ]
    weather = server("Weather Hub", WEATHER_TOOLS, 7)
    return [
        row(
            "9f8e7d6c-0000-5000-8000-000000000003", "single-turn-original", messages,
            openai_tools("", WEATHER_TOOLS), "get_forecast", [weather], "openai_agent", "openai/gpt-oss-120b",
        )
    ]  # fmt: skip


def write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({column: pa.array([row.get(column) for row in rows], pa.string()) for column in COLUMNS})
    pq.write_table(table, path)


def write_sample(directory: Path) -> Path:
    """A Toucan-1.5M snapshot in miniature: two configs' folders, three rows."""
    root = directory / "toucan"
    write_parquet(root / "Kimi-K2" / "train-00000-of-00001.parquet", kimi_rows())
    write_parquet(root / "OSS" / "train-00000-of-00001.parquet", oss_rows())
    return root


def by_row(out: Path) -> dict:
    return {t.provenance.source.row_id: t for t in read_trajectories(str(out), validate=True)}


def test_sample_imports_through_the_cli_in_our_mcp_forms(tmp_path: Path):
    source, out = write_sample(tmp_path), tmp_path / "out"
    done = run_import("toucan", source, out)
    assert done.returncode == 0, done.stderr
    assert "imported 3 of 3 rows" in done.stdout

    found = by_row(out)
    t = found["ac0907b0-4f43-52e3-aafe-2d6a6f3e3213"]
    assert t.domain == "mcp" and t.outcome.status == "completed" and t.outcome.reward is None
    source_row = t.provenance.source
    assert (source_row.dataset, source_row.format, source_row.license) == (
        "Agent-Ark/Toucan-1.5M",
        "toucan",
        "Apache-2.0",
    )
    assert source_row.uri.endswith("Kimi-K2/train-00000-of-00001.parquet")
    assert t.initial_observation.text == "Connected to Time MCP Server: 2 tools (current_time, convert_time)."
    assert [tool.name for tool in t.environment.tools] == ["current_time", "convert_time"]
    assert t.environment.tools[1].input_schema["properties"]["targetTimezone"] == {"type": "string"}
    # Server-prefixed names become the server's own; parallel calls keep their order.
    assert [s.action.text for s in t.steps] == [
        '{"name": "current_time", "arguments": {"format": "YYYY-MM-DD HH:mm:ss"}}',
        '{"name": "convert_time", "arguments": {"sourceTimezone": "UTC", "targetTimezone": "Asia/Tokyo"}}',
        '{"name": "convert_time", "arguments": {"sourceTimezone": "UTC", "targetTimezone": "Europe/Paris"}}',
    ]
    assert t.steps[0].action.kind == "tool_call"
    assert json.loads(t.steps[2].observation.text) == {
        "content": [{"type": "text", "text": "12:00 CEST"}],
        "isError": False,
    }
    assert t.steps[2].observation.format == "mcp_result"
    assert t.steps[2].observation.data["server"] == "Time MCP Server"
    assert t.steps[0].info["source_tool_name"] == "time-mcp-server-current_time"
    assert t.task.instruction == "What time is it in Tokyo, and in Paris?"
    assert t.task.metadata["response_quality"] == {
        "completeness": 5,
        "conciseness": 4,
        "overall_score": 4.5,
        "desired_tools_used_percentage": 1.0,
        "order_correctness": True,
    }
    assert t.task.metadata["question_quality"]["tool_selection_difficulty"] == 2
    assert t.task.metadata["target_tools"] == ["current_time", "convert_time"]
    assert t.policy.config == {
        "model": "moonshotai/Kimi-K2-Instruct",
        "agent": "qwen_agent",
        "dataset_config": "Kimi-K2",
    }

    multi = found["0b1c2d3e-0000-5000-8000-000000000002"]
    # Both servers have `status`: the prefixed names keep the two apart.
    assert [s.action.arguments["name"] for s in multi.steps] == ["weather-hub-status", "news-now-status"]
    assert multi.initial_observation.text.splitlines() == [
        "Connected to Weather Hub: 2 tools (get_forecast, weather-hub-status).",
        "Connected to News Now: 1 tools (news-now-status).",
    ]
    assert [s.observation.data["server"] for s in multi.steps] == ["Weather Hub", "News Now"]

    oss = found["9f8e7d6c-0000-5000-8000-000000000003"]
    assert [s.action.text for s in oss.steps] == ['{"name": "get_forecast", "arguments": {"city": "Oslo"}}']
    assert oss.steps[0].info["tool_call_id"] == "call_abc"
    assert oss.policy.config["model"] == "openai/gpt-oss-120b"


def bad_rows() -> list[dict]:
    good = kimi_rows()[0]
    no_calls = [
        {"role": "user", "content": "Tell me a joke"},
        {"role": "assistant", "content": "No tools needed."},
    ]
    orphan = [{"role": "user", "content": "hi"}, result("time-mcp-server-current_time", "10:00")]
    return [
        {**good, "uuid": "bad-json", "messages": '[{"role": "user", "content": "cut'},
        {**good, "uuid": "bad-no-calls", "messages": json.dumps(no_calls)},
        {**good, "uuid": "bad-orphan", "messages": json.dumps(orphan)},
        {**good, "uuid": "bad-metadata", "metadata": json.dumps({"mcp_servers": [{"tools": []}]})},
    ]


def test_bad_rows_go_to_the_dead_letter_file_and_a_rerun_imports_nothing_new(tmp_path: Path):
    source, out = write_sample(tmp_path), tmp_path / "out"
    write_parquet(source / "Qwen3" / "train-00000-of-00001.parquet", bad_rows())
    assert main(["toucan", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert len(by_row(out)) == 3
    letters = [
        json.loads(line) for line in (out / "dead_letter" / "import-toucan.jsonl").read_text().splitlines()
    ]
    reasons = {letter["row_id"]: letter["reason"] for letter in letters}
    assert set(reasons) == {"bad-json", "bad-no-calls", "bad-orphan", "bad-metadata"}
    assert "field 'messages' is not valid JSON" in reasons["bad-json"]
    assert "makes no tool call" in reasons["bad-no-calls"]
    assert "message 1 is a function result, but no call is waiting for one" in reasons["bad-orphan"]
    assert "needs a server_name" in reasons["bad-metadata"]
    assert {letter["kind"] for letter in letters} == {"bad_row"}

    assert main(["toucan", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert len(list(read_trajectories(str(out)))) == 3  # nothing written twice


def convert(messages: list[dict]):
    row = {**kimi_rows()[0], "messages": json.dumps(messages)}
    context = ImportContext(dataset="d", version="", license="", collector_version="t", host="h")
    return IMPORTER.convert(SourceRow(row_id=row["uuid"], data=row, uri="x/Kimi-K2/a.parquet"), context)


def test_a_call_cut_off_at_the_end_truncates_and_a_gap_is_a_bad_row():
    asked = {"format": "YYYY-MM-DD"}
    episode = convert(
        [
            {"role": "user", "content": "time?"},
            call("time-mcp-server-current_time", asked),
            result("time-mcp-server-current_time", "2025-07-08"),
            call("time-mcp-server-convert_time", {}),
        ]
    )
    assert len(episode.turns) == 1 and episode.outcome.status == "truncated"
    assert "convert_time" in episode.outcome.error and episode.outcome.error_kind == "no_tool_result"

    with pytest.raises(BadRow, match="has no result, but later calls do"):
        convert(
            [
                {"role": "user", "content": "time?"},
                call("time-mcp-server-current_time", asked),
                {"role": "user", "content": "never mind, convert instead"},
                call("time-mcp-server-convert_time", {}),
                result("time-mcp-server-convert_time", "19:00"),
            ]
        )


def test_multi_turn_rows_keep_later_requests_and_unknown_tools_keep_their_name():
    episode = convert(
        [
            {"role": "user", "content": "time?"},
            call("time-mcp-server-current_time", {"format": "YYYY"}),
            result("time-mcp-server-current_time", "2025"),
            call("time_mcp_server-convert_time", {"sourceTimezone": "UTC"}),
            result("time_mcp_server-convert_time", "09:00"),
            {"role": "user", "content": "and the weather?"},
            call("weather_now", {"city": "Oslo"}),
            result("weather_now", "Tool weather_now not found"),
        ]
    )
    assert [turn.info["user_turn"] for turn in episode.turns] == [0, 0, 1]
    # A prefix other than the slug we derive still finds the server's tool by its own name.
    assert episode.turns[1].action.arguments["name"] == "convert_time"
    assert episode.task.metadata["later_user_messages"] == ["and the weather?"]
    assert episode.turns[2].action.arguments == {"name": "weather_now", "arguments": {"city": "Oslo"}}
    assert episode.turns[2].observation.data["server"] == ""


def test_adp_row_with_prose_assessments_and_no_server_tool_list_imports(tmp_path: Path):
    assert ADP_ROW.is_file(), f"{ADP_ROW} is missing: the public samples must sit beside the repository"
    out = tmp_path / "out"
    done = run_import("toucan", ADP_ROW, out)
    assert done.returncode == 0, done.stderr
    assert "imported 1 of 1 rows" in done.stdout
    assert not (out / "dead_letter").exists()
    (t,) = by_row(out).values()
    assert t.provenance.source.row_id == "ac0907b0-4f43-52e3-aafe-2d6a6f3e3213"
    assert t.task.instruction.startswith("I'm considering joining a Series B fintech startup called")
    # The assessments are sentences, not JSON: kept as text, the row not lost.
    assert t.task.metadata["question_quality_text"] == (
        "This is a high-quality question that requires research and analysis. The user has a specific, "
        "realistic scenario and needs comprehensive information to make an informed decision."
    )
    assert t.task.metadata["response_quality_text"].startswith("The response demonstrates proper tool usage")
    assert "question_quality" not in t.task.metadata
    assert t.task.metadata["target_tools"] == ["exa-search-web_search_exa"]
    assert t.task.metadata["subset"] == "single-turn-original"
    # The server lists no tools of its own: the row's available_tools, given to it by their prefix.
    assert t.initial_observation.text == "Connected to exa-search: 1 tools (web_search_exa)."
    assert [tool.name for tool in t.environment.tools] == ["web_search_exa"]
    assert t.environment.tools[0].input_schema["required"] == ["query"]
    (step,) = t.steps
    assert step.action.text == (
        '{"name": "web_search_exa", "arguments": {"query": "StellarPay fintech startup Series B business '
        'model recent developments", "numResults": 5}}'
    )
    assert step.info["source_tool_name"] == "exa-search-web_search_exa"
    assert step.observation.data["server"] == "exa-search"
    assert json.loads(json.loads(step.observation.text)["content"][0]["text"])["results"][0] == {
        "title": "StellarPay Raises $50M Series B",
        "url": "https://example.com/stellarpay-series-b",
        "content": "StellarPay, a fintech startup focused on cross-border payments, has raised $50M in "
        "Series B funding...",
    }
    assert t.outcome.status == "completed" and t.outcome.reward is None
