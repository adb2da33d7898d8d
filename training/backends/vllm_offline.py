"""vLLM's offline engine in-process: the fastest way to run a checkpoint on a GPU without a server.

vLLM is CUDA-only and not a dependency: the import happens when the backend is built, and a machine
without it gets an error that says what to do instead.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from training.backends.base import GenerationConfig, WorldModelBackend

VLLM_MISSING = (
    "the vLLM offline backend needs the `vllm` package, which runs on CUDA GPUs only and is not "
    "installed here ({error}). On a GPU machine: `pip install vllm`. Elsewhere, serve the checkpoint "
    "with any OpenAI-compatible server (e.g. `vllm serve CKPT` on a GPU host) and pass its http:// URL, "
    "or pass the checkpoint directory itself to use the local transformers backend."
)


def import_vllm() -> Any:
    try:
        return importlib.import_module("vllm")
    except ImportError as exc:
        raise ImportError(VLLM_MISSING.format(error=exc)) from exc


class VLLMOfflineBackend(WorldModelBackend):
    name = "vllm"

    def __init__(self, model_path: str, **engine_kwargs: Any) -> None:
        vllm = import_vllm()
        self._vllm = vllm
        self.model_path = model_path
        self.engine_kwargs = dict(engine_kwargs)
        self._llm = vllm.LLM(model=model_path, **engine_kwargs)
        # LLM.chat is not re-entrant; the engine batches internally, so callers gain little by overlapping.
        self._lock = threading.Lock()

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        params = self._vllm.SamplingParams(
            max_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=config.seed,
            stop=list(config.stop) or None,
            include_stop_str_in_output=config.include_stop,
        )
        with self._lock:
            outputs = self._llm.chat(messages, params, use_tqdm=False)
        return outputs[0].outputs[0].text

    def describe(self) -> dict:
        shown = {k: v for k, v in self.engine_kwargs.items() if isinstance(v, str | int | float | bool)}
        return {"backend": self.name, "model": self.model_path, "engine": shown}

    def close(self) -> None:
        self._llm = None
