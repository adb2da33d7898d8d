"""Chaining: values found in real results become the arguments of later calls.

fixtures/results.json holds real answers of the embedded servers, written by the sandbox's own
observation writer (sandboxes.mcp.actions.result_observation), with the scratch directory renamed
/workdir; see fixtures/README.md.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from collectors.mcp.schema_values import Synthesizer
from collectors.mcp.values import ValuePool

FIXTURES = Path(__file__).parent / "fixtures"
RESULTS: list[dict[str, Any]] = json.loads((FIXTURES / "results.json").read_text())


def result(tool: str, **arguments: Any) -> dict[str, Any]:
    return next(
        r
        for r in RESULTS
        if r["tool"] == tool and all(r["arguments"].get(k) == v for k, v in arguments.items())
    )


def harvest(*rows: dict[str, Any]) -> ValuePool:
    pool = ValuePool()
    for row in rows:
        pool.add_result(row["text"], row["data"]["structured_content"], row["arguments"])
    return pool


def schema(server: str, tool: str) -> dict[str, Any]:
    tools = json.loads((FIXTURES / f"{server}.json").read_text())["tools"]
    return next(t["input_schema"] for t in tools if t["name"] == tool)


def chosen(pool: ValuePool, server: str, tool: str, key: str, seeds: int = 30) -> list[Any]:
    return [
        Synthesizer(random.Random(s), pool.suggest).valid(schema(server, tool))[key] for s in range(seeds)
    ]


def test_a_listed_file_is_read_next() -> None:
    pool = harvest(result("list_directory"))
    assert pool.get("path") == ["/workdir/fs/notes/todo.txt"]
    paths = chosen(pool, "filesystem", "read_text_file", "path")
    assert paths.count("/workdir/fs/notes/todo.txt") > len(paths) // 2


def test_allowed_directories_and_access_errors_give_directories() -> None:
    pool = harvest(result("list_allowed_directories"), result("read_text_file", path="/etc/passwd"))
    assert pool.get("directory") == ["/workdir/fs"]
    assert "/etc/passwd" not in pool.get("path"), "the path the call named is no new finding"
    created = chosen(pool, "filesystem", "write_file", "path", seeds=60)
    assert any(p.startswith("/workdir/fs/") and p != "/workdir/fs" for p in created), created


def test_file_lines_feed_an_edit_and_a_commit_hash_feeds_git_show() -> None:
    pool = harvest(result("read_text_file", path="/workdir/fs/notes/todo.txt"), result("git_log"))
    assert {"buy milk", "write the report"} <= set(pool.get("line"))
    old_texts = [e["oldText"] for edits in chosen(pool, "filesystem", "edit_file", "edits") for e in edits]
    assert {"buy milk", "write the report"} & set(old_texts)
    hashes = [h for h in pool.get("revision") if len(h) == 40]
    assert len(hashes) == 2, pool.get("revision")
    revisions = chosen(pool, "git", "git_show", "revision")
    assert sum(r in hashes for r in revisions) > len(revisions) // 2


def test_a_branch_listing_feeds_checkout() -> None:
    pool = harvest(result("git_branch"))
    assert pool.get("branch") == ["main"]
    assert chosen(pool, "git", "git_checkout", "branch_name").count("main") > 15


def test_entity_names_from_a_created_graph_are_opened_later() -> None:
    pool = harvest(result("read_graph"))
    assert pool.get("name") == ["Dana"] and "person" in pool.get("kind")
    names = [n for listed in chosen(pool, "memory", "open_nodes", "names") for n in listed]
    assert names.count("Dana") > len(names) // 2
    sent = ValuePool()
    sent.add_arguments(result("create_entities")["arguments"])
    assert sent.get("name") == ["Dana"]


def test_timezones_come_back_from_time_results() -> None:
    pool = harvest(result("convert_time"))
    assert pool.get("timezone") == ["Europe/London", "America/Chicago"]
    zones = chosen(pool, "time", "get_current_time", "timezone")
    assert sum(z in ("Europe/London", "America/Chicago") for z in zones) > len(zones) // 2
