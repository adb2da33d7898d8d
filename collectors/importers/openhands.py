"""OpenHands trajectories (SWE-Gym's releases, and OpenHands' own event histories) into swe
trajectories.

Sources: https://huggingface.co/datasets/SWE-Gym/OpenHands-SFT-Trajectories (Parquet, split
`train.success.oss`; the card names no licence) and
https://huggingface.co/datasets/SWE-Gym/OpenHands-Sampled-Trajectories (split `train.raw`), whose
rows carry `instance_id`, `run_id`, `resolved`, `messages`, `tools` and `test_result`. `messages`
is an OpenAI chat: `system`, the `user` task (with the repository in
`<uploaded_files>\\n/workspace/NAME\\n</uploaded_files>`), `assistant` messages whose `tool_calls`
call the OpenHands tools (`execute_bash`, `str_replace_editor`, `think`, `finish`; `arguments`
a JSON string), and `tool` messages (`tool_call_id`, content often starting `OBSERVATION:`).
The `.oss` split (and SWE-Play-trajectories, whose rows have `id`, `category` and `source`
instead of `instance_id`) is the same chat for models without function calling, as OpenHands'
fn_call_converter writes it: the call is text in the assistant message
(`<function=NAME>\\n<parameter=KEY>VALUE</parameter>\\n</function>`) and the result a `user`
message starting `EXECUTION RESULT of [NAME]:`. The converter puts an in-context example around
the first user message (`... START OF EXAMPLE ...`, the task between `NEW TASK DESCRIPTION` and
`END OF NEW TASK DESCRIPTION`): the task is the text between those markers. A reply cut at the
stop word `</function` keeps its call (OpenHands' converter closes it the same way), so a final
`<function=finish>` without its closing tag still gives the final message. Both forms are read.
The tools' answer texts (`[Command finished with exit code N]`, `Here's the result of running
\\`cat -n\\` on ...`) are OpenHands' own (openhands/runtime, github.com/OpenHands/OpenHands).
OpenHands' own event stream (a JSON array or JSON Lines of events, one run per file; or rows
with a `history` list of events, as its evaluation harness writes them) is read too, auto-detected:
see collectors/importers/openhands_events.py.

Mapping (collectors/importers/swe_common.py): `execute_bash` is `bash` (the shell prompt and
interpreter lines OpenHands appends are moved to `info`, its exit code becomes our
`[exit status: N]`); `str_replace_editor` view is `read`, create/str_replace/insert are `edit`
answered with our unified diff where the recording holds it. The repository root is the
`<uploaded_files>` folder, else `/workspace` (OpenHands' workspace in its sandbox), so paths
there are relative in diffs. `think` is no step: its text joins the next step's
`info["thought"]`, as does an assistant's text. `finish` ends the run: its message (else the text
said with it, else the last text said before it) goes to `task.metadata["final_message"]`;
texts after the last step that no step took (a user's "please continue") to
`task.metadata["closing_thoughts"]`. Other tools (IPython, browser) are `invalid` steps.
`resolved` (SWE-Gym's test run) is the verified reward 1.0/0.0; rows without it have no reward.
Not mapped: `tools` (OpenHands' own schemas; our environment lists our tools) and per-step timing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from collectors.importers import reading, swe_common
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.openhands_events import History, is_event, read_events
from collectors.importers.reading import Unreadable
from collectors.importers.swe_agent_traj import relative_name
from schemas.records import Task

VERIFIER = "imported:swe-gym-tests"
BASH_TOOLS = ("execute_bash", "bash")
EDITOR_TOOLS = ("str_replace_editor",)
DEFAULT_ROOT = "/workspace"  # OpenHands' workspace_mount_path_in_sandbox
_ROOT = re.compile(r"<uploaded_files>\s*\n(?P<root>[^\n]+)\n\s*</uploaded_files>")
# A call runs to its closing tag, or to the end of a reply cut at the stop word `</function`.
_TEXT_CALL = re.compile(r"<function=(?P<name>[^>\s]+)>(?P<body>.*?)(?:</function>|\Z)", re.S)
_TEXT_PARAMETER = re.compile(r"<parameter=(?P<name>[^>\s]+)>(?P<value>.*?)</parameter>", re.S)
_RESULT = re.compile(r"^EXECUTION RESULT of \[(?P<name>[^\]]+)\]:\n?")
_EXAMPLE_START = "--------------------- START OF EXAMPLE ---------------------"
_TASK_START = "--------------------- NEW TASK DESCRIPTION ---------------------\n"
_TASK_END = "\n--------------------- END OF NEW TASK DESCRIPTION ---------------------"
_EXIT = re.compile(
    r"^\[(?:Command finished with exit code (-?\d+)|The command completed with exit code (-?\d+)\.)\]$"
)
_TRAILER = re.compile(
    r"^(?:\[Python [Ii]nterpreter: (?P<python>[^\]]*)\]|\[Current working directory: (?P<cwd>[^\]]*)\]"
    r"|(?P<prompt>[\w.-]+@[\w.-]+:[^\n]*[#$] ?))$"
)


class Call:
    """A tool call waiting for its result."""

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any], thought: str) -> None:
        self.call_id, self.name, self.arguments, self.thought = call_id, name, arguments, thought


class OpenHandsImporter(Importer):
    name = "openhands"
    dataset = "SWE-Gym/OpenHands-SFT-Trajectories"
    license = ""
    summary = "OpenHands / SWE-Gym trajectories (OpenAI chat, its .oss text form, or OpenHands' event stream)"

    def read(self, source: str) -> Iterator[SourceRow]:
        """Rows as usual, except that a file's run of OpenHands events is gathered into one row."""
        history: History | None = None
        for index, uri, row in reading.stream_rows(source):
            if is_event(row):
                if history is not None and history.uri != uri:
                    yield _history_row(source, history)
                    history = None
                history = history or History(uri, index)
                history.add(row)
                continue
            if history is not None:
                if isinstance(row, Unreadable) and uri == history.uri:
                    history.problem = f"the file could not be read to its end: {row.reason}"
                yield _history_row(source, history)
                history = None
            yield SourceRow(row_id=self.row_id(row, index, uri), data=row, uri=uri)
        if history is not None:
            yield _history_row(source, history)

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        if isinstance(data, History):
            if data.problem:
                raise BadRow(data.problem)
            return _from_events(data.events, {}, row.row_id)
        if isinstance(data, dict) and "messages" not in data and isinstance(data.get("history"), list):
            return _from_events(data["history"], data, row.row_id)
        return _from_chat(require(data, "messages", list), data, row.row_id)


def _history_row(source: str, history: History) -> SourceRow:
    name = relative_name(source, history.uri)
    row_id = name if history.first_index == 0 else f"{name}#{history.first_index}"
    return SourceRow(row_id=row_id, data=history, uri=history.uri)


def task_text(message: str) -> str:
    """The task in a first user message: without the in-context example fn_call_converter wraps
    around it for models without function calling."""
    if _EXAMPLE_START not in message or _TASK_START not in message:
        return message
    task = message.split(_TASK_START, 1)[1]
    return task.split(_TASK_END, 1)[0]


def _root(instruction: str) -> str:
    found = _ROOT.search(instruction)
    return found["root"].strip() if found else DEFAULT_ROOT


def _from_chat(messages: list[Any], data: dict[str, Any], row_id: str) -> Episode:
    system_prompt, instruction, root = "", None, DEFAULT_ROOT
    turns: list[Turn] = []
    pending: list[Call] = []
    thoughts: list[str] = []
    metadata: dict[str, Any] = {}
    for position, message in enumerate(messages):
        where = f" in messages[{position}]"
        role = require(message, "role", str, where)
        text = swe_common.message_text(message.get("content"))
        if role == "system":
            system_prompt = text
        elif role == "user" and instruction is None:
            instruction = task_text(text)
            root = _root(instruction)
        elif role == "assistant":
            calls = _calls(message, text, position)
            said = _TEXT_CALL.sub("", text).strip() if not message.get("tool_calls") else text.strip()
            finish = next((call for call in calls if call.name == "finish"), None)
            if finish is not None:
                metadata.update(_finish(finish.arguments, said, thoughts))
            elif said:
                thoughts.append(said)
            for call in calls:
                if call.name == "think":
                    thoughts.append(str(call.arguments.get("thought", "")))
                elif call.name != "finish":
                    call.thought = "\n\n".join(t for t in thoughts if t)
                    thoughts = []
                    pending.append(call)
        elif role in ("tool", "user"):
            result = _RESULT.match(text) if role == "user" else None
            if role == "user" and not result:
                thoughts.append(f"[user] {text}")  # a nudge from the user, not the environment
                continue
            call = _answered(pending, message.get("tool_call_id"), result["name"] if result else None)
            if call is None:
                name = message.get("name") or (result["name"] if result else "")
                if name in ("think", "finish"):
                    continue  # "Your thought has been logged." answers no environment action
                raise BadRow(f"messages[{position}] is a tool result that answers no pending call")
            output = text[result.end() :] if result else text
            turns.append(_turn(call, output.removeprefix("OBSERVATION:\n"), root))
        else:
            raise BadRow(f"unknown role {role!r}{where}; expected system, user, assistant or tool")
    if instruction is None:
        raise BadRow("the messages have no user message with the task")
    if not turns:
        raise BadRow("the messages hold no tool call with its result")
    if pending:
        metadata["unanswered_actions"] = [{"tool": c.name, "arguments": c.arguments} for c in pending]
    if any(thoughts):
        metadata["closing_thoughts"] = [t for t in thoughts if t]
    run = {"run_id": data.get("run_id") or ""}
    return _episode(data, row_id, instruction, system_prompt, root, turns, metadata, run)


def _finish(arguments: dict[str, Any], said: str, thoughts: list[str]) -> dict[str, Any]:
    """What a finish call tells: its message, else the text said with it, else the last text the
    agent said before it (taken from `thoughts`: SWE-Gym's agents answered, then finished)."""
    message = str(arguments.get("message") or arguments.get("thought") or "")
    if said and message:
        thoughts.append(said)
    elif said:
        message = said
    elif not message:
        spoken = [i for i, t in enumerate(thoughts) if t and not t.startswith("[user] ")]
        message = thoughts.pop(spoken[-1]) if spoken else ""
    facts: dict[str, Any] = {"final_message": message}
    if arguments.get("task_completed") not in (None, ""):
        facts["task_completed"] = str(arguments["task_completed"])
    return facts


def _from_events(events: list[Any], data: dict[str, Any], row_id: str) -> Episode:
    run = read_events(events)
    instruction = run.instruction if run.instruction is not None else data.get("instruction")
    if not isinstance(instruction, str):
        raise BadRow("the events have no user message with the task")
    instruction = task_text(instruction)
    root = _root(instruction)
    turns = [
        _turn(Call(c.tool_call_id, c.name, c.arguments, c.thought), c.output, root, (c.exit_status, c.shell))
        for c in run.calls
    ]
    if not turns:
        raise BadRow("the events hold no environment action with its observation")
    metadata: dict[str, Any] = {}
    if run.final_message is not None:
        metadata["final_message"] = run.final_message
    if run.unanswered:
        metadata["unanswered_actions"] = [{"tool": c.name, "arguments": c.arguments} for c in run.unanswered]
    if run.closing_thoughts:
        metadata["closing_thoughts"] = run.closing_thoughts
    facts = {"run_id": data.get("run_id") or "", "model": run.model}
    return _episode(data, row_id, instruction, run.system_prompt, root, turns, metadata, facts)


def _episode(
    data: dict[str, Any],
    row_id: str,
    instruction: str,
    system_prompt: str,
    root: str,
    turns: list[Turn],
    metadata: dict[str, Any],
    run: dict[str, Any],
) -> Episode:
    """The swe episode of a run, with the row's own id and test verdict where it has them."""
    instance_id = data.get("instance_id")
    task_id = str(instance_id or data.get("id") or row_id)
    facts = {key: data[key] for key in ("category", "source") if isinstance(data.get(key), str)}
    resolved = data.get("resolved")
    if resolved is not None and not isinstance(resolved, bool):
        raise BadRow(f"field 'resolved' should be bool, got {type(resolved).__name__}")
    test_result = data.get("test_result")
    log = test_result if isinstance(test_result, str) else json.dumps(test_result, default=str)
    built = swe_common.episode(
        Task(id=task_id, instruction=instruction, metadata={"instance_id": task_id, **facts, **metadata}),
        root,
        turns,
        agent="OpenHands",
        run={key: value for key, value in run.items() if key == "run_id" or value},
        outcome=swe_common.swe_bench_outcome(
            resolved, VERIFIER, {"resolved": resolved}, log if test_result is not None else ""
        ),
        agent_system_prompt=system_prompt,
    )
    if not instance_id:  # no SWE-bench id names the repository: our first line names only its root
        built.initial = swe_common.initial_observation("", root)
    return built


def _calls(message: dict[str, Any], text: str, position: int) -> list[Call]:
    """The tool calls of an assistant message: OpenAI `tool_calls`, or fn_call_converter's text."""
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise BadRow(f"messages[{position}].tool_calls[{index}] has no function name")
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError as exc:
                raise BadRow(
                    f"messages[{position}].tool_calls[{index}] arguments are not JSON: {exc}"
                ) from exc
        if not isinstance(arguments, dict):
            raise BadRow(f"messages[{position}].tool_calls[{index}] arguments are not an object")
        calls.append(Call(str(call.get("id") or ""), function["name"], arguments, ""))
    if not calls:
        for found in _TEXT_CALL.finditer(text):
            arguments = {
                p["name"]: _strip_newlines(p["value"]) for p in _TEXT_PARAMETER.finditer(found["body"])
            }
            calls.append(Call("", found["name"], arguments, ""))
    return calls


def _strip_newlines(value: str) -> str:
    """fn_call_converter puts each parameter's value on lines of its own."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _answered(pending: list[Call], call_id: Any, name: str | None) -> Call | None:
    """The pending call a result answers: by id where the chat has ids, else the oldest one."""
    for index, call in enumerate(pending):
        if (call_id and call.call_id == call_id) or (not call_id and (name is None or call.name == name)):
            return pending.pop(index)
    return None


def _turn(
    call: Call, output: str, root: str, recorded: tuple[int | None, dict[str, str]] | None = None
) -> Turn:
    """One call and what the agent was shown. `recorded`: a bash command's exit code and shell
    facts where the source keeps them apart (events), else they are read off the output's end."""
    info: dict[str, Any] = {"thought": call.thought} if call.thought else {}
    if call.name in BASH_TOOLS:
        command = call.arguments.get("command")
        if not isinstance(command, str):
            return swe_common.invalid_turn(f"{call.name} call without a command", output, **info)
        text, exit_status, shell = (output, *recorded) if recorded is not None else bash_output(output)
        if shell:
            info["shell"] = shell
        return swe_common.bash_turn(command, text, exit_status, **info)
    if call.name in EDITOR_TOOLS:
        return swe_common.editor_turn(call.arguments, output, root, **info)
    reason = f"the OpenHands tool {call.name} has no equivalent among the swe tools (read, edit, bash)"
    return swe_common.invalid_turn(reason, output, {"tool": call.name, "arguments": call.arguments}, **info)


def bash_output(output: str) -> tuple[str, int | None, dict[str, str]]:
    """(output, exit code, shell facts) of an execute_bash result: the exit-code, interpreter, working
    directory and prompt lines OpenHands appends are taken off the end. An exit code of -1 (the
    command still runs) is no exit status: that text stays as recorded."""
    lines = output.rstrip("\n").split("\n")
    exit_status: int | None = None
    shell: dict[str, str] = {}
    while lines:
        last = lines[-1]
        code = _EXIT.match(last)
        trailer = _TRAILER.match(last)
        if code:  # newer OpenHands states the exit code twice
            exit_status = int(code[1] or code[2]) if exit_status is None else exit_status
        elif trailer:
            shell.update({key: value for key, value in trailer.groupdict().items() if value})
        else:
            break
        lines.pop()
    if exit_status is None or exit_status < 0:
        return output, None, {}
    text = "\n".join(lines)
    return (text + "\n" if text else ""), exit_status, shell


IMPORTER = OpenHandsImporter()
