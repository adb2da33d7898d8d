"""What an LLM agent is shown and how its reply becomes an action: one format for every agent.

The collectors' LLM policy (collectors/policies/llm.py, over a chat endpoint) and the agent trained in
the simulator (training/agent_rl, a model in the training process) both render the system prompt and
each screen here and parse replies here, so an agent trained against the world model meets the real
sandbox in exactly the format it was trained in. It lives in `sandboxes` because both layers may
import it (DESIGN 4) and it needs only the domain registry and the records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sandboxes.base import InvalidActionError
from sandboxes.domains import KNOWN_DOMAINS, DomainSpec, domain_spec
from schemas.invalid_actions import invalid_action
from schemas.records import Action, Observation, Task, ToolDefinition
from schemas.render import tools_text

# The domain's action space says what the agent sees and how to reply (one JSON object per turn).
SYSTEM_PROMPT = """You are an agent operating {environment} to complete a task.

Task: {instruction}

{action_space}"""

DEFAULT_DOMAIN = "terminal"
DONE = "done"
ACTION = "action"
ACTION_TYPE = "action_type"  # AndroidWorld's name for it, which the Android action space shows
# Commentary models put beside their action; no domain has an argument of these names.
_COMMENTARY = ("thought", "thoughts", "reasoning", "explanation", "comment", "note", "plan")
# The first key of each example object in an action space, skipping objects nested in a list or
# another object (after `[`, `{`, `,` or `:`): `{"command": ...}` shows a kind-keyed reply,
# `{"action": "click", ...}` the generic one.
_EXAMPLE_KEY = re.compile(r'(?<![\[{,:]\s)(?<![\[{,:])\{"(\w+)"\s*:')


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first balanced JSON object in `text`, wherever it sits (fence, prose around it)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    return None


def keyed_kinds(action_space: str) -> list[str]:
    """The kinds an action space shows in kind-keyed form (`{"command": "ls"}`), in order, then `done`.

    Read from the examples the model is shown, so the parser accepts exactly the shapes the prompt
    teaches: a domain whose examples all read `{"action": ...}` has none.
    """
    found = [k for k in dict.fromkeys(_EXAMPLE_KEY.findall(action_space)) if k not in (ACTION, DONE)]
    return [*found, DONE]


def parse_reply(reply: str, spec: DomainSpec | None = None) -> Action | None:
    """Turn a model reply into an Action, None for `done`, or an invalid Action with the reason.

    A reply is `{"action": "<kind>", ...arguments}` (`"action_type"`, AndroidWorld's name, is taken
    too), `{"done": true}`, or, where the domain's action
    space shows it, the kind-keyed form `{"<kind>": <its main argument>, ...}` (the terminal's).
    Keys beside the action (a "thought", say) are tolerated.
    """
    spec = spec or domain_spec(DEFAULT_DOMAIN)
    obj = first_json_object(reply)
    if obj is None:
        return invalid_action(reply, "no JSON object in reply")
    named = [key for key in (ACTION, ACTION_TYPE) if key in obj]
    if len(named) > 1:
        return invalid_action(reply, f"expected 'action' or 'action_type', got both: keys {sorted(obj)}")
    if named:
        (key,) = named
        if DONE in obj:
            return invalid_action(reply, f"expected an action or 'done', got both: keys {sorted(obj)}")
        kind = obj[key]
        if not isinstance(kind, str):
            return invalid_action(reply, f"'{key}' must be the name of an action kind, got {kind!r}")
        arguments = {k: v for k, v in obj.items() if k != key and k not in _COMMENTARY}
        return _parsed(reply, spec, kind, arguments)
    keys = keyed_kinds(spec.action_space)
    present = [key for key in keys if key in obj]
    if len(present) != 1:
        expected = keys if len(keys) > 1 else [ACTION, DONE]
        return invalid_action(reply, f"expected exactly one of {expected}, got keys {sorted(obj)}")
    kind = present[0]
    if kind == DONE:
        return None if obj[kind] is True else invalid_action(reply, f"'done' must be true, got {obj[kind]!r}")
    arguments = {k: v for k, v in obj.items() if k not in keys and k not in _COMMENTARY}
    return _parsed(reply, spec, kind, {kind: obj[kind], **arguments})


def _parsed(reply: str, spec: DomainSpec, kind: str, arguments: dict[str, Any]) -> Action:
    try:
        return spec.parse_action(kind, arguments)
    except InvalidActionError as exc:
        return invalid_action(reply, str(exc))


def with_done(action_space: str) -> str:
    """The action space with the way to end the episode, which every domain's agent needs."""
    if f'{{"{DONE}": true}}' in action_space:
        return action_space
    return f'{action_space}\n- stop when the task is finished: {{"{DONE}": true}}'


def with_tools(action_space: str, tools: Sequence[ToolDefinition]) -> str:
    """The environment's tools (name, description, input schema), listed before the action space."""
    if not tools:
        return action_space
    return f"Tools:\n\n{tools_text(tools)}\n\n{action_space}"


def domain_of(observation: Observation) -> str:
    """The domain whose sandboxes emit `observation.format`; the terminal when none does. Specs are
    imported in order and the first match stops the search, so a terminal run imports no browser."""
    for name in KNOWN_DOMAINS:
        try:
            if domain_spec(name).observation_format == observation.format:
                return name
        except ImportError:  # a domain whose optional dependencies are not installed
            continue
    return DEFAULT_DOMAIN


def system_prompt(
    task: Task, spec: DomainSpec, tools: Sequence[ToolDefinition] = (), template: str = SYSTEM_PROMPT
) -> str:
    """The agent's system prompt for `task` in `spec`'s domain: the task, the tools, the action space."""
    return template.format(
        instruction=task.instruction or "(no instruction given)",
        environment=spec.prompt.agent_title,
        action_space=with_tools(with_done(spec.action_space), tools),
    )


def screen_message(observation: Observation) -> str:
    """The user turn that shows the agent one observation."""
    return f"Current screen:\n{observation.text}"
