"""World-model backends behind one contract (`base.WorldModelBackend`), chosen by a spec string.

make_backend("http://127.0.0.1:8000/v1", model="ckpt")  -> any OpenAI-compatible server
make_backend("vllm:/ckpts/sft")                        -> vLLM's offline engine (needs vllm)
make_backend("/ckpts/sft") / make_backend("qwen3-tiny")  -> transformers in this process
make_backend("smollm2-135m-instruct") / make_backend("base.gguf")  -> the same, GGUF converted once
"""

from __future__ import annotations

from typing import Any

from training.backends.base import GenerationConfig, WorldModelBackend

__all__ = ["GenerationConfig", "WorldModelBackend", "make_backend"]

VLLM_PREFIX = "vllm:"


def make_backend(spec: str, **opts: Any) -> WorldModelBackend:
    """A backend from a URL, `vllm:PATH`, a checkpoint directory, a GGUF file or built-in base name, or a
    named from-scratch shape."""
    if spec.startswith(("http://", "https://")):
        from training.backends.openai_http import OpenAIBackend

        return OpenAIBackend(spec, **opts)
    if spec.startswith(VLLM_PREFIX):
        path = spec[len(VLLM_PREFIX) :]
        if not path:
            raise ValueError("vllm: needs a checkpoint path, e.g. vllm:/ckpts/sft")
        from training.backends.vllm_offline import VLLMOfflineBackend

        return VLLMOfflineBackend(path, **opts)
    from training.backends.transformers_local import TransformersBackend

    return TransformersBackend(spec, **opts)
