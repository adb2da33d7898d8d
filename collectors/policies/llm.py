"""An agent behind any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp server, hosted).

The model is asked for one JSON object per turn. Replies that do not parse, or parse to the wrong
shape, become `invalid` actions: small or badly prompted models produce them often, and the
runner records them as steps, which is itself useful data. Transport failures are different:
after the SDK's retries they raise, because no action was ever decided.
"""

from __future__ import annotations

import os
import random
from collections import deque
from collections.abc import Callable, Sequence

import openai

from collectors.policies.base import Policy
from sandboxes.agent_prompt import (
    ACTION,
    ACTION_TYPE,
    DEFAULT_DOMAIN,
    DONE,
    SYSTEM_PROMPT,
    domain_of,
    first_json_object,
    keyed_kinds,
    parse_reply,
    screen_message,
    system_prompt,
)
from sandboxes.domains import domain_spec
from schemas.records import Action, Observation, Task, ToolDefinition

# The rendering and parsing live in sandboxes/agent_prompt.py, shared with the agent trained in the
# simulator (training/agent_rl); these names stay importable from here.
__all__ = [
    "ACTION",
    "ACTION_TYPE",
    "DEFAULT_DOMAIN",
    "DONE",
    "SYSTEM_PROMPT",
    "LLMPolicy",
    "domain_of",
    "first_json_object",
    "keyed_kinds",
    "parse_reply",
]


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
        tools = self.tool_lookup(task) if self.tool_lookup else ()
        self._system = system_prompt(task, self._spec, tools, self.system_prompt)
        self._history.clear()
        self._rng = rng

    def act(self, observation: Observation) -> Action | None:
        screen = screen_message(observation)
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
