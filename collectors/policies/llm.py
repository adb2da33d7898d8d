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
from collections import deque
from typing import Any

import openai

from collectors.policies.base import Policy, invalid_action
from sandboxes.base import InvalidActionError
from sandboxes.terminal.actions import parse_action
from schemas.records import Action, Observation, Task

SYSTEM_PROMPT = """You are an agent operating a Linux terminal (a bash shell in tmux) to complete a task.

Task: {instruction}

Each turn you see the current terminal screen. Reply with exactly one JSON object and nothing else:
- run a one-line shell command and wait for it to finish (timeout in seconds is optional):
  {{"command": "ls -la"}} or {{"command": "make", "timeout": 120}}
- send raw keys (tmux key names such as C-c, Enter, Escape), each followed by a pause in seconds:
  {{"keystrokes": [{{"keystrokes": "C-c", "duration": 0.5}}]}}
- stop when the task is finished: {{"done": true}}"""

_ACTION_KEYS = ("command", "keystrokes", "done")


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


def parse_reply(reply: str) -> Action | None:
    """Turn a model reply into an Action, None for `done`, or an invalid Action with the reason."""
    obj = first_json_object(reply)
    if obj is None:
        return invalid_action(reply, "no JSON object in reply")
    present = [key for key in _ACTION_KEYS if key in obj]
    if len(present) != 1:
        return invalid_action(reply, f"expected exactly one of {list(_ACTION_KEYS)}, got keys {sorted(obj)}")
    key = present[0]
    if key == "done":
        return None if obj[key] is True else invalid_action(reply, f"'done' must be true, got {obj[key]!r}")
    # Keys beside the action (a "thought", say) are tolerated; only the action's own fields are checked.
    arguments = {key: obj[key]}
    if key == "command" and "timeout" in obj:
        arguments["timeout"] = obj["timeout"]
    try:
        return parse_action(key, arguments)
    except InvalidActionError as exc:
        return invalid_action(reply, str(exc))


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
    ) -> None:
        self.base_url = base_url
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
        self._system = self.system_prompt.format(instruction=task.instruction or "(no instruction given)")
        self._history.clear()
        self._rng = rng

    def act(self, observation: Observation) -> Action | None:
        screen = f"Current screen:\n{observation.text}"
        reply = self._complete(screen)
        self._history.append((screen, reply))
        return parse_reply(reply)

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
