"""Argument synthesis on the tool schemas recorded from the real embedded servers (fixtures/*.json,
see fixtures/README.md), and on schemas that use the JSON Schema features those servers do not."""

from __future__ import annotations

import datetime
import ipaddress
import json
import random
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from collectors.mcp.schema_values import Synthesizer, allowed_types, invalid
from collectors.mcp.values import TIMEZONES, ValuePool, role_of

FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = ("time", "git", "fetch", "filesystem", "memory")
SEEDS = range(25)


def recorded_tools(server: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / f"{server}.json").read_text())["tools"]


ALL_TOOLS = [(server, tool) for server in SERVERS for tool in recorded_tools(server)]


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def synthesizer(seed: int, pool: ValuePool | None = None) -> Synthesizer:
    return Synthesizer(rng=random.Random(seed), suggest=(pool or ValuePool()).suggest)


def test_fixtures_hold_every_embedded_servers_tools() -> None:
    counts = {server: len(recorded_tools(server)) for server in SERVERS}
    assert counts == {"time": 2, "git": 12, "fetch": 1, "filesystem": 14, "memory": 9}


@pytest.mark.parametrize(("server", "tool"), ALL_TOOLS, ids=[f"{s}.{t['name']}" for s, t in ALL_TOOLS])
def test_valid_arguments_validate_and_invalid_ones_do_not(server: str, tool: dict[str, Any]) -> None:
    schema = tool["input_schema"]
    check = validator(schema)
    broken_count = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        arguments = Synthesizer(rng=rng, suggest=ValuePool().suggest).valid(schema)
        assert isinstance(arguments, dict)
        errors = [e.message for e in check.iter_errors(arguments)]
        assert not errors, (arguments, errors)
        assert set(schema.get("required", [])) <= set(arguments)
        broken = invalid(schema, arguments, rng)
        if broken is not None:
            broken_count += 1
            assert not check.is_valid(broken[0]), broken
    # Only tools without properties (list_allowed_directories, read_graph) have nothing to break.
    assert broken_count == (0 if not schema.get("properties") else len(SEEDS))


def test_optional_properties_are_sometimes_given_and_sometimes_left_out() -> None:
    schema = next(t for t in recorded_tools("git") if t["name"] == "git_log")["input_schema"]
    given = [synthesizer(seed).valid(schema) for seed in SEEDS]
    assert all("repo_path" in g for g in given)
    assert 0 < sum("max_count" in g for g in given) < len(SEEDS)


def test_enum_and_bounds_of_recorded_schemas_are_respected() -> None:
    sort_schema = next(t for t in recorded_tools("filesystem") if t["name"] == "list_directory_with_sizes")
    fetch_schema = recorded_tools("fetch")[0]["input_schema"]
    sorts = {synthesizer(s).valid(sort_schema["input_schema"]).get("sortBy") for s in range(60)}
    assert sorts == {None, "name", "size"}
    lengths = [synthesizer(s).valid(fetch_schema).get("max_length") for s in range(60)]
    assert all(1 <= n <= 999999 for n in lengths if n is not None) and any(n is not None for n in lengths)


FEATURES = {
    "type": "object",
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
    "properties": {
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "token": {"type": "string", "format": "uuid"},
        "address": {"type": "string", "format": "ipv4"},
        "code": {"type": "string", "pattern": "^[a-z]+$", "minLength": 3, "maxLength": 8},
        "level": {"type": "integer", "minimum": 2, "exclusiveMaximum": 5},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "step": {"type": "integer", "multipleOf": 5, "minimum": 1, "maximum": 40},
        "mode": {"const": "fast"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "minItems": 2},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "maxItems": 2},
        "where": {"$ref": "#/$defs/point"},
        "either": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 10}]},
        "both": {
            "allOf": [{"properties": {"a": {"type": "boolean"}}, "required": ["a"]}, {"type": "object"}]
        },
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["when", "day", "email", "site", "token", "address", "code", "level", "ratio", "step"]
    + ["mode", "tags", "pair", "where", "either", "both", "maybe"],
    "additionalProperties": False,
}


def test_formats_bounds_refs_and_combinators() -> None:
    check = validator(FEATURES)
    for seed in range(40):
        value = synthesizer(seed).valid(FEATURES)
        assert not [e.message for e in check.iter_errors(value)], value
        datetime.datetime.fromisoformat(value["when"])
        datetime.date.fromisoformat(value["day"])
        assert "@" in value["email"] and urllib.parse.urlsplit(value["site"]).scheme == "https"
        assert uuid.UUID(value["token"]).version == 4
        ipaddress.IPv4Address(value["address"])
        assert value["level"] in (2, 3, 4) and 0 < value["ratio"] <= 1 and value["step"] % 5 == 0
        assert len(set(value["tags"])) == len(value["tags"]) >= 2


def test_invalid_breaks_each_kind_of_rule() -> None:
    check = validator(FEATURES)
    reasons = set()
    for seed in range(60):
        rng = random.Random(seed)
        valid = Synthesizer(rng=rng, suggest=ValuePool().suggest).valid(FEATURES)
        arguments, reason = invalid(FEATURES, valid, rng)  # type: ignore[misc]
        assert not check.is_valid(arguments), (reason, arguments)
        reasons.add(reason.split()[0] if reason.startswith(("missing", "unknown")) else reason.split()[1])
    assert {"missing", "unknown", "given", "out"} <= reasons


def test_allowed_types_follow_refs_unions_and_enums() -> None:
    assert allowed_types(FEATURES["properties"]["either"], FEATURES) == {"string", "integer"}
    assert allowed_types(FEATURES["properties"]["where"], FEATURES) == {"object"}
    assert allowed_types({"enum": [1, "a"]}, {}) == {"integer", "string"}
    assert allowed_types({"type": "number"}, {}) == {"number", "integer"}
    assert allowed_types({}, {}) == set()


def test_property_roles_come_from_name_words_and_descriptions() -> None:
    time_tools = {t["name"]: t["input_schema"]["properties"] for t in recorded_tools("time")}
    assert role_of("source_timezone", time_tools["convert_time"]["source_timezone"]) == "timezone"
    assert role_of("time", time_tools["convert_time"]["time"]) == "clock"
    assert [role_of(n, {}) for n in ("repo_path", "entityName", "oldText", "revision", "branch_name")] == [
        "repository",
        "name",
        "line",
        "revision",
        "branch",
    ]


def test_values_seen_are_preferred_for_their_role() -> None:
    pool = ValuePool()
    pool.add("path", "/workdir/notes/todo.txt")
    schema = next(t for t in recorded_tools("filesystem") if t["name"] == "read_text_file")["input_schema"]
    paths = [synthesizer(seed, pool).valid(schema)["path"] for seed in SEEDS]
    assert paths.count("/workdir/notes/todo.txt") > len(SEEDS) // 2
    zone_schema = recorded_tools("time")[0]["input_schema"]
    zones = [synthesizer(seed).valid(zone_schema)["timezone"] for seed in SEEDS]
    assert sum(z in TIMEZONES for z in zones) >= len(SEEDS) * 0.7


def test_same_seed_same_arguments() -> None:
    for _, tool in ALL_TOOLS:
        schema = tool["input_schema"]
        assert synthesizer(7).valid(schema) == synthesizer(7).valid(schema)
    assert [synthesizer(s).valid(FEATURES) for s in range(5)] == [
        synthesizer(s).valid(FEATURES) for s in range(5)
    ]
