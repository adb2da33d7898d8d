"""The one renderer of trajectories into world-model text, shared by the corpus pipeline and inference.

The layout follows the public AgentWorldBench evaluation (DESIGN.md section 2): `system` holds the
world-model prompt with the initial state; each earlier turn is a `user` message with the action text
(`### Turn k` / `**Action:**`) and an `assistant` message with the real observation
(`**Environment Observation:**`); the last `user` message is the current action. The model answers with
its reasoning, then the observation inside `<predicted_observation>` tags (a model trained on delta
targets writes there an edit script of the previous observation, `schemas.edit_script`, in the same
tags). Training samples, RL prompts, benchmark files and the simulator all go through these
functions, so they cannot drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schemas.domains import find_record
from schemas.edit_script import TARGET_FORMS, diff
from schemas.prompts import DomainPrompt
from schemas.records import Action, Observation, Step, ToolDefinition, Trajectory

OPEN_TAG = "<predicted_observation>"
OBSERVATION_HEADER = "**Environment Observation:**\n"  # heads each earlier observation in a prompt
CLOSE_TAG = "</predicted_observation>"
AGENTWORLDBENCH_FIELDS = (
    "task",
    "id",
    "prompt",
    "response",
    "current_prompt",
    "system_str",
    "turn_idx",
    "total_turns",
)

# The one <think> pattern: closed blocks, and an unclosed one up to the end (a reply cut by the token
# limit mid-reasoning has no visible answer).
THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_OBSERVATION_MARKER = re.compile(r"^\s*\**Environment Observation:?\**:?[ \t]*\n?")
_PREDICTION_RE = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
# tmux key names (and modifier combinations): what a keystrokes item sends that is not typed text
_KEY_NAME_RE = re.compile(
    r"^(?:[CMS]-)+\S+$|^(?:Enter|Tab|BTab|Escape|Space|BSpace|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PPage|NPage|IC|DC|F\d{1,2})$"
)


# The system prompt's sections around the initial state, which `record_previous_observation` reads back.
_INITIAL_STATE = "## Initial state\nThe environment's observation before the first action:\n\n"
_EXAMPLES = "\n\n## Examples of real turns in this environment\n"
_HOW_TO_ANSWER = "## How to answer\n"


def _domain_prompt(domain: str) -> DomainPrompt:
    record = find_record(domain)
    if record is not None:
        return record.prompt
    return DomainPrompt(
        title=f"a {domain} environment",
        environment="An agent environment that answers each action with an observation.",
        actions="The actions shown in the turns.",
    )


def _compact(schema: dict[str, Any]) -> str:
    # Keys sorted as the record stores them (schemas.codec), so a prompt made from a trajectory in
    # memory equals the one made after it was written and read back; compact, so a schema is a line.
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def tools_text(tools: Sequence[ToolDefinition]) -> str:
    """The tool definitions as the system prompt lists them, in the order the environment offered
    them: per tool a `### name` heading, its description, and its input (and output) JSON Schema as
    compact JSON. Empty when there are none."""
    blocks = []
    for tool in tools:
        lines = [f"### {tool.name}"]
        if tool.description.strip():
            lines.append(tool.description.strip())
        lines.append(f"Input schema: {_compact(tool.input_schema or {'type': 'object'})}")
        if tool.output_schema is not None:
            lines.append(f"Output schema: {_compact(tool.output_schema)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def system_prompt(
    domain: str,
    initial_observation: Observation,
    demonstrations: Sequence[tuple[str, str]] = (),
    tools: Sequence[ToolDefinition] = (),
) -> str:
    """The world-model system prompt; `demonstrations` are (action turn text, observation turn text),
    `tools` the environment's tool definitions (a `## Tools` section, where there are any)."""
    d = _domain_prompt(domain)
    parts = [
        f"You are a world model of {d.title}: you simulate how this environment answers an agent's actions.",
        f"## Environment\n{d.environment}",
        f"## Action space\n{d.actions}",
    ]
    if tools:
        parts.append(
            "## Tools\nThe tools this environment offered at the start of the episode, in its order. An "
            "action calls one by name; a call to a tool not listed here, or with arguments its input schema "
            f"does not allow, is answered as the real environment answers it.\n\n{tools_text(tools)}"
        )
    parts.append(_INITIAL_STATE + initial_observation.text)
    if demonstrations:
        shown = "\n\n".join(f"{a}\n\n{o}" for a, o in demonstrations)
        parts.append(f"{_EXAMPLES.lstrip()}{shown}")
    parts.append(
        f"{_HOW_TO_ANSWER}Each user message is the agent's next action, headed `### Turn k`. Predict the "
        "observation the real environment returns after it, consistent with the initial state and every "
        "earlier turn: reproduce deterministic content exactly, keep pre-existing content plausible, and "
        "give runtime values (times, process ids) a valid form. Reason briefly about the action's effect "
        f"first, then write the complete observation between {OPEN_TAG} and {CLOSE_TAG}, with nothing after."
    )
    return "\n\n".join(parts)


def trajectory_system_prompt(trajectory: Trajectory, demonstrations: Sequence[tuple[str, str]] = ()) -> str:
    """The system prompt of every turn of `trajectory`: its domain, tools and initial state."""
    return system_prompt(
        trajectory.domain, trajectory.initial_observation, demonstrations, trajectory.environment.tools
    )


def action_turn_text(k: int, action: Action) -> str:
    return f"### Turn {k}\n\n**Action:**\n{action.text}"


def observation_turn_text(obs: Observation) -> str:
    return f"{OBSERVATION_HEADER}{obs.text}"


def target_text(obs: Observation, reasoning: str = "", *, body: str | None = None) -> str:
    """The answer a world model is trained to give: optional reasoning, then the tagged observation.
    `body`: what goes between the tags instead of the observation's text (an edit script, see
    `turn_target`)."""
    thought = f"<think>\n{reasoning}\n</think>\n\n" if reasoning else ""
    return f"{thought}{OPEN_TAG}\n{obs.text if body is None else body}\n{CLOSE_TAG}"


def previous_observation(trajectory: Trajectory, turn_idx: int) -> Observation:
    """The observation before turn `turn_idx` (1-based): the one an edit script of that turn edits."""
    return trajectory.steps[turn_idx - 2].observation if turn_idx > 1 else trajectory.initial_observation


def turn_target(trajectory: Trajectory, turn_idx: int, form: str = "full", reasoning: str = "") -> str:
    """The answer for turn `turn_idx` in target form `form` (`schemas.edit_script.TARGET_FORMS`): the
    tagged observation, or, for "delta", the same tags around `edit_script.diff` against the previous
    observation (which is the whole observation again wherever that is shorter)."""
    obs = trajectory.steps[turn_idx - 1].observation
    if form not in TARGET_FORMS:
        raise ValueError(f"unknown target form {form!r}; choose from {TARGET_FORMS}")
    if form == "full":
        return target_text(obs, reasoning)
    body = diff(previous_observation(trajectory, turn_idx).text, obs.text, trajectory.domain)
    return target_text(obs, reasoning, body=body)


def agentworldbench_record(
    trajectory: Trajectory,
    turn_idx: int,
    demonstrations: Sequence[tuple[str, str]] = (),
    *,
    system_str: str | None = None,
) -> dict[str, Any]:
    """The AgentWorldBench sample for turn `turn_idx` (1-based): exactly `AGENTWORLDBENCH_FIELDS`.
    `system_str`: the trajectory's `trajectory_system_prompt`, when the caller made it once for all
    its turns (it is the same for every turn)."""
    steps = trajectory.steps
    if not 1 <= turn_idx <= len(steps):
        raise ValueError(f"turn_idx {turn_idx} outside 1..{len(steps)}")
    prompt = [action_turn_text(k, s.action) for k, s in enumerate(steps[:turn_idx], start=1)]
    return {
        "task": trajectory.domain,
        "id": f"{trajectory.trajectory_id}:{turn_idx}",
        "prompt": prompt,
        "response": [observation_turn_text(s.observation) for s in steps[:turn_idx]],
        "current_prompt": prompt[-1],
        "system_str": system_str
        if system_str is not None
        else trajectory_system_prompt(trajectory, demonstrations),
        "turn_idx": turn_idx,
        "total_turns": len(steps),
    }


class RecordError(ValueError):
    """An AgentWorldBench record whose fields do not fit together; the message says which and how."""


def _turn_idx(record: dict[str, Any]) -> int:
    """The record's 1-based turn, checked against its lists; raises RecordError when they disagree."""
    turn_idx, total = record.get("turn_idx"), record.get("total_turns")
    if not isinstance(turn_idx, int) or isinstance(turn_idx, bool):
        raise RecordError(f"turn_idx must be an integer, got {turn_idx!r}")
    if not isinstance(total, int) or isinstance(total, bool) or not 1 <= turn_idx <= total:
        raise RecordError(f"turn_idx {turn_idx} must lie in 1..total_turns ({total!r})")
    for field in ("prompt", "response"):
        turns = record.get(field)
        if not isinstance(turns, list) or len(turns) < turn_idx:
            have = len(turns) if isinstance(turns, list) else type(turns).__name__
            raise RecordError(f"{field} must be a list of at least turn_idx={turn_idx} turns, has {have}")
    return turn_idx


def check_record(record: dict[str, Any]) -> None:
    """Raise RecordError unless `record` has every AgentWorldBench field and lists that reach turn_idx."""
    missing = [f for f in AGENTWORLDBENCH_FIELDS if f not in record]
    if missing:
        raise RecordError(f"not an AgentWorldBench record, missing {missing}")
    _turn_idx(record)


def record_context(record: dict[str, Any]) -> tuple[list[tuple[str, str]], str]:
    """The earlier turns (action, observation) and the current action of `record`, the public evaluation's
    way: everything is indexed by `turn_idx`, so turns after it, the reference among them, never appear
    even when the lists hold the whole trajectory; an empty `current_prompt` means `prompt[turn_idx-1]`."""
    k = _turn_idx(record)
    history = list(zip(record["prompt"][: k - 1], record["response"][: k - 1], strict=True))
    return history, record["current_prompt"] or record["prompt"][k - 1]


def record_previous_observation(record: dict[str, Any]) -> str:
    """The observation before `record`'s current turn, the one a delta answer edits: the previous
    response without its marker, or for the first turn the initial state of a system prompt made by
    `system_prompt` ("" for another one, such as a public file's)."""
    k = _turn_idx(record)
    if k > 1:
        return strip_observation_marker(record["response"][k - 2])
    system = record["system_str"]
    start = system.find(_INITIAL_STATE)
    if start < 0:
        return ""
    start += len(_INITIAL_STATE)
    ends = [at for marker in (_EXAMPLES, f"\n\n{_HOW_TO_ANSWER}") if (at := system.rfind(marker)) >= start]
    return system[start : min(ends)] if ends else system[start:]


def reference_observation(record: dict[str, Any]) -> str:
    """The real observation the prediction for `record` is scored against: `response[turn_idx-1]`,
    without its `**Environment Observation:**` marker."""
    return strip_observation_marker(record["response"][_turn_idx(record) - 1])


def record_messages(
    record: dict[str, Any], *, fits: Callable[[list[dict]], bool] | None = None
) -> list[dict]:
    """The chat messages the AgentWorldBench evaluation sends for `record` (see `record_context`).

    When `fits` rejects the messages, the oldest turns go first; the system prompt (which holds the
    initial state) and the current action are always kept, so the result may still not fit.
    """
    turns, action = record_context(record)
    history = [
        message
        for prompt, response in turns
        for message in ({"role": "user", "content": prompt}, {"role": "assistant", "content": response})
    ]
    system = [{"role": "system", "content": record["system_str"]}]
    current = [{"role": "user", "content": action}]
    start = 0
    if fits is not None:
        while start < len(history) and not fits(system + history[start:] + current):
            start += 2
    return system + history[start:] + current


def split_chat(messages: Sequence[dict]) -> tuple[str, list[tuple[str, str]], str] | None:
    """The system prompt, earlier (action, observation) turns and current action of messages shaped as
    `record_messages` builds them (system, (user, assistant)*, user); None for any other shape."""
    roles = [m.get("role") for m in messages]
    pairs = (len(roles) - 2) // 2
    if len(roles) < 2 or roles != ["system"] + ["user", "assistant"] * pairs + ["user"]:
        return None
    contents = [m["content"] for m in messages]
    return contents[0], list(zip(contents[1:-1:2], contents[2:-1:2], strict=True)), contents[-1]


def chat_messages(
    trajectory: Trajectory, turn_idx: int, *, fits: Callable[[list[dict]], bool] | None = None
) -> list[dict]:
    """The prompt messages for turn `turn_idx` (1-based), built from the AgentWorldBench record so the
    two layouts are the same by construction."""
    return record_messages(agentworldbench_record(trajectory, turn_idx), fits=fits)


def cpt_document(trajectory: Trajectory) -> str:
    """The whole trajectory as one pre-training document, in the same turn markup."""
    d = _domain_prompt(trajectory.domain)
    head = f"# {d.title[0].upper()}{d.title[1:]}\n\n"
    if trajectory.environment.tools:
        head += f"**Tools:**\n{tools_text(trajectory.environment.tools)}\n\n"
    parts = [f"{head}**Initial State:**\n{trajectory.initial_observation.text}"]
    for k, step in enumerate(trajectory.steps, start=1):
        parts.append(f"{action_turn_text(k, step.action)}\n\n{observation_turn_text(step.observation)}")
    return "\n\n".join(parts)


def strip_think(text: str) -> str:
    """`text` without reasoning blocks."""
    return THINK_RE.sub("", text)


def _unwrap(block: str) -> str:
    # target_text wraps the observation in one newline on each side
    block = block[1:] if block.startswith("\n") else block
    return block[:-1] if block.endswith("\n") else block


def extract_prediction(text: str) -> str | None:
    """The observation a model predicted: the last closed tagged block outside <think> blocks."""
    blocks = _PREDICTION_RE.findall(strip_think(text))
    return _unwrap(blocks[-1]) if blocks else None


@dataclass(frozen=True)
class Prediction:
    """What the public evaluation scores in a reply: `content`, and whether it came in the tags."""

    content: str
    tagged: bool


def parse_prediction(reply: str) -> Prediction:
    """The public evaluator's reading of a reply: without <think> blocks, the last tagged block; with
    no tag, the cleaned reply without a leading `**Environment Observation:**` marker."""
    tagged = extract_prediction(reply)
    if tagged is not None:
        return Prediction(tagged, True)
    return Prediction(strip_observation_marker(strip_think(reply).strip()).strip("\n"), False)


def strip_observation_marker(text: str) -> str:
    """`text` without a leading `**Environment Observation:**` marker (and the newline after it)."""
    return _OBSERVATION_MARKER.sub("", text, count=1)


def _typed_text(action: Action) -> str:
    if action.kind == "keystrokes":
        items = action.arguments.get("keystrokes") or []
        return "".join(
            it.get("keystrokes", "")
            for it in items
            if isinstance(it, dict) and not _KEY_NAME_RE.match(it.get("keystrokes", ""))
        )
    if action.kind == "command":  # the terminal's one-line command
        return str(action.arguments.get("command", action.text))
    # Other kinds' "command" argument is no typed text (a SWE edit's command is "str_replace", "create").
    return action.text


def is_echo_turn(step: Step) -> bool:
    """True when the observation only echoes the action: typed text shown with no new output after it,
    or a command followed by nothing but the same prompt again. Such turns teach little."""
    text = step.observation.text.rstrip()
    if text == step.action.text.strip():
        return True
    typed = _typed_text(step.action).strip()
    if not typed:
        return False
    at = text.rfind(typed)
    if at < 0:
        return False
    prompt = text[text.rfind("\n", 0, at) + 1 : at].strip()
    tail = text[at + len(typed) :].strip()
    return tail == "" or (prompt != "" and tail == prompt)
