"""nebius/SWE-agent-trajectories: SWE-agent 0.x runs on SWE-bench-style issues, with their test verdict.

Source: the dataset card, https://huggingface.co/datasets/nebius/SWE-agent-trajectories (Parquet,
licence CC-BY-4.0). A row has `instance_id`, `model_name`, `target` (bool: the generated patch
passed the linked pull request's tests), `trajectory` (a list of messages, each with `role`
"system" / "user" / "ai", `text`, `system_prompt`, `mask`, `cutoff_date`), `exit_status`,
`generated_patch` and `eval_logs`. The layout of the messages (the system message carries the
command documentation in `system_prompt`; each "ai" reply is a discussion and one fenced command;
each "user" message after the first is the command's output followed by the
`(Open file: ...)` / `(Current directory: ...)` / `bash-$` prompt) is that of the rows the card's
viewer shows.

Mapping (see collectors/importers/swe_common.py for the command mapping):
- the first "user" message is the task instruction (the issue and SWE-agent's instructions); the
  repository directory its prompt shows is the initial observation's root;
- each "ai" reply with the "user" message that answers it is one step: its command becomes the
  action (`bash` with the command as written; window commands `read`), its discussion goes to the
  step's `info["thought"]`, the output (prompt suffix removed, the state it showed in
  `info["state"]`) the observation; a reply without a fenced command is an `invalid` action;
- a last reply nobody answered (often `submit`) has no observation, so it is no step: its command
  is kept in `task.metadata["unanswered_action"]`;
- `target` is a real test run: outcome reward 1.0/0.0 with `Verification("imported:swe-bench-tests")`,
  `eval_logs` (capped) as its output; `exit_status` and `generated_patch` go to task.metadata.
Not mapped: `mask` and `cutoff_date` (training-time flags of the source, kept nowhere).
"""

from __future__ import annotations

from typing import Any

from collectors.importers import swe_common
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from schemas.records import Task

VERIFIER = "imported:swe-bench-tests"


class SweAgentImporter(Importer):
    name = "swe_agent"
    dataset = "nebius/SWE-agent-trajectories"
    license = "CC-BY-4.0"
    summary = "nebius/SWE-agent-trajectories rows (SWE-agent 0.x runs with their SWE-bench test verdict)"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        instance_id = require(data, "instance_id", str)
        messages = require(data, "trajectory", list)
        system_prompt, instruction, root, turns, pending = "", None, "", [], None
        for position, message in enumerate(messages):
            where = f" in trajectory[{position}]"
            role = require(message, "role", str, where)
            if role == "system":
                system_prompt = message.get("system_prompt") or message.get("text") or ""
                continue
            text = message.get("text")
            if not isinstance(text, str):
                raise BadRow(f"field 'text'{where} should be str, got {type(text).__name__}")
            if role == "user" and instruction is None:
                instruction, state = swe_common.strip_state(text)
                root = state.get("working_dir", "")
            elif role == "user":
                if pending is None:
                    raise BadRow(f"trajectory[{position}] is environment output that answers no command")
                turns.append(self._turn(pending, text, root))
                pending = None
            elif role == "ai":
                if instruction is None:
                    raise BadRow(f"trajectory[{position}] is a reply before the task was given")
                if pending is not None:
                    raise BadRow(f"trajectory[{position}] is a second reply with no output in between")
                pending = text
            else:
                raise BadRow(f"unknown role {role!r} in trajectory[{position}]; expected system, user or ai")
        if instruction is None:
            raise BadRow("the trajectory has no user message with the task")
        if not turns:
            raise BadRow("the trajectory has no command with its output")
        metadata: dict[str, Any] = {
            "instance_id": instance_id,
            "repo": swe_common.repository_name(instance_id),
            "exit_status": data.get("exit_status") or "",
            "generated_patch": data.get("generated_patch") or "",
        }
        if pending is not None:
            metadata["unanswered_action"] = swe_common.split_reply(pending)[1] or pending
        target = data.get("target")
        if target is not None and not isinstance(target, bool):
            raise BadRow(f"field 'target' should be bool, got {type(target).__name__}")
        model = data.get("model_name") or ""
        return swe_common.episode(
            Task(id=instance_id, instruction=instruction, metadata=metadata),
            root,
            turns,
            agent="SWE-agent",
            run={"model": model},
            agent_system_prompt=system_prompt,
            outcome=swe_common.swe_bench_outcome(
                target,
                VERIFIER,
                {"target": target, "exit_status": data.get("exit_status") or ""},
                data.get("eval_logs") or "",
            ),
        )

    @staticmethod
    def _turn(reply: str, output: str, root: str) -> Turn:
        thought, command = swe_common.split_reply(reply)
        text, state = swe_common.strip_state(output)
        if command is None:
            return swe_common.invalid_turn(
                "the reply holds no fenced command", text, {"reply": reply}, thought=thought, state=state
            )
        return swe_common.swe_agent_turn(command, text, root, state, thought=thought)


IMPORTER = SweAgentImporter()
