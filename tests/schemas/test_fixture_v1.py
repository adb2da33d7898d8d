"""Files written by schema_version 1 must stay readable and valid as the schema grows.

trajectories_v1.parquet was written once by the version 1 code; the script that wrote it could only
write the current version, so it is kept in history only (`git show
2979867:tests/schemas/fixtures/make_v1_fixture.py`)."""

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

from schemas.storage import read_trajectories

FIXTURE = Path(__file__).parent / "fixtures" / "trajectories_v1.parquet"


def test_v1_fixture_reads_and_validates():
    trajectories = {t.trajectory_id: t for t in read_trajectories(str(FIXTURE), validate=True)}
    assert sorted(trajectories) == ["v1-mcp-0001", "v1-terminal-0001", "v1-web-0001"]

    terminal = trajectories["v1-terminal-0001"]
    assert terminal.schema_version == 1
    assert terminal.task.setup == ["mkdir /data"] and terminal.task.metadata == {"split": "train"}
    assert terminal.steps[0].observation.data == {"exit_status": 0}
    assert terminal.steps[0].started_at == datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
    assert terminal.steps[0].reward is None

    web = trajectories["v1-web-0001"]
    assert web.task.instruction == "Open the About page — «über»"
    assert web.initial_observation.attachments[0].uri.startswith("attachments/sha256/5f/")
    assert web.steps[0].reward == 1.0

    mcp = trajectories["v1-mcp-0001"]
    assert mcp.steps == [] and mcp.outcome.error_kind == "SandboxCrashedError"


def test_v1_fixture_is_still_the_version_1_file():
    metadata = pq.read_schema(FIXTURE).metadata
    assert metadata[b"schema_version"] == b"1"  # guards against regenerating it with a newer schema
