"""Why a Harbor verifier did not give full reward, in one line: the verifier's error or the reward,
test.sh's exit status, each command of test.sh that found no network, and the last lines of its output.

The commands are found from their own error messages in test.sh's output (curl, wget, apt, pip, uv:
patterns below, as those tools print them) and matched back to the line of test.sh that ran them: the
line naming the host that could not be reached, else the line running that tool on that package.
A command whose failure test.sh tolerated is listed too, among the others: the last lines of output
say what ended the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LAST_LINES = 3
LINE_CHARS = 200

# (tool, pattern); the pattern's group "host" or "package", when it has one, finds the test.sh line.
_NO_NETWORK = (
    ("curl", re.compile(r"curl: \(\d+\) Could not resolve host: (?P<host>[\w.-]+)")),
    ("curl", re.compile(r"curl: \(\d+\) Failed to connect to (?P<host>[\w.-]+).*")),
    ("wget", re.compile(r"unable to resolve host address ['‘](?P<host>[\w.-]+)")),
    ("apt-get update", re.compile(r"Temporary failure resolving '(?P<host>[\w.-]+)'")),
    ("apt-get", re.compile(r"E: Unable to locate package (?P<package>[\w.+-]+)")),
    ("apt-get", re.compile(r"E: Package '(?P<package>[\w.+-]+)' has no installation candidate")),
    ("pip", re.compile(r"No matching distribution found for (?P<package>[\w.=<>!~-]+)")),
    ("pip", re.compile(r"Failed to establish a new connection.*")),
    ("uv", re.compile(r"(?P<package>[\w.=<>!~-]+) was not found in the cache.*")),
    ("uv", re.compile(r"(?:dns error|failed to lookup address information).*")),
    ("git", re.compile(r"Could not resolve host: (?P<host>[\w.-]+)")),
)
_TOOL_WORDS = {
    "curl": ("curl",),
    "wget": ("wget",),
    "apt-get": ("apt-get", "apt "),
    "apt-get update": ("apt-get update", "apt update"),
    "pip": ("pip",),
    "uv": ("uvx", "uv "),
    "git": ("git",),
}


@dataclass(frozen=True)
class NoNetwork:
    command: str  # test.sh's line that ran it, or the tool's name when no line matches
    message: str  # the tool's own error line

    def format(self) -> str:
        return f"`{self.command}` ({self.message})"


def _commands(test_sh: str) -> list[str]:
    """test.sh's commands, one a line, with backslash continuations joined."""
    joined = re.sub(r"[ \t]*\\\n\s*", " ", test_sh)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def _command_for(tool: str, match: re.Match[str], commands: list[str]) -> str:
    groups = {k: v for k, v in match.groupdict().items() if v}
    key = groups.get("host") or re.split(r"[=<>!~]", groups.get("package", ""))[0]
    words = _TOOL_WORDS[tool]
    with_tool = [c for c in commands if any(w in c for w in words)]
    if key:
        if "host" in groups:
            named = [c for c in commands if key in c]
            if named:
                return named[0]
        named = [c for c in with_tool if key in c]
        if named:
            return named[0]
    return with_tool[0] if len(with_tool) == 1 else tool


def no_network(output: str, test_sh: str) -> list[NoNetwork]:
    """Each command of test.sh that found no network, by its own error messages in `output`, once."""
    commands = _commands(test_sh)
    found: dict[str, NoNetwork] = {}
    for line in output.splitlines():
        for tool, pattern in _NO_NETWORK:
            match = pattern.search(line)
            if match:
                command = _command_for(tool, match, commands)
                found.setdefault(command, NoNetwork(command[:LINE_CHARS], match.group(0)[:LINE_CHARS]))
                break
    return list(found.values())


def last_lines(output: str, count: int = LAST_LINES) -> list[str]:
    lines = [line.strip()[:LINE_CHARS] for line in output.splitlines() if line.strip()]
    return lines[-count:]


def failure_cause(reward: float | None, error: str | None, details: dict[str, Any], output: str) -> str:
    """One line: the error (else the reward), the exit status, the commands without network
    (details["no_network"], as the verifier recorded them), the last lines of output."""
    parts = [error.splitlines()[0] if error else f"reward {reward}"]
    code = details.get("exit_code")
    if code is not None and "exited" not in parts[0]:
        parts.append(f"test.sh exited {code}")
    missing = details.get("no_network") or []
    if missing:
        shown = ", ".join(NoNetwork(**item).format() for item in missing)
        parts.append(f"no network for {shown}")
    tail = last_lines(output)
    if tail:
        parts.append("last output: " + " | ".join(tail))
    return "; ".join(parts)
