"""The MCP server catalogue: what to run for each named server, and how a reset restores it.

A catalogue file is JSON or TOML, `{"servers": {name: {...entry fields...}}}`. Every field but
`command` (stdio) or `url` (http) has a default. Parsing errors name the file and the field, so a
typo in a user's catalogue says where it is.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# Exact versions the embedded servers install (checked against PyPI and npm when pinned).
TIME_PACKAGE = "pypi:mcp-server-time==2026.10.19"
GIT_PACKAGE = "pypi:mcp-server-git==2026.10.19"
FETCH_PACKAGE = "pypi:mcp-server-fetch==2026.10.24"
FILESYSTEM_PACKAGE = "npm:@modelcontextprotocol/server-filesystem@2026.8.31"
MEMORY_PACKAGE = "npm:@modelcontextprotocol/server-memory@2026.8.31"

TRANSPORTS = ("stdio", "http")
STATES = ("none", "workdir", "file")
# Fixed identities for the commits the git server's repository gets, so its SHAs repeat per reset.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
}


class CatalogueError(ValueError):
    """A catalogue file or entry is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class ServerEntry:
    """How to run one MCP server.

    `command` is the argv; `{workdir}` (the server's private working directory), `{state}` (its
    private state directory), `{port}` (a free loopback port, http servers) and `{site}` (the URL
    of the sandbox's embedded local site) are filled in by the sandbox. A bare program name with a
    `package` resolves inside that package's install directory (python -m sandboxes.mcp install).
    `state` says how a reset restores the server: "none" (stateless: a live server is kept),
    "workdir" (a fresh private directory, seeded per `seed`) or "file" (fresh state files).
    """

    name: str
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    transport: Literal["stdio", "http"] = "stdio"
    url: str = ""
    network: bool = False
    startup_timeout_s: float = 30.0
    call_timeout_s: float = 30.0
    package: str = ""
    state: Literal["none", "workdir", "file"] = "none"
    # What the sandbox puts in the workdir at each reset: "" (empty), "files" (a few text files),
    # "git" (a small repository with three commits).
    seed: str = ""
    # Serve the sandbox's embedded local site on loopback and fill `{site}` with its URL.
    site: bool = False
    # Host paths the server reads, bound read-only at the same paths inside bwrap (the jail hides
    # /tmp, /run, /home and /root; the command's own files there are bound without asking).
    ro_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        where = f"server {self.name!r}"
        if not self.name:
            raise CatalogueError("a server entry needs a name")
        if self.transport not in TRANSPORTS:
            raise CatalogueError(f"{where}: transport must be one of {TRANSPORTS}, not {self.transport!r}")
        if self.state not in STATES:
            raise CatalogueError(f"{where}: state must be one of {STATES}, not {self.state!r}")
        if self.seed not in ("", "files", "git"):
            raise CatalogueError(f"{where}: seed must be '', 'files' or 'git', not {self.seed!r}")
        if self.transport == "stdio" and not self.command:
            raise CatalogueError(f"{where}: command: a stdio server needs a command (argv list)")
        if self.transport == "http" and not self.url:
            raise CatalogueError(f"{where}: url: an http server needs the URL of its MCP endpoint")
        if self.startup_timeout_s <= 0 or self.call_timeout_s <= 0:
            raise CatalogueError(f"{where}: startup_timeout_s and call_timeout_s must be > 0")
        relative = [p for p in self.ro_paths if not p.startswith("/")]
        if relative:
            raise CatalogueError(f"{where}: ro_paths: every path must be absolute, not {relative}")
        if self.package and not self.package.startswith(("pypi:", "npm:")):
            raise CatalogueError(f"{where}: package must start with 'pypi:' or 'npm:', not {self.package!r}")


def entry_to_dict(entry: ServerEntry) -> dict[str, Any]:
    return dataclasses.asdict(entry)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "command": (list,),
    "env": (dict,),
    "cwd": (str,),
    "transport": (str,),
    "url": (str,),
    "network": (bool,),
    "startup_timeout_s": (int, float),
    "call_timeout_s": (int, float),
    "package": (str,),
    "state": (str,),
    "seed": (str,),
    "site": (bool,),
    "ro_paths": (list,),
}


def entry_from_dict(name: str, data: Any, where: str = "catalogue") -> ServerEntry:
    """One entry from its dict form; CatalogueError naming `where`, the server and the field."""
    if not isinstance(data, dict):
        raise CatalogueError(f"{where}: servers.{name}: expected a table/object, got {type(data).__name__}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == "name":
            continue
        expected = _FIELD_TYPES.get(key)
        if expected is None:
            known = ", ".join(sorted(_FIELD_TYPES))
            raise CatalogueError(f"{where}: servers.{name}.{key}: unknown field (known: {known})")
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            want = " or ".join(t.__name__ for t in expected)
            raise CatalogueError(f"{where}: servers.{name}.{key}: expected {want}, got {value!r}")
        if key in ("command", "ro_paths") and not all(isinstance(a, str) for a in value):
            raise CatalogueError(f"{where}: servers.{name}.{key}: every item must be a string")
        if key == "env" and not all(isinstance(v, str) for v in value.values()):
            raise CatalogueError(f"{where}: servers.{name}.env: every value must be a string")
        values[key] = value
    try:
        return ServerEntry(name=name, **values)
    except CatalogueError as exc:
        raise CatalogueError(f"{where}: {exc}") from None


def load_catalogue(path: str | Path) -> dict[str, ServerEntry]:
    """Read a JSON or TOML catalogue file (chosen by its suffix: .toml, else JSON)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CatalogueError(f"{path}: cannot read the catalogue: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise CatalogueError(
            f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise CatalogueError(f"{path}: servers: expected a non-empty table of servers by name")
    return {name: entry_from_dict(name, entry, str(path)) for name, entry in servers.items()}


def embedded_catalogue() -> dict[str, ServerEntry]:
    """The five servers the sandbox installs by itself from PyPI and npm."""
    entries = [
        ServerEntry(
            name="time", command=["mcp-server-time", "--local-timezone", "UTC"], package=TIME_PACKAGE
        ),
        ServerEntry(
            name="git",
            command=["mcp-server-git", "--repository", "{workdir}"],
            env=GIT_IDENTITY,
            cwd="{workdir}",
            package=GIT_PACKAGE,
            state="workdir",
            seed="git",
        ),
        ServerEntry(
            name="fetch",
            # Private addresses for this entry only: its pages are the sandbox's own loopback site.
            command=["mcp-server-fetch", "--allow-private-ips", "--ignore-robots-txt"],
            network=True,
            package=FETCH_PACKAGE,
            site=True,
        ),
        ServerEntry(
            name="filesystem",
            command=["mcp-server-filesystem", "{workdir}"],
            cwd="{workdir}",
            package=FILESYSTEM_PACKAGE,
            state="workdir",
            seed="files",
        ),
        ServerEntry(
            name="memory",
            command=["mcp-server-memory"],
            env={"MEMORY_FILE_PATH": "{state}/memory.jsonl"},
            package=MEMORY_PACKAGE,
            state="file",
        ),
    ]
    return {entry.name: entry for entry in entries}
