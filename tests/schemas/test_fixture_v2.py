"""Schema version 2 added tool definitions; its files and the version 1 files both still read.

trajectories_v2.parquet was written once by the version 2 code (`git show
2979867:tests/schemas/fixtures/make_v2_fixture.py`); it must not be regenerated."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas.records import ToolDefinition
from schemas.storage import read_trajectories
from schemas.validation import ValidationError, validate

FIXTURES = Path(__file__).parent / "fixtures"


def test_v2_fixture_reads_its_tool_definitions():
    (mcp,) = read_trajectories(str(FIXTURES / "trajectories_v2.parquet"), validate=True)
    assert mcp.schema_version == 2
    names = [tool.name for tool in mcp.environment.tools]
    assert names == ["get_current_time", "convert_time"]
    get_time = mcp.environment.tools[0]
    assert get_time.input_schema["required"] == ["timezone"]
    assert get_time.output_schema == {"type": "object", "properties": {"datetime": {"type": "string"}}}
    assert mcp.environment.tools[1].output_schema is None
    assert pq.read_schema(FIXTURES / "trajectories_v2.parquet").metadata[b"schema_version"] == b"2"


def test_v1_files_read_with_no_tools():
    for t in read_trajectories(str(FIXTURES / "trajectories_v1.parquet"), validate=True):
        assert t.schema_version == 1 and t.environment.tools == []


def test_duplicate_or_empty_tool_names_are_invalid():
    (mcp,) = read_trajectories(str(FIXTURES / "trajectories_v2.parquet"))
    mcp.environment.tools.append(ToolDefinition(name="get_current_time"))
    with pytest.raises(ValidationError, match=r"tools\[2\]\.name: .get_current_time. is listed twice"):
        validate(mcp)
    mcp.environment.tools[2] = ToolDefinition(name=" ")
    with pytest.raises(ValidationError, match=r"environment\.tools\[2\]\.name: must not be empty"):
        validate(mcp)
