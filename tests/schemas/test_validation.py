import math
from datetime import datetime

import pytest

from schemas.codec import to_row
from schemas.records import SCHEMA_VERSION, Attachment
from schemas.validation import ValidationError, validate, validate_row
from tests.schemas.factories import rich_trajectory, small_trajectory

SHA = "ab" * 32


FAULTS = [
    ("schema_version", lambda t: setattr(t, "schema_version", SCHEMA_VERSION + 1)),
    ("schema_version", lambda t: setattr(t, "schema_version", "1")),
    ("trajectory_id", lambda t: setattr(t, "trajectory_id", "  ")),
    ("domain", lambda t: setattr(t, "domain", "cooking")),
    ("outcome.status", lambda t: setattr(t.outcome, "status", "finished")),
    ("steps[1].index", lambda t: setattr(t.steps[1], "index", 5)),
    ("steps[0].latency_s", lambda t: setattr(t.steps[0], "latency_s", -0.5)),
    ("steps[0].latency_s", lambda t: setattr(t.steps[0], "latency_s", math.inf)),
    ("steps[1].reward", lambda t: setattr(t.steps[1], "reward", math.nan)),
    ("steps[1].observation.text", lambda t: setattr(t.steps[1].observation, "text", b"bytes")),
    ("steps[0].done", lambda t: setattr(t.steps[0], "done", 1)),
    ("task.max_steps", lambda t: setattr(t.task, "max_steps", True)),
    ("task.setup[1]", lambda t: t.task.setup.__setitem__(1, 3)),
    ("steps[0].started_at", lambda t: setattr(t.steps[0], "started_at", datetime(2026, 1, 1))),
    ("provenance.finished_at", lambda t: setattr(t.provenance, "finished_at", "2026-01-01")),
    ("steps[0].info", lambda t: setattr(t.steps[0], "info", {"when": datetime(2026, 1, 1)})),
    ("steps[0].info", lambda t: setattr(t.steps[0], "info", {1: "int key"})),
    ("steps[0].info", lambda t: setattr(t.steps[0], "info", {"pair": (1, 2)})),
    ("policy.config", lambda t: setattr(t.policy, "config", ["not", "a", "dict"])),
    ("environment", lambda t: setattr(t, "environment", None)),
    (
        "initial_observation.attachments[0].sha256",
        lambda t: t.initial_observation.attachments.__setitem__(0, Attachment("a.png", "image/png", uri="x")),
    ),
    (
        "steps[1].observation.attachments[1].uri",
        lambda t: t.steps[1].observation.attachments.__setitem__(1, Attachment("a", "text/x", sha256=SHA)),
    ),
]


FAULT_IDS = [f"{field}-{i}" for i, (field, _) in enumerate(FAULTS)]


@pytest.mark.parametrize(("field", "fault"), FAULTS, ids=FAULT_IDS)
def test_faults_name_the_trajectory_and_field(field, fault):
    t = rich_trajectory("traj-bad")
    fault(t)
    with pytest.raises(ValidationError) as caught:
        validate(t)
    error = caught.value
    assert (error.trajectory_id, error.field) == (t.trajectory_id, field)
    assert repr(t.trajectory_id) in str(error) and field in str(error)
    assert error.message in str(error)


def test_valid_trajectories_pass():
    validate(rich_trajectory())  # attachments still carrying content are not stored yet: fine
    validate(small_trajectory("s1", domain="android", status="aborted"))


def test_validate_row_reports_decode_errors_as_validation_errors():
    row = to_row(small_trajectory("row-1"))
    row["steps"][0]["info"] = "{broken"
    with pytest.raises(ValidationError) as caught:
        validate_row(row)
    assert (caught.value.trajectory_id, caught.value.field) == ("row-1", "steps[0].info")


def test_validate_row_returns_the_trajectory_and_checks_it():
    row = to_row(small_trajectory("row-2"))
    assert validate_row(row).trajectory_id == "row-2"
    row["domain"] = "nowhere"
    with pytest.raises(ValidationError, match="domain"):
        validate_row(row)
