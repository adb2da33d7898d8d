"""MCP and SWE trajectories go through the corpus pipeline unchanged: `mcp_test.jsonl` and
`swe_test.jsonl` come out in AgentWorldBench format with the tool definitions in `system_str`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from beam_pipelines.build_corpus import main
from beam_pipelines.stages.common import AGENTWORLDBENCH, CORPORA, SFT
from beam_pipelines.stages.filter import is_error_observation, rejection
from beam_pipelines.stages.format import Formatter
from schemas.chat_tokens import ChatTokenizer
from schemas.records import Observation
from schemas.render import AGENTWORLDBENCH_FIELDS, chat_messages, target_text, tools_text
from tests.beam_pipelines.conftest import write_dataset
from tests.schemas.mcp_swe_records import PYTEST_FAIL, mcp_trajectory, swe_trajectory

TOOL_SECRET = "ghp_" + "M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8"


def _mcp(i: int):
    t = mcp_trajectory(f"mcp-{i:04d}", when=f"2026-11-{10 + i}T0{i}:15:00+01:00", entity_id=f"e-{i}{i}a")
    t.task.id = f"mcp-task-{i}"
    return t


def _swe(i: int):
    t = swe_trajectory(f"swe-{i:04d}", seconds=f"0.0{i}")
    t.task.id = f"swe-task-{i}"
    return t


def test_formatter_writes_each_domains_test_file_with_its_tools() -> None:
    formatter = Formatter(CORPORA, None, 32768, 2)
    for t in (_mcp(1), _swe(1)):
        out = list(formatter.format("test", t))
        records = [o.value for o in out if o.tag == AGENTWORLDBENCH]
        assert [path for path, _ in records] == [f"agentworldbench/{t.domain}_test.jsonl"] * len(t.steps)
        for k, (_, record) in enumerate(records, start=1):
            assert tuple(record) == AGENTWORLDBENCH_FIELDS and record["task"] == t.domain
            assert tools_text(t.environment.tools) in record["system_str"] and record["turn_idx"] == k
            assert (
                record["response"][-1] == f"**Environment Observation:**\n{t.steps[k - 1].observation.text}"
            )
        sft = [o.value for o in out if o.tag == SFT]
        assert len(sft) == len(t.steps) and sft[0].messages[0]["content"] == records[0][1]["system_str"]


def test_failed_tool_results_count_as_errors_for_the_filter() -> None:
    assert is_error_observation(Observation("swe_tool_result", PYTEST_FAIL, {"exit_status": 1}))
    assert not is_error_observation(Observation("swe_tool_result", "ok", {"exit_status": 0}))
    assert not is_error_observation(Observation("swe_tool_result", "     1\tx", {"exit_status": None}))
    assert is_error_observation(Observation("mcp_result", "{}", {"is_error": True}))
    assert not is_error_observation(Observation("mcp_result", "{}", {"is_error": False}))
    # A trajectory with successes among its failures is kept; one of failures only is not.
    assert rejection(_swe(1), 512, 10**6) is None and rejection(_mcp(1), 512, 10**6) is None
    failing = _mcp(2)
    for step in failing.steps:
        step.observation = dataclasses.replace(
            step.observation, data={**step.observation.data, "is_error": True}
        )
    assert rejection(failing, 512, 10**6)[0] == "all_errors"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mcp_swe_corpus")
    trajectories = [_mcp(i) for i in range(1, 4)] + [_swe(i) for i in range(1, 4)]
    trajectories[0].environment.tools[0].description += f" (token {TOOL_SECRET})"
    raw = write_dataset(root / "raw", trajectories)
    args = ["--input", str(raw), "--output", str(root / "out"), "--split-ratios", "0,0,1", "--shards", "1"]
    assert main([*args, "--direct_num_workers=1", "--direct_running_mode=in_memory"]) == 0
    return root / "out"


def test_build_corpus_writes_mcp_and_swe_test_files(corpus: Path) -> None:
    for domain, tool in (("mcp", "### get_current_time"), ("swe", "### edit")):
        lines = (corpus / f"agentworldbench/{domain}_test.jsonl").read_text().splitlines()
        assert lines, domain
        for line in lines:
            record = json.loads(line)
            assert tuple(record) == AGENTWORLDBENCH_FIELDS and record["task"] == domain
            assert "## Tools\n" in record["system_str"] and tool in record["system_str"]
    texts = [p.read_text() for p in corpus.rglob("*") if p.suffix in (".jsonl", ".json", ".md")]
    assert not any(TOOL_SECRET in text for text in texts)
    assert any("<REDACTED:github_token:1>" in text for text in texts)


def test_tool_prompts_render_on_the_fast_path_exactly_as_the_template() -> None:
    """Tools in the system prompt, JSON results and diffs in the turns: the memoised stand-in renderer
    (schemas.chat_tokens) still serves them, and gives the chat template's own text."""
    tok = ChatTokenizer()
    for t in (_mcp(1), _swe(1)):
        for k, step in enumerate(t.steps, start=1):
            full = [*chat_messages(t, k), {"role": "assistant", "content": target_text(step.observation)}]
            marked = [{**m, "content": tok._mark(m["content"])} for m in full]
            fast = tok._fast.render(full, False, tok._mark, tok._slow_render)
            assert fast is not None and fast == tok._slow_render(marked, False), (t.domain, k)
