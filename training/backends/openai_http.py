"""A world model behind any OpenAI-compatible chat endpoint: vLLM, SGLang, llama.cpp server, hosted APIs.

vLLM and SGLang can run a reasoning parser that moves the model's `<think>` block out of `content` into a
separate `reasoning_content` (newer vLLM: `reasoning`) field. With `reasoning="auto"` that text is put
back in front of the content as a `<think>...</think>` block, so `render.extract_prediction` sees the
same reply whether the parser is on or off: the tagged observation outside the reasoning counts, a tag
that only appears inside the reasoning does not.
"""

from __future__ import annotations

from typing import Any, Literal

import openai

from training.backends.base import GenerationConfig, WorldModelBackend, cut_at_stop

REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_of(message: Any) -> str:
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = getattr(message, name, None) or extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def merge_reasoning(content: str | None, reasoning: str) -> str:
    """The reply as the model wrote it: the parser's reasoning back in a <think> block, then the content."""
    content = content or ""
    if not reasoning or "<think>" in content:
        return content
    return f"<think>\n{reasoning.strip()}\n</think>\n\n{content.lstrip()}"


class OpenAIBackend(WorldModelBackend):
    """Thread-safe: the SDK client keeps one connection pool that concurrent requests share."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 2,
        reasoning: Literal["auto", "drop"] = "auto",
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if reasoning not in ("auto", "drop"):
            raise ValueError(f"reasoning must be 'auto' or 'drop', got {reasoning!r}")
        self.base_url = base_url.rstrip("/")
        # Local servers ignore the key, but the SDK refuses to build a client without one.
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=max_retries
        )
        self.model = model or self._served_model()
        self.reasoning = reasoning
        self.timeout = timeout
        self.max_retries = max_retries
        # e.g. {"chat_template_kwargs": {"enable_thinking": False}} for vLLM / SGLang
        self.extra_body = dict(extra_body or {})

    def _served_model(self) -> str:
        served = [m.id for m in self._client.models.list()]
        if not served:
            raise RuntimeError(f"{self.base_url} serves no model; pass model= explicitly")
        return served[0]

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        response = self._client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=config.seed,
            # A server drops the stop string it ended on; to keep it, the reply is cut here instead.
            stop=None if config.include_stop else list(config.stop) or None,
            extra_body=self.extra_body or None,
        )
        if not response.choices:
            raise RuntimeError(f"{self.base_url} returned no choices for model {self.model!r}")
        message = response.choices[0].message
        reasoning = _reasoning_of(message) if self.reasoning == "auto" else ""
        reply = merge_reasoning(message.content, reasoning)
        return cut_at_stop(reply, config.stop, keep=True) if config.include_stop else reply

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "reasoning": self.reasoning,
            "extra_body": self.extra_body,
        }

    def close(self) -> None:
        self._client.close()
