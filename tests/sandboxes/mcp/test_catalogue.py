"""Catalogue files (JSON and TOML), their errors, tool_call parsing and the install CLI's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.domains import domain_spec
from sandboxes.mcp import (
    TOOL_CALL,
    CatalogueError,
    ServerEntry,
    embedded_catalogue,
    entry_from_dict,
    entry_to_dict,
    load_catalogue,
    parse_action,
)
from sandboxes.mcp.__main__ import main as cli

TOML = """
[servers.clock]
command = ["mcp-server-time", "--local-timezone", "UTC"]
package = "pypi:mcp-server-time==2026.10.19"
call_timeout_s = 5

[servers.remote]
transport = "http"
url = "http://127.0.0.1:{port}/mcp"
command = ["python", "app.py", "{port}"]
network = true
"""


def test_toml_and_json_catalogues_give_the_same_entries(tmp_path: Path) -> None:
    toml_file = tmp_path / "servers.toml"
    toml_file.write_text(TOML)
    from_toml = load_catalogue(toml_file)
    json_file = tmp_path / "servers.json"
    json_file.write_text(json.dumps({"servers": {n: entry_to_dict(e) for n, e in from_toml.items()}}))
    assert load_catalogue(json_file) == from_toml
    clock = from_toml["clock"]
    assert clock.command == ["mcp-server-time", "--local-timezone", "UTC"]
    assert (clock.call_timeout_s, clock.transport, clock.network, clock.state) == (5, "stdio", False, "none")
    assert from_toml["remote"].transport == "http" and from_toml["remote"].network is True


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"servers": {"a": {"command": "mcp-server-time"}}}', "servers.a.command: expected list"),
        ('{"servers": {"a": {"command": ["x"], "timeout": 3}}}', "servers.a.timeout: unknown field"),
        ('{"servers": {"a": {"command": ["x"], "network": "yes"}}}', "servers.a.network: expected bool"),
        ('{"servers": {"a": {"command": ["x"], "transport": "sse"}}}', "transport must be one of"),
        ('{"servers": {"a": {"transport": "http"}}}', "url: an http server needs"),
        ('{"servers": {"a": {"command": ["x"], "env": {"K": 1}}}}', "servers.a.env: every value"),
        (
            '{"servers": {"a": {"command": ["x"], "ro_paths": ["data"]}}}',
            "ro_paths: every path must be absolute",
        ),
        ('{"servers": {"a": {"command": ["x"], "ro_paths": [1]}}}', "servers.a.ro_paths: every item"),
        ('{"servers": {}}', "servers: expected a non-empty table"),
        ("{not json", "not valid JSON"),
    ],
)
def test_catalogue_errors_name_the_file_and_the_field(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(body)
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_a_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[servers.a\ncommand = 1\n")
    with pytest.raises(CatalogueError, match=r"bad\.toml: not valid TOML"):
        load_catalogue(path)


def test_embedded_catalogue_pins_exact_versions_and_round_trips() -> None:
    catalogue = embedded_catalogue()
    assert list(catalogue) == ["time", "git", "fetch", "filesystem", "memory"]
    for name, entry in catalogue.items():
        assert "==" in entry.package or entry.package.rsplit("@", 1)[1][:1].isdigit(), entry.package
        assert entry_from_dict(name, entry_to_dict(entry)) == entry
    # Only the fetch server reaches a network, and only it may fetch private addresses.
    assert [e.name for e in catalogue.values() if e.network] == ["fetch"]
    assert "--allow-private-ips" in catalogue["fetch"].command


def test_parse_action_rejects_only_malformed_calls() -> None:
    action = parse_action(TOOL_CALL, {"name": "get_current_time", "arguments": {"timezone": "Europe/Zürich"}})
    assert action.text == '{"name": "get_current_time", "arguments": {"timezone": "Europe/Zürich"}}'
    # An unknown tool or schema-breaking arguments are the server's business, not a parse error.
    assert parse_action(TOOL_CALL, {"name": "no_such_tool", "arguments": {"x": [1]}}).kind == TOOL_CALL
    assert parse_action(TOOL_CALL, {"name": "t"}).arguments == {"name": "t", "arguments": {}}
    for bad in ({}, {"name": ""}, {"name": 3}, {"name": "t", "arguments": [1]}, {"name": "t", "extra": 1}):
        with pytest.raises(InvalidActionError):
            parse_action(TOOL_CALL, bad)
    with pytest.raises(InvalidActionError, match="only kind"):
        parse_action("bash", {"name": "t"})
    assert domain_spec("mcp").parse_action is parse_action


def test_entry_validation_in_code() -> None:
    with pytest.raises(CatalogueError, match="stdio server needs a command"):
        ServerEntry(name="x")
    with pytest.raises(CatalogueError, match="state must be one of"):
        ServerEntry(name="x", command=["y"], state="snapshot")  # type: ignore[arg-type]


def test_install_cli_help_and_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as shown:
        cli(["install", "--help"])
    out = capsys.readouterr().out
    assert shown.value.code == 0 and "examples:" in out and "AGENTWORLD_CACHE_DIR" in out
    assert cli(["install", "nope"]) == 2
    assert "not in the catalogue: nope" in capsys.readouterr().err
