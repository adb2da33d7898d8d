"""Validation of whole Arrow tables of trajectory rows, for writers that never build records.

`schemas.validation` checks one `Trajectory` at a time, which costs far more than converting a row
when an importer turns a public dataset's Parquet batches into our rows with Arrow compute. This module
checks the same rules on a table at once: the Arrow types (by casting to `TRAJECTORY_SCHEMA`), no null
where the schema has none, and the semantic rules of `validation._semantic_problems` that a columnar
producer could break (ids, domains, outcomes, step indices, latencies, rewards, JSON maps).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.records import DOMAINS, OUTCOMES, SCHEMA_VERSION

Flag = Callable[[np.ndarray, str], None]


def table_problems(table: pa.Table) -> tuple[pa.Table, dict[int, str]]:
    """(the table cast to `TRAJECTORY_SCHEMA`, {row index: its first problem}) for a table of rows."""
    try:
        # A table built with the schema may still hold nulls where it has none (Arrow does not check
        # on construction); casting it again would fail as a whole, so only other tables are cast.
        if not table.schema.equals(TRAJECTORY_SCHEMA):
            table = table.cast(TRAJECTORY_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise ValueError(f"rows do not have the trajectory schema: {exc}") from exc
    problems: dict[int, str] = {}

    def flag(mask: np.ndarray, message: str) -> None:
        for row in np.flatnonzero(mask):
            problems.setdefault(int(row), message)

    rows = np.arange(table.num_rows)
    for field in TRAJECTORY_SCHEMA:
        column = table.column(field.name).combine_chunks()
        _null_problems(column, field, field.name, rows, np.ones(len(column), bool), flag)
    ids = pc.utf8_trim_whitespace(table["trajectory_id"])
    flag(_numpy(pc.equal(pc.utf8_length(ids), 0)), "trajectory_id is empty")
    flag(_not_in(table["domain"], DOMAINS), f"domain is not one of {', '.join(DOMAINS)}")
    flag(_not_in(table["schema_version"], range(1, SCHEMA_VERSION + 1)), "schema_version is unknown")
    outcome = table["outcome"].combine_chunks()
    flag(_not_in(outcome.field("status"), OUTCOMES), f"outcome.status is not one of {', '.join(OUTCOMES)}")
    _reward_problems(outcome, flag)
    steps = table["steps"].combine_chunks()
    _step_problems(steps, flag)
    _attachment_problems(table["initial_observation"].combine_chunks(), rows, flag)
    _attachment_problems(steps.flatten().field("observation"), pc.list_parent_indices(steps).to_numpy(), flag)
    return table, problems


def _numpy(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _not_in(values: pa.Array | pa.ChunkedArray, allowed) -> np.ndarray:
    return ~_numpy(pc.is_in(values, pa.array(list(allowed))))


def _null_problems(
    array: pa.Array, field: pa.Field, path: str, rows: np.ndarray, live: np.ndarray, flag: Flag
) -> None:
    """Flag rows with a null where the schema has none, at any depth; `rows` maps each element of
    `array` to its table row, `live` says which elements exist (a null struct's children do not)."""
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if not field.nullable and array.null_count:
        flag(_rows_with(rows, live & ~valid), f"{path} is null")
    live = live & valid
    if pa.types.is_struct(field.type):
        for child in field.type:
            _null_problems(array.field(child.name), child, f"{path}.{child.name}", rows, live, flag)
    elif pa.types.is_list(field.type):
        parents = pc.list_parent_indices(array).to_numpy()
        values = array.flatten()
        _null_problems(values, field.type.value_field, f"{path}[]", rows[parents], live[parents], flag)


def _rows_with(rows: np.ndarray, element_mask: np.ndarray) -> np.ndarray:
    mask = np.zeros(int(rows.max()) + 1 if len(rows) else 0, dtype=bool)
    mask[rows[element_mask]] = True
    return mask


def _reward_problems(outcome: pa.StructArray, flag: Flag) -> None:
    reward = outcome.field("reward")
    flag(_numpy(pc.or_(pc.less(reward, 0.0), pc.greater(reward, 1.0))), "outcome.reward is not in [0, 1]")
    verification = outcome.field("verification")
    verified = verification.field("reward")
    both_null = pc.and_(pc.is_null(reward), pc.is_null(verified))
    agree = _numpy(pc.or_(both_null, pc.fill_null(pc.equal(reward, verified), False)))
    has = _numpy(pc.is_valid(verification))
    flag(has & ~agree, "outcome.reward differs from outcome.verification.reward")


def _attachment_problems(observations: pa.StructArray, rows: np.ndarray, flag: Flag) -> None:
    """A columnar writer stores no blobs: every attachment must already have its sha256 and uri."""
    attachments = observations.field("attachments")
    if not len(attachments.flatten()):
        return
    owners = rows[pc.list_parent_indices(attachments).to_numpy()]
    values = attachments.flatten()
    unstored = pc.or_(
        pc.invert(pc.match_substring_regex(values.field("sha256"), "^[0-9a-f]{64}$")),
        pc.equal(pc.utf8_length(values.field("uri")), 0),
    )
    flag(_rows_with(owners, _numpy(unstored)), "an attachment is not stored (no sha256 or uri)")


def _step_problems(steps: pa.ListArray, flag: Flag) -> None:
    flat = steps.flatten()
    if not len(flat):
        return
    parents = pc.list_parent_indices(steps).to_numpy()
    offsets = steps.offsets.to_numpy()
    position = np.arange(len(flat)) - (offsets[parents] - offsets[0])
    flag(_rows_with(parents, flat.field("index").to_numpy() != position), "steps must be indexed 0..n-1")
    flag(_rows_with(parents, _numpy(pc.less(flat.field("latency_s"), 0.0))), "a step's latency_s is negative")
    maps = {
        "steps[].info": flat.field("info"),
        "steps[].action.arguments": flat.field("action").field("arguments"),
        "steps[].observation.data": flat.field("observation").field("data"),
    }
    for path, values in maps.items():
        flag(_rows_with(parents, ~_numpy(pc.starts_with(values, "{"))), f"{path} is not a JSON object")
