"""The swe mapping the SWE-agent and OpenHands importers share: public agent steps into our swe
tools `read`, `edit`, `bash` (sandboxes/swe/actions.py), with observations in the text our
SweSandbox answers with (format `swe_tool_result`).

What maps, and how (the format modules cite their sources):
- A bash command becomes `bash(command=...)`; its output is kept as recorded. Where the source
  recorded the exit code (OpenHands' `[Command finished with exit code N]`), the text ends with
  our status line `[exit status: N]`; where it did not (SWE-agent), no status line is made up.
- `str_replace_editor view` (OpenHands, SWE-agent 1.x) becomes `read`: its `cat -n` lines are the
  same `%6d<TAB>` form our `read` prints, so only the tool's header line goes. A directory view
  keeps the tool's own listing (absolute paths, two levels), which our `read` would print
  differently.
- `create`, `str_replace` and `insert` become `edit`; the answer is our unified diff where the
  recording holds what it needs (the created file's text; the edited snippet that the tool
  printed, which spans more context than the diff's three lines), else the tool's recorded text.
- SWE-agent's window commands (`open`, `goto`, `scroll_up`, `scroll_down`) become `read` of the
  lines the window showed, renumbered as `cat -n`; see `swe_agent_turn`.
- A step our tools cannot express (a reply without a command, `undo_edit`, an IPython cell) is an
  `invalid` action (schemas/invalid_actions.py) whose observation is `invalid action: <why>`; what
  the agent was shown is kept in the observation's `data["recorded"]`.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from typing import Any

from collectors.importers.base import Episode, Turn
from sandboxes.base import InvalidActionError
from sandboxes.swe.actions import BASH, EDIT, READ, TOOLS, parse_action
from sandboxes.swe.sandbox import FORMAT
from sandboxes.swe.text import unified_diff
from schemas.invalid_actions import INVALID, invalid_action_observation
from schemas.records import Action, Environment, Observation, Outcome, Policy, Task, Verification

# How much of a source's evaluation log a Verification keeps.
EVAL_LOG_CHARS = 20_000
_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@", re.M)
_SWE_BENCH_ID = re.compile(r"^(?P<owner>[^_]+(?:_[^_]+)*?)__(?P<name>.+)-(?P<number>\d+)(?:_\d+)?$")


# -- observations and turns ------------------------------------------------------------------------


def tool_observation(tool: str, text: str, **data: Any) -> Observation:
    return Observation(format=FORMAT, text=text, data={"tool": tool, **data})


def invalid_turn(error: str, recorded: str, arguments: dict[str, Any] | None = None, **info: Any) -> Turn:
    """A step our tools cannot express: the convention of schemas/invalid_actions.py."""
    observation = invalid_action_observation(error)
    observation.data["recorded"] = recorded
    action = Action(kind=INVALID, arguments={"error": error, **(arguments or {})}, text=error)
    return Turn(action=action, observation=observation, info=info)


def bash_turn(command: str, output: str, exit_status: int | None = None, **info: Any) -> Turn:
    """`bash(command=...)` answered by `output`, ending with our status line when it is known."""
    try:
        action = parse_action(BASH, {"command": command})
    except InvalidActionError as exc:
        return invalid_turn(str(exc), output, {"command": command}, **info)
    text = output
    if exit_status is not None:
        text = (text if not text or text.endswith("\n") else text + "\n") + f"[exit status: {exit_status}]"
    observation = tool_observation(BASH, text, exit_status=exit_status, timed_out=False, error="")
    return Turn(action=action, observation=observation, info=info)


def tool_turn(kind: str, arguments: dict[str, Any], text: str, error: str = "", **info: Any) -> Turn:
    """A `read` or `edit` call; arguments our parser refuses make an invalid turn instead."""
    try:
        action = parse_action(kind, arguments)
    except InvalidActionError as exc:
        return invalid_turn(str(exc), text, {"tool": kind, "arguments": arguments}, **info)
    data: dict[str, Any] = {"error": error}
    if kind == EDIT:
        data["diff"] = info.pop("diff", "")
    return Turn(action=action, observation=tool_observation(kind, text, **data), info=info)


# -- environment, outcome, initial observation ----------------------------------------------------


def environment(backend: str = "imported", **config: Any) -> Environment:
    """The swe environment of an import: our tools, the source's facts in config (empty ones dropped)."""
    kept = {key: value for key, value in config.items() if value not in (None, "", {}, [])}
    return Environment(name="swe", backend=backend, config=kept, tools=list(TOOLS))


def episode(
    task: Task,
    root: str,
    turns: list[Turn],
    agent: str,
    run: dict[str, Any],
    outcome: Outcome | None = None,
    **facts: Any,
) -> Episode:
    """An imported agent run on a SWE task: our sandbox's first line for the task's repository at
    `root`, the environment naming the agent with the source's `facts`, and the imported policy
    naming the agent with what identifies its `run` (the model, the run id)."""
    return Episode(
        domain="swe",
        task=task,
        initial=initial_observation(task.id, root),
        turns=turns,
        environment=environment(agent=agent, repo_path=root, **facts),
        policy=Policy(name="imported", config={"agent": agent, **run}),
        outcome=outcome or Outcome(status="completed"),
    )


def swe_bench_outcome(
    resolved: bool | None, verifier: str, details: dict[str, Any], log: str = ""
) -> Outcome:
    """`completed`, with the source's test verdict as reward 1.0/0.0 where it recorded one."""
    if resolved is None:
        return Outcome(status="completed")
    reward = 1.0 if resolved else 0.0
    verification = Verification(
        verifier=verifier, reward=reward, output=(log or "")[:EVAL_LOG_CHARS], details=details
    )
    return Outcome(status="completed", reward=reward, verification=verification)


def repository_name(instance_id: str) -> str:
    """`owner/name` from a SWE-bench style instance id (`owner__name-123`), else the id itself."""
    found = _SWE_BENCH_ID.match(instance_id or "")
    return f"{found['owner']}/{found['name']}" if found else instance_id


def initial_observation(instance_id: str, root: str) -> Observation:
    """Our sandbox's first line, `Repository NAME at ROOT.`, from what the source says (no listing:
    the sources do not record one)."""
    name = repository_name(instance_id)
    where = f" at {root}" if root else ""
    text = f"Repository {name}{where}." if name else f"Repository{where}."
    return Observation(format=FORMAT, text=text, data={"tool": "", "error": ""})


def relative(path: str, root: str) -> str:
    """`path` relative to the repository root when it lies inside it (our tools' preferred form)."""
    root = root.rstrip("/")
    if root and path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return path


# -- str_replace_editor (OpenHands, SWE-agent 1.x) -------------------------------------------------

_VIEW_HEADER = re.compile(r"^Here's the result of running `cat -n` on [^\n]*:\n")
_DIR_HEADER = re.compile(r"^Here's the files and directories up to \d+ levels? deep in [^\n]*:\n")
_EDITED = re.compile(
    r"^The file (?P<path>[^\n]+) has been edited\. Here's the result of running `cat -n` on a snippet of "
    r"[^\n]*:\n(?P<snippet>.*?)\n(?:Review the changes[^\n]*)?$",
    re.S,
)
_CREATED = re.compile(r"^File created successfully at:? ")
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")


def editor_turn(arguments: dict[str, Any], output: str, root: str, **info: Any) -> Turn:
    """One `str_replace_editor` call and the tool's answer, as our `read` or `edit`."""
    command = arguments.get("command")
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        return invalid_turn(
            "str_replace_editor call without a path", output, {"arguments": arguments}, **info
        )
    failed = output.startswith("ERROR:") or "does not exist" in output.split("\n", 1)[0]
    if command == "view":
        return _view_turn(path, arguments.get("view_range"), output, failed, **info)
    if command in ("create", "str_replace", "insert"):
        edit = {"command": command, "path": path}
        edit.update({k: arguments[k] for k in ("file_text", "old_str", "new_str") if k in arguments})
        if "insert_line" in arguments:
            edit["insert_line"] = _as_int(arguments["insert_line"])
        text, diff = output, ""
        if not failed:
            diff = _edit_diff(edit, output, relative(path, root))
            text = diff or output
        return tool_turn(EDIT, edit, text, error=output if failed else "", diff=diff, **info)
    reason = f"str_replace_editor {command} has no equivalent among the swe tools (read, edit, bash)"
    return invalid_turn(reason, output, {"arguments": arguments}, **info)


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return value


def _view_turn(path: str, view_range: Any, output: str, failed: bool, **info: Any) -> Turn:
    arguments: dict[str, Any] = {"path": path}
    if isinstance(view_range, str):
        try:
            view_range = json.loads(view_range)
        except ValueError:
            view_range = None
    if isinstance(view_range, list) and len(view_range) == 2:
        start, end = (_as_int(v) for v in view_range)
        arguments["start_line"] = start
        if end != -1:  # -1: to the end of the file, which is what our read does without end_line
            arguments["end_line"] = end
    if failed:
        return tool_turn(READ, arguments, output, error=output, **info)
    text = _VIEW_HEADER.sub("", output, count=1)
    text = _DIR_HEADER.sub("", text, count=1)
    if text and not text.endswith("\n"):
        text += "\n"
    return tool_turn(READ, arguments, text, **info)


def _edit_diff(edit: dict[str, Any], output: str, rel: str) -> str:
    """Our unified diff of an edit, from what the recording holds; "" where it does not suffice."""
    if edit["command"] == "create":
        content = edit.get("file_text")
        if not _CREATED.match(output) or not isinstance(content, str):
            return ""
        return unified_diff("", content, rel, created=True, span=(0, 0, len(content)))
    found = _EDITED.match(output)
    new_str = edit.get("new_str")
    if not found or not isinstance(new_str, str):
        return ""
    numbered = [_NUMBERED.match(line) for line in found["snippet"].split("\n")]
    if not numbered or not all(numbered):
        return ""
    first = int(numbered[0][1])  # type: ignore[index]
    after = "".join(m[2] + "\n" for m in numbered)  # type: ignore[index]
    if edit["command"] == "str_replace":
        old, new = edit.get("old_str"), new_str
    else:
        old, new = "", new_str + "\n"
    # The snippet must show the change exactly once to be undone (tabs it expanded defeat this).
    if not isinstance(old, str) or not new or after.count(new) != 1:
        return ""
    before = after.replace(new, old, 1)
    diff = unified_diff(before, after, rel)
    return _HUNK.sub(lambda m: _shift(m, first - 1), diff) if first > 1 else diff


def _shift(found: re.Match[str], offset: int) -> str:
    old_at, old_len, new_at, new_len = found.groups()
    return f"@@ -{int(old_at) + offset}{old_len} +{int(new_at) + offset}{new_len} @@"


def editor_arguments_from_command_line(command: str) -> dict[str, Any] | None:
    """SWE-agent 1.x writes editor calls as a command line, `str_replace_editor view PATH
    --view_range 1 20`; its arguments as a dict, or None when the line does not parse."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) < 3 or words[0] != "str_replace_editor":
        return None
    arguments: dict[str, Any] = {"command": words[1], "path": words[2]}
    rest = words[3:]
    while rest:
        flag = rest.pop(0)
        if not flag.startswith("--"):
            return None
        name = flag[2:]
        if name == "view_range":
            if len(rest) < 2:
                return None
            arguments[name] = [_as_int(rest.pop(0)), _as_int(rest.pop(0))]
        elif rest:
            arguments[name] = rest.pop(0)
        else:
            return None
    return arguments


# -- SWE-agent 0.x: the command-block interface ----------------------------------------------------

_FENCE = re.compile(r"```[^\n]*\n(.*?)\n?```", re.S)
# The prompt SWE-agent 0.x appends to each observation: open file, directory, then `bash-$`.
_STATE = re.compile(
    r"\n*\(Open file: (?P<file>[^\n]*)\)\n\(Current directory: (?P<cwd>[^\n]*)\)\n?bash-\$\s*$"
)
# SWE-agent 0.x's runtime ends each command with this echo to find the end of its output (and the
# exit code); where the output did not end with a newline the marker is left in the observation.
_PROCESS_DONE = re.compile(r"///PROCESS-DONE:(?P<code>-?\d+):PROCESS-DONE///\s*$")
_WINDOW_HEADER = re.compile(r"^\[File: (?P<path>.+) \((?P<total>\d+) lines total\)\]$")
_MORE = re.compile(r"^\((?:\d+) more lines? (?:above|below)\)$")
WINDOW_COMMANDS = ("open", "goto", "scroll_up", "scroll_down")


def split_reply(text: str) -> tuple[str, str | None]:
    """(thought, command) of a SWE-agent 0.x reply: the command is its last fenced block."""
    blocks = list(_FENCE.finditer(text))
    if not blocks:
        return text.strip(), None
    last = blocks[-1]
    thought = (text[: last.start()] + text[last.end() :]).strip()
    if thought.startswith("DISCUSSION"):
        thought = thought[len("DISCUSSION") :].strip()
    return thought, last.group(1).strip()


def strip_state(text: str) -> tuple[str, dict[str, str]]:
    """An observation without SWE-agent's prompt suffix, and the state that suffix showed."""
    found = _STATE.search(text)
    if not found:
        return text, {}
    return text[: found.start()], {"open_file": found["file"], "working_dir": found["cwd"]}


def swe_agent_turn(
    command: str, output: str, root: str, state: dict[str, Any] | None = None, **info: Any
) -> Turn:
    """One SWE-agent 0.x command and its output, as our tools.

    SWE-agent's commands are shell functions in its container, so all of them are `bash` with the
    command as written, except the window commands (open, goto, scroll_up, scroll_down) whose
    output is a window of one file: those are `read(path, start_line, end_line)` of the lines the
    window showed, renumbered as `cat -n`. `edit N:M` (a line-range replacement, answered with a
    window, not a diff) and `create` (answered with an empty window) stay bash: our edit has
    neither that command nor that answer. A window names its file as the command did (quoted or
    not, relative to the working directory); `read` gets it relative to the repository root. The
    runtime's end marker `///PROCESS-DONE:N:PROCESS-DONE///`, which some recordings kept after an
    output that had no final newline, is removed; N goes to `info["exit_code"]` (the other steps
    do not record theirs, so no status line is added to the text).
    """
    if state:
        info = {**info, "state": state}
    marker = _PROCESS_DONE.search(output)
    if marker:  # the runtime's, not the program's: its exit code is kept, without our status line
        output = output[: marker.start()]
        info = {**info, "exit_code": int(marker["code"])}
    name = command.split(maxsplit=1)[0] if command.strip() else ""
    if name in WINDOW_COMMANDS:
        window = parse_window(output)
        if window is not None:
            path, first, lines = window
            directory = (state or {}).get("working_dir", "")
            if not path.startswith("/") and directory:
                path = posixpath.normpath(posixpath.join(directory, path))
            arguments = {
                "path": relative(path, root),
                "start_line": first,
                "end_line": first + len(lines) - 1,
            }
            text = "".join(f"{first + i:6d}\t{line}\n" for i, line in enumerate(lines))
            return tool_turn(READ, arguments, text, **info, source_command=command)
    return bash_turn(command, output, **info)


def parse_window(output: str) -> tuple[str, int, list[str]] | None:
    """(path, first line number, lines) of a SWE-agent file window, or None if `output` is not
    exactly one window with consecutively numbered lines. CRLF line ends (a terminal's, as
    SWE-agent 1.x records them) read as LF."""
    lines = output.replace("\r\n", "\n").rstrip("\n").split("\n")
    header = _WINDOW_HEADER.match(lines[0]) if lines else None
    if not header:
        return None
    body = [line for line in lines[1:] if not _MORE.match(line)]
    numbered = []
    for line in body:
        number, sep, content = line.partition(":")
        if not sep or not number.isdigit():
            return None
        numbered.append((int(number), content))
    if not numbered or any(n != numbered[0][0] + i for i, (n, _) in enumerate(numbered)):
        return None
    return header["path"], numbered[0][0], [content for _, content in numbered]


def message_text(content: Any) -> str:
    """A chat message's text: a string, or OpenAI content parts `[{"type": "text", "text": ...}]`."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return str(content)
