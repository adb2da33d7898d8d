"""World-model backends behind one contract (`base.WorldModelBackend`), chosen by a spec string.

make_backend("http://127.0.0.1:8000/v1", model="ckpt")  -> any OpenAI-compatible server
make_backend("vllm:/ckpts/sft")                        -> vLLM's offline engine (needs vllm)
make_backend("model.gguf") / make_backend("llama.cpp:smollm2-135m-instruct")  -> llama.cpp in this process
make_backend("/ckpts/sft") / make_backend("qwen3-tiny")  -> transformers in this process
make_backend("smollm2-135m-instruct") / make_backend("transformers:base.gguf")  -> the same, GGUF converted
    once to a transformers checkpoint (for what needs transformers' weights, e.g. training from it)
"""

from __future__ import annotations

from typing import Any

from training.backends.base import GenerationConfig, WorldModelBackend

__all__ = ["GenerationConfig", "WorldModelBackend", "make_backend"]

VLLM_PREFIX = "vllm:"
LLAMA_CPP_PREFIX = "llama.cpp:"
TRANSFORMERS_PREFIX = "transformers:"


def make_backend(spec: str, **opts: Any) -> WorldModelBackend:
    """A backend from a URL, `vllm:PATH`, a GGUF file (llama.cpp), a checkpoint directory or built-in base
    name (transformers), or a named from-scratch shape; `llama.cpp:` / `transformers:` pick the engine."""
    if spec.startswith(("http://", "https://")):
        from training.backends.openai_http import OpenAIBackend

        return OpenAIBackend(spec, **opts)
    if spec.startswith(VLLM_PREFIX):
        path = spec[len(VLLM_PREFIX) :]
        if not path:
            raise ValueError("vllm: needs a checkpoint path, e.g. vllm:/ckpts/sft")
        from training.backends.vllm_offline import VLLMOfflineBackend

        return VLLMOfflineBackend(path, **opts)
    if spec.startswith(LLAMA_CPP_PREFIX) or (
        spec.endswith(".gguf") and not spec.startswith(TRANSFORMERS_PREFIX)
    ):
        from training.backends.llama_cpp_local import LlamaCppBackend

        return LlamaCppBackend(spec.removeprefix(LLAMA_CPP_PREFIX), **opts)
    from training.backends.transformers_local import TransformersBackend

    return TransformersBackend(spec.removeprefix(TRANSFORMERS_PREFIX), **opts)
