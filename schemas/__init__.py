"""The trajectory data contract: typed records, their Arrow schema, validation and storage."""

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.attachments import AttachmentStore, StorageError
from schemas.codec import from_row, to_row
from schemas.records import (
    DOMAINS,
    OUTCOMES,
    SCHEMA_VERSION,
    Action,
    Attachment,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Source,
    Step,
    Task,
    ToolDefinition,
    Trajectory,
    Verification,
)
from schemas.storage import TrajectoryWriter, cleanup_temporaries, finished_ids, read_trajectories
from schemas.validation import ValidationError, validate, validate_row

__all__ = [
    "DOMAINS",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "TRAJECTORY_SCHEMA",
    "Action",
    "Attachment",
    "AttachmentStore",
    "Environment",
    "Observation",
    "Outcome",
    "Policy",
    "Provenance",
    "Source",
    "Step",
    "StorageError",
    "Task",
    "ToolDefinition",
    "Trajectory",
    "Verification",
    "TrajectoryWriter",
    "ValidationError",
    "cleanup_temporaries",
    "finished_ids",
    "from_row",
    "read_trajectories",
    "to_row",
    "validate",
    "validate_row",
]
