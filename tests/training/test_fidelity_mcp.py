"""`python -m training.fidelity` on MCP: a trajectory recorded here with the real `mcp-server-time`
server in the MCP sandbox, replayed on fresh servers for the noise floor (the clock moves between
runs), scored as JSON structure, with a world model served over real HTTP."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sandboxes.mcp import McpConfig, McpSandbox, parse_action
from schemas.records import Task
from tests.training.test_fidelity_domains import record, replay_ceiling, run_fidelity


def _call(name: str, **arguments: object):
    return parse_action("tool_call", {"name": name, "arguments": arguments})


@pytest.mark.bwrap
def test_mcp_noise_floor_from_fresh_servers_and_json_metrics(tmp_path: Path) -> None:
    plan = [
        _call("get_current_time", timezone="Europe/Berlin"),
        _call("convert_time", source_timezone="Europe/Berlin", time="16:30", target_timezone="Asia/Tokyo"),
        _call("get_weather", city="Berlin"),
    ]
    with McpSandbox(McpConfig()) as sandbox:
        trajectory = record(sandbox, Task(id="time-0", metadata={"server": "time"}), plan)
    # The server's clock has one-second resolution. Each replay is scored with the other as the only
    # witness of what varies, so a replay in the recording's second would hide the clock's volatility.
    time.sleep(1.1)
    assert [t.name for t in trajectory.environment.tools] == ["get_current_time", "convert_time"]
    assert trajectory.steps[2].observation.data["is_error"] is True
    report = run_fidelity(trajectory, tmp_path, replays=2)
    ceiling = replay_ceiling(report, "mcp", finished=2)
    # Fresh servers answer with the same structure and values, the current time aside: the replays
    # ran after the recording's second, so its datetime is volatile and only held to its form.
    assert ceiling["json_valid"] == ceiling["json_key_f1"] == ceiling["result_kind_match"] == 1.0
    assert ceiling["json_value_match"] == 1.0 and ceiling["json_volatile_form"] == 1.0
    assert ceiling["format_valid"] == 1.0 and ceiling["exact"] < 1.0
    model = report["systems"]["model/teacher_forced"]["by_domain"]["mcp"]
    # Repeating the previous observation: the first turn repeats the connection line (no JSON), the
    # last a result where the server answered a protocol error.
    assert model["json_valid"] < 1.0 and model["result_kind_match"] < 1.0 and model["json_key_f1"] < 1.0
    assert (
        "| json_valid | json_key_f1 | json_value_match | json_volatile_form | result_kind_match |"
        in (tmp_path / "report" / "report.md").read_text()
    )
