"""Arrow schemas of the Hub configs and the streaming conversions into them: token shards gain a
`domain` column; JSON-lines records become typed rows, with their free-form parts (whose shape differs
per domain, so no one Parquet type fits them) kept as JSON text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import pyarrow as pa

from beam_pipelines.stages.pack import ROW_SCHEMA

TOKEN_SCHEMA = ROW_SCHEMA.append(pa.field("domain", pa.string()))
MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
JSON_TEXT = "json"  # marks a column stored as JSON text
EXTRA = "extra"  # keys no column names, as one JSON object (null when none)

# (name, Arrow type, how): `how` is JSON_TEXT for free-form values, "" for typed ones.
RL_COLUMNS = (
    ("id", pa.string(), ""),
    ("trajectory_id", pa.string(), ""),
    ("task_id", pa.string(), ""),
    ("domain", pa.string(), ""),
    ("split", pa.string(), ""),
    ("turn_idx", pa.int64(), ""),
    ("total_turns", pa.int64(), ""),
    ("messages", MESSAGES, ""),
    ("reference", pa.string(), ""),
    ("reference_format", pa.string(), ""),
    ("reference_data", pa.string(), JSON_TEXT),
    ("action", pa.string(), JSON_TEXT),
    ("echo", pa.bool_(), ""),
    ("task_reward", pa.float64(), ""),
    ("task_verifier", pa.string(), ""),
)
# the public AgentWorldBench fields (schemas.render.AGENTWORLDBENCH_FIELDS)
AGENTWORLDBENCH_COLUMNS = (
    ("task", pa.string(), ""),
    ("id", pa.string(), ""),
    ("prompt", pa.list_(pa.string()), ""),
    ("response", pa.list_(pa.string()), ""),
    ("current_prompt", pa.string(), ""),
    ("system_str", pa.string(), ""),
    ("turn_idx", pa.int64(), ""),
    ("total_turns", pa.int64(), ""),
)
LINES_PER_BATCH = 1024


def records_schema(columns: tuple) -> pa.Schema:
    return pa.schema([pa.field(name, kind) for name, kind, _ in columns] + [pa.field(EXTRA, pa.string())])


def records_table(records: list[dict[str, Any]], columns: tuple) -> pa.Table:
    """Records as rows of `records_schema(columns)`; a missing key is null."""
    named = {name for name, _, _ in columns}
    arrays = []
    for name, kind, how in columns:
        values = [r.get(name) for r in records]
        if how == JSON_TEXT:
            values = [
                None if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True) for v in values
            ]
        arrays.append(pa.array(values, kind))
    extra = [{k: v for k, v in r.items() if k not in named} for r in records]
    arrays.append(pa.array([json.dumps(e, ensure_ascii=False, sort_keys=True) if e else None for e in extra]))
    return pa.Table.from_arrays(arrays, schema=records_schema(columns))


def line_batches(f: IO[bytes], size: int = LINES_PER_BATCH) -> Iterator[list[dict[str, Any]]]:
    """A JSON-lines file as batches of records (memory holds one batch)."""
    batch: list[dict[str, Any]] = []
    for line in f:
        if line.strip():
            batch.append(json.loads(line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def with_domain(table: pa.Table, domain: str) -> pa.Table:
    """A token-shard row group with the domain every row of the shard belongs to."""
    return table.append_column("domain", pa.repeat(pa.scalar(domain, pa.string()), table.num_rows))


def features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The `dataset_info.features` YAML of the dataset card, as `datasets` writes it for this schema
    (`Features._to_yaml_list`, datasets 4/5: `dtype:` for a value, `list:` for a list, a list of named
    fields for a struct)."""
    return [{"name": f.name, **_feature(f.type)} for f in schema]


def _feature(kind: pa.DataType) -> dict[str, Any]:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = _feature(kind.value_type)
        return {"list": inner["dtype"] if "dtype" in inner else inner["struct"]}
    if pa.types.is_struct(kind):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in kind]}
    return {"dtype": _DTYPES[str(kind)]}


_DTYPES = {
    "string": "string",
    "large_string": "large_string",
    "bool": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "float": "float32",
    "double": "float64",
}
