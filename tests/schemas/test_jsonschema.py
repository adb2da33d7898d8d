import json

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.__main__ import main
from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.codec import from_row, to_row
from schemas.jsonschema import to_json, trajectory_json_schema
from schemas.records import SCHEMA_VERSION, Verification
from schemas.storage import TrajectoryWriter
from tests.schemas.factories import rich_trajectory, small_trajectory


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = trajectory_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_a_real_trajectory_validates(validator):
    document = to_json(rich_trajectory())
    json.dumps(document)  # plain JSON, nothing left that needs a custom encoder
    validator.validate(document)
    assert document["steps"][0]["info"] == {"exit_status": 0}  # maps are objects, not text


def test_json_form_round_trips():
    t = rich_trajectory()
    for attachment in t.initial_observation.attachments:
        attachment.content = None
    assert from_row(json.loads(json.dumps(to_json(t)))) == t


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda d: d.update(domain="cooking"),
        lambda d: d["outcome"].update(status="finished"),
        lambda d: d.update(schema_version=SCHEMA_VERSION + 1),
        lambda d: d["steps"][0].update(info="{}"),
        lambda d: d["steps"][0].update(unexpected=1),
        lambda d: d["task"].pop("id"),
        lambda d: d["steps"][0].update(reward="high"),
    ],
)
def test_invalid_documents_are_rejected(validator, corrupt):
    document = to_json(small_trajectory("t1"))
    corrupt(document)
    assert not validator.is_valid(document)


def test_optional_fields_may_be_absent_for_older_documents(validator):
    document = to_json(small_trajectory("t1"))
    del document["schema_version"], document["steps"][0]["reward"], document["task"]["metadata"]
    validator.validate(document)


def test_cli_exports_the_schema(tmp_path, capsys):
    out = tmp_path / "trajectory.schema.json"
    assert main(["export-jsonschema", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == trajectory_json_schema()
    assert main(["export-jsonschema"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["title"] == "Trajectory"


def test_cli_validate_and_stats(tmp_path, capsys):
    rewarded = small_trajectory("a")
    rewarded.outcome.reward = 0.5
    rewarded.outcome.verification = Verification(verifier="command", reward=0.5)
    broken_verifier = small_trajectory("d", domain="web")
    broken_verifier.outcome.verification = Verification(verifier="site_state", error="site is down")
    with TrajectoryWriter(str(tmp_path / "good")) as writer:
        writer.write(rewarded)
        writer.write(small_trajectory("b", status="error"))
        writer.write(small_trajectory("c", domain="web"))
        writer.write(broken_verifier)
    assert main(["validate", str(tmp_path / "good")]) == 0
    assert "2 files (0 unreadable), 4 trajectories: 4 valid, 0 invalid" in capsys.readouterr().out

    assert main(["stats", str(tmp_path / "good")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # domain, trajectories, steps, verified, mean reward, unverified, verifier errors, outcomes
    assert lines[1].split() == ["terminal", "2", "2", "1", "0.500", "1", "0", "completed=1,", "error=1"]
    assert lines[2].split() == ["web", "2", "2", "0", "-", "1", "1", "completed=2"]
    assert lines[3].split() == ["total", "4", "4", "1", "0.500", "2", "1"]

    invalid = small_trajectory("bad-domain")
    invalid.domain = "cooking"
    table = pa.Table.from_pylist([to_row(invalid)], schema=TRAJECTORY_SCHEMA)
    pq.write_table(table, tmp_path / "invalid.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    assert main(["validate", str(tmp_path / "*.parquet")]) == 1
    out = capsys.readouterr().out
    assert "2 files (1 unreadable), 1 trajectories: 0 valid, 1 invalid" in out
    assert "broken.parquet" in out and "'bad-domain': domain: 'cooking'" in out

    assert main(["stats", str(tmp_path / "missing")]) == 2
    assert "no dataset" in capsys.readouterr().err


def test_cli_help_shows_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "python -m schemas validate" in capsys.readouterr().out
