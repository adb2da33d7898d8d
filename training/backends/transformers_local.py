"""A world model run in-process with `transformers`: a checkpoint directory, a named config or a model.

The prompt is the tokenizer's own chat template with the generation prompt added, so a checkpoint trained
on our SFT samples is queried exactly as it was trained. `generate` is not safe to overlap on one model,
so a lock serialises calls; fidelity runs that want concurrency use an HTTP server (vLLM) instead.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from schemas.render import record_messages
from training.backends.base import GenerationConfig, WorldModelBackend


def _as_record(messages: list[dict]) -> dict[str, Any] | None:
    """The AgentWorldBench record behind render-shaped messages (system, (user, assistant)*, user)."""
    roles = [m.get("role") for m in messages]
    pairs = (len(roles) - 2) // 2
    if len(roles) < 2 or roles != ["system"] + ["user", "assistant"] * pairs + ["user"]:
        return None
    prompts = [m["content"] for m in messages[1::2]]
    responses = [m["content"] for m in messages[2::2]]
    # record_messages ignores the current turn's response; it only has to be there for the zip.
    return {
        "system_str": messages[0]["content"],
        "prompt": prompts,
        "response": [*responses, ""],
        "current_prompt": prompts[-1],
    }


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    """The text before the first stop string, as OpenAI-compatible servers return it."""
    ends = [i for s in stop if s and (i := text.find(s)) >= 0]
    return text[: min(ends)] if ends else text


def _resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        # bf16 halves memory and is what GPUs are fast at; CPUs are faster and exact in fp32.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    found = getattr(torch, dtype, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32' or 'bfloat16'")
    return found


def _load(
    spec: str, tokenizer: PreTrainedTokenizerBase | None, dtype: torch.dtype, device: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from training.models import build_model
    from training.tokenizer import has_tokenizer, load_tokenizer

    model = build_model(spec, dtype=dtype, device=device)
    if tokenizer is None:
        tokenizer = load_tokenizer(spec if os.path.isdir(spec) and has_tokenizer(spec) else None)
    return model, tokenizer


class TransformersBackend(WorldModelBackend):
    name = "transformers"

    def __init__(
        self,
        model_or_path: str | os.PathLike[str] | PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        device: str = "cpu",
        dtype: str | torch.dtype | None = None,
        max_context: int | None = None,
    ) -> None:
        self.device = device
        self.dtype = _resolve_dtype(dtype, device)
        if isinstance(model_or_path, str | os.PathLike):
            self.source = os.fspath(model_or_path)
            model, tokenizer = _load(self.source, tokenizer, self.dtype, device)
        else:
            model = model_or_path
            self.source = getattr(model.config, "name_or_path", "") or type(model).__name__
            if tokenizer is None:
                from training.tokenizer import load_tokenizer

                tokenizer = load_tokenizer()
        if tokenizer.chat_template is None:
            raise ValueError(
                "the tokenizer has no chat template; a world model is queried with chat messages"
            )
        self.model = model.to(device=device, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.max_context = max_context
        self._lock = threading.Lock()
        pad = tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else tokenizer.eos_token_id

    def _prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # The template already holds every special token the model expects.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def count_tokens(self, messages: list[dict]) -> int:
        """Prompt tokens of `messages` under the chat template, generation prompt included."""
        return len(self._prompt_ids(messages))

    def truncate(self, messages: list[dict], max_new_tokens: int) -> list[dict]:
        """Drop the oldest turns until prompt + reply fit `max_context`; system and current action stay."""
        if self.max_context is None:
            return messages
        budget = self.max_context - max_new_tokens
        record = _as_record(messages)
        if record is None or self.count_tokens(messages) <= budget:
            return messages
        return record_messages(record, fits=lambda m: self.count_tokens(m) <= budget)

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        with self._lock, torch.inference_mode():
            ids = self._prompt_ids(self.truncate(messages, config.max_new_tokens))
            input_ids = torch.tensor([ids], device=self.device)
            sampling: dict[str, Any] = {"do_sample": config.temperature > 0}
            if config.temperature > 0:
                # Under the lock, seeding the global generator makes a sampled reply reproducible.
                torch.manual_seed(config.seed)
                sampling.update(temperature=config.temperature, top_p=config.top_p)
            else:
                # Override sampling defaults a checkpoint's generation_config may carry.
                sampling.update(temperature=None, top_p=None, top_k=None)
            if config.stop:
                sampling.update(stop_strings=list(config.stop), tokenizer=self.tokenizer)
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=config.max_new_tokens,
                # Training configs turn the KV cache off; without it each new token recomputes the prompt.
                use_cache=True,
                pad_token_id=self._pad_id,
                eos_token_id=self.tokenizer.eos_token_id,
                **sampling,
            )
        # <think> is an ordinary added token in Qwen3, so skipping special tokens keeps the reasoning.
        text = self.tokenizer.decode(output[0, len(ids) :], skip_special_tokens=True)
        return cut_at_stop(text, config.stop)

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model": self.source,
            "architecture": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "device": self.device,
            "dtype": str(self.dtype).removeprefix("torch."),
            "max_context": self.max_context,
        }

    def close(self) -> None:
        # Drop the reference so the weights can be freed; the backend is unusable afterwards.
        self.model = None  # type: ignore[assignment]
