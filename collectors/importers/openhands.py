"""OpenHands trajectories (SWE-Gym's releases) into swe trajectories.

Sources: https://huggingface.co/datasets/SWE-Gym/OpenHands-SFT-Trajectories (Parquet, split
`train.success.oss`; the card names no licence) and
https://huggingface.co/datasets/SWE-Gym/OpenHands-Sampled-Trajectories (split `train.raw`), whose
rows carry `instance_id`, `run_id`, `resolved`, `messages`, `tools` and `test_result`. `messages`
is an OpenAI chat: `system`, the `user` task (with the repository in
`<uploaded_files>\\n/workspace/NAME\\n</uploaded_files>`), `assistant` messages whose `tool_calls`
call the OpenHands tools (`execute_bash`, `str_replace_editor`, `think`, `finish`; `arguments`
a JSON string), and `tool` messages (`tool_call_id`, content often starting `OBSERVATION:`).
The `.oss` split is the same chat for models without function calling, as OpenHands'
fn_call_converter writes it: the call is text in the assistant message
(`<function=NAME>\\n<parameter=KEY>VALUE</parameter>\\n</function>`) and the result a `user`
message starting `EXECUTION RESULT of [NAME]:`. Both forms are read. The tools' answer texts
(`[Command finished with exit code N]`, `Here's the result of running \\`cat -n\\` on ...`) are
OpenHands' own (openhands/runtime, github.com/All-Hands-AI/OpenHands).

Mapping (collectors/importers/swe_common.py): `execute_bash` is `bash` (the shell prompt and
interpreter lines OpenHands appends are moved to `info`, its exit code becomes our
`[exit status: N]`); `str_replace_editor` view is `read`, create/str_replace/insert are `edit`
answered with our unified diff where the recording holds it. `think` is no step: its text joins
the next step's `info["thought"]`, as does an assistant's text. `finish` ends the run: its message
goes to `task.metadata["final_message"]`. Other tools (IPython, browser) are `invalid` steps.
`resolved` (SWE-Gym's test run) is the verified reward 1.0/0.0; rows without it have no reward.
Not mapped: `tools` (OpenHands' own schemas; our environment lists our tools) and per-step timing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from collectors.importers import swe_common
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from schemas.records import Task

VERIFIER = "imported:swe-gym-tests"
BASH_TOOLS = ("execute_bash", "bash")
EDITOR_TOOLS = ("str_replace_editor",)
_ROOT = re.compile(r"<uploaded_files>\s*\n(?P<root>[^\n]+)\n\s*</uploaded_files>")
_TEXT_CALL = re.compile(r"<function=(?P<name>[^>\s]+)>(?P<body>.*?)</function>", re.S)
_TEXT_PARAMETER = re.compile(r"<parameter=(?P<name>[^>\s]+)>(?P<value>.*?)</parameter>", re.S)
_RESULT = re.compile(r"^EXECUTION RESULT of \[(?P<name>[^\]]+)\]:\n?")
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
    summary = "OpenHands / SWE-Gym trajectories (OpenAI chat with execute_bash, str_replace_editor, finish)"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        messages = require(data, "messages", list)
        instance_id = str(data.get("instance_id") or row.row_id)
        system_prompt, instruction, root = "", None, ""
        turns: list[Turn] = []
        pending: list[Call] = []
        thoughts: list[str] = []
        metadata: dict[str, Any] = {"instance_id": instance_id}
        for position, message in enumerate(messages):
            where = f" in messages[{position}]"
            role = require(message, "role", str, where)
            text = swe_common.message_text(message.get("content"))
            if role == "system":
                system_prompt = text
            elif role == "user" and instruction is None:
                instruction = text
                found = _ROOT.search(text)
                root = found["root"].strip() if found else ""
            elif role == "assistant":
                calls = _calls(message, text, position)
                said = _TEXT_CALL.sub("", text).strip() if not message.get("tool_calls") else text.strip()
                if said:
                    thoughts.append(said)
                for call in calls:
                    if call.name == "think":
                        thoughts.append(str(call.arguments.get("thought", "")))
                    elif call.name == "finish":
                        metadata["final_message"] = str(
                            call.arguments.get("message") or call.arguments.get("thought") or ""
                        )
                    else:
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
        resolved = data.get("resolved")
        if resolved is not None and not isinstance(resolved, bool):
            raise BadRow(f"field 'resolved' should be bool, got {type(resolved).__name__}")
        test_result = data.get("test_result")
        log = test_result if isinstance(test_result, str) else json.dumps(test_result, default=str)
        return swe_common.episode(
            Task(id=instance_id, instruction=instruction, metadata=metadata),
            root,
            turns,
            agent="OpenHands",
            run={"run_id": data.get("run_id") or ""},
            outcome=swe_common.swe_bench_outcome(
                resolved, VERIFIER, {"resolved": resolved}, log if test_result is not None else ""
            ),
            agent_system_prompt=system_prompt,
        )


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


def _turn(call: Call, output: str, root: str) -> Turn:
    info: dict[str, Any] = {"thought": call.thought} if call.thought else {}
    if call.name in BASH_TOOLS:
        command = call.arguments.get("command")
        if not isinstance(command, str):
            return swe_common.invalid_turn(f"{call.name} call without a command", output, **info)
        text, exit_status, shell = bash_output(output)
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
