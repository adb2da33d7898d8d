"""tau-bench's published run logs, a shape of `openai_chat` rows (not a format of its own).

Source: github.com/sierra-research/tau-bench, its `historical_trajectories/*.json` (MIT) and the
environment that wrote them (`tau_bench/envs/base.py`, `tau_bench/types.py`). A file is a JSON array
of runs `{task_id, reward, info, traj, trial}`: `traj` is the OpenAI chat of the run (system prompt:
the domain's policy; then the simulated user's first message, the agent's `tool_calls` with their
`role: "tool"` results, and the agent's messages to the user each answered by the user's next one);
`info.task` holds the simulated user's own instruction (`instruction`, `user_id`) and the reference
`actions` and `outputs`; `info.reward_info` how the reward was found. There is no tool list.

In tau-bench the simulated user is part of the environment: the agent's message to the user is an
action (`respond` with `content`), and the environment answers it with the user's next message, as
it answers a tool call with the tool's output. So each such pair is one step (see
`chat_messages`, `user_replies`): a world model of this environment has to predict the user's reply
as it predicts a tool's result, from the user's instruction (in `task.metadata["user_instruction"]`).
The user's first message is the task instruction (tau-bench's reset observation) and the user's
`###STOP###` (the signal that ends a run) stays in the reply's text.

The run ends when the user's reply holds `###STOP###` or when the agent calls a tool that ends it
(`transfer_to_human_agents` in the airline and retail domains); a run that ended otherwise hit the
step limit (`max_num_steps`, 30 by default) and is `truncated`. `reward` is the environment's own check
of the final database (or of the outputs the agent had to say): the outcome's reward, with a
`Verification` of kind `imported:tau-bench`.
"""

from __future__ import annotations

from typing import Any

from collectors.importers.base import BadRow, require
from collectors.importers.chat_messages import RESPOND, Conversation
from schemas.records import Outcome, Task, ToolDefinition, Verification

STOP = "###STOP###"  # what the simulated user says to end the conversation
TERMINATE_TOOLS = ("transfer_to_human_agents",)  # the tools after which the environment is done
VERIFIER = "imported:tau-bench"
RESPOND_TOOL = ToolDefinition(
    name=RESPOND,
    description="Send a message to the user; the result is the user's reply.",
    input_schema={
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
    },
)


def is_tau_bench(row: Any) -> bool:
    """A tau-bench run: the chat under `traj`, no `messages`."""
    return isinstance(row, dict) and "messages" not in row and isinstance(row.get("traj"), list)


def messages(row: dict[str, Any]) -> list[Any]:
    return require(row, "traj", list)


def task(row_id: str, row: dict[str, Any], conversation: Conversation) -> Task:
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    source = info.get("task") if isinstance(info.get("task"), dict) else {}
    metadata: dict[str, Any] = {"tau_bench_task_id": row.get("task_id"), "trial": row.get("trial")}
    for key, name in (
        ("instruction", "user_instruction"),
        ("user_id", "user_id"),
        ("actions", "expected_actions"),
        ("outputs", "expected_outputs"),
    ):
        if source.get(key) not in (None, "", []):
            metadata[name] = source[key]
    users = conversation.user_messages
    task_id = row.get("task_id")
    return Task(
        id=f"task-{task_id}" if task_id is not None else row_id,
        instruction=users[0] if users else "",
        metadata=metadata,
    )


def outcome(row: dict[str, Any], conversation: Conversation, ended: Outcome) -> Outcome:
    """How the run ended (see the module doc) with the environment's reward. `ended` is what the
    chat alone says (a call left without a result makes it `truncated`)."""
    reward = row.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise BadRow(f"field 'reward' should be a number, got {type(reward).__name__}")
    if ended.status == "completed" and not _ended_by_environment(conversation):
        steps = len(conversation.exchanges)
        ended = Outcome(
            status="truncated",
            error=(
                f"the run stops after {steps} steps with neither the user's {STOP} nor a call to "
                f"{', '.join(TERMINATE_TOOLS)}: tau-bench's step limit ended it"
            ),
            error_kind="step_limit",
        )
    if reward is None:
        return ended
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    reward_info = info.get("reward_info") if isinstance(info.get("reward_info"), dict) else {}
    details = reward_info.get("info") if isinstance(reward_info.get("info"), dict) else {}
    ended.reward = float(reward)
    ended.verification = Verification(verifier=VERIFIER, reward=float(reward), details=dict(details))
    return ended


def _ended_by_environment(conversation: Conversation) -> bool:
    if not conversation.exchanges:
        return False
    last = conversation.exchanges[-1]
    if last.name == RESPOND:
        return any(STOP in part for part in last.result or [])
    return last.name in TERMINATE_TOOLS
