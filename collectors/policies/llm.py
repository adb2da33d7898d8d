"""An agent behind any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, hosted).

The model is asked for one JSON object per turn. Replies that do not parse, or parse to the wrong
shape, become `invalid` actions: small or badly prompted models produce them often, and the
runner records them as steps, which is itself useful data. Transport failures are different:
after the SDK's retries they raise, because no action was ever decided.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import openai

from collectors.policies.base import Policy, invalid_action
from sandboxes.base import InvalidActionError
from sandboxes.domains import KNOWN_DOMAINS, DomainSpec, domain_spec
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


def _with_done(action_space: str) -> str:
    """The action space with the way to end the episode, which every domain's agent needs."""
    if f'{{"{DONE}": true}}' in action_space:
        return action_space
    return f'{action_space}\n- stop when the task is finished: {{"{DONE}": true}}'


def _with_tools(action_space: str, tools: Sequence[ToolDefinition]) -> str:
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


class LLMPolicy(Policy):
    name = "llm"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 256,
        timeout: float = 60.0,
        max_history: int = 8,
        max_retries: int = 2,
        system_prompt: str = SYSTEM_PROMPT,
        json_mode: bool = False,
        domain: str | None = None,
        tool_lookup: Callable[[Task], Sequence[ToolDefinition]] | None = None,
    ) -> None:
        """`domain` fixes the action space and parser; by default each episode takes them from the
        domain whose sandboxes emit its first observation's format (the terminal when none does).
        `tool_lookup` gives the tools the episode's environment offers (an MCP server's, listed by the
        collector before the fleet starts): the system prompt shows them before the action space."""
        self.base_url = base_url
        self.tool_lookup = tool_lookup
        self.domain = domain
        self._spec = domain_spec(domain or DEFAULT_DOMAIN)
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt
        self.json_mode = json_mode
        # Local servers (vLLM, llama.cpp) ignore the key, but the SDK refuses to start without one.
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        # The SDK retries connection errors, 408/409/429 and 5xx with exponential backoff and jitter.
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)
        self._max_retries = max_retries
        self._history: deque[tuple[str, str]] = deque(maxlen=max_history)
        self._system = ""
        self._rng = random.Random(0)

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        self._spec = domain_spec(self.domain or domain_of(observation))
        self._system = self.system_prompt.format(
            instruction=task.instruction or "(no instruction given)",
            environment=self._spec.prompt.agent_title,
            action_space=_with_tools(
                _with_done(self._spec.action_space), self.tool_lookup(task) if self.tool_lookup else ()
            ),
        )
        self._history.clear()
        self._rng = rng

    def act(self, observation: Observation) -> Action | None:
        screen = f"Current screen:\n{observation.text}"
        reply = self._complete(screen)
        self._history.append((screen, reply))
        return parse_reply(reply, self._spec)

    def messages(self, screen: str) -> list[dict[str, str]]:
        """The chat sent for `screen`: system prompt, the last `max_history` turns, then the screen."""
        messages = [{"role": "system", "content": self._system}]
        for user, assistant in self._history:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": screen})
        return messages

    def _complete(self, screen: str) -> str:
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=self.messages(screen),  # type: ignore[arg-type]
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                # Seeded from the episode rng so a rerun of a seeded collection asks the same questions.
                seed=self._rng.randrange(2**31),
                # Constrained decoding (OpenAI, vLLM, SGLang, llama.cpp all accept it): small models
                # that drift into prose or code then still answer with an object.
                response_format={"type": "json_object"} if self.json_mode else openai.omit,
            )
        except openai.APIError as exc:
            raise RuntimeError(
                f"LLM endpoint {self.base_url} (model {self.model!r}) failed "
                f"(transient errors retried {self._max_retries} times): {type(exc).__name__}: {exc}"
            ) from exc
        if not response.choices:
            raise RuntimeError(f"LLM endpoint {self.base_url} returned no choices")
        return response.choices[0].message.content or ""

    def config(self) -> dict:
        return {
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "json_mode": self.json_mode,
        }
