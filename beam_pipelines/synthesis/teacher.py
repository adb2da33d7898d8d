"""The teachers reasoning synthesis asks: any OpenAI-compatible endpoint, or Beam's vLLM model handler.

A teacher answers one chat (the world model's own prompt messages) with one reply. It must be safe to
call from several threads at once: the stage keeps `--synthesis-concurrency` requests in flight.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import openai

from beam_pipelines.synthesis.settings import VLLM_HANDLER_PREFIX, SynthesisConfig

# vLLM and SGLang reasoning parsers move a <think> block out of `content` into one of these fields.
REASONING_FIELDS = ("reasoning_content", "reasoning")


class TeacherError(RuntimeError):
    pass


class Teacher(Protocol):
    def complete(
        self, messages: Sequence[dict], *, seed: int, temperature: float, max_tokens: int
    ) -> str: ...

    def close(self) -> None: ...


def _reply_text(message: Any) -> str:
    """The reply as the model wrote it: a parser's reasoning goes back in front as a <think> block, so
    the selection reads the same text whether the server's reasoning parser is on or off."""
    content = message.content or ""
    if "<think>" in content:
        return content
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        reasoning = extra.get(name) or getattr(message, name, None)
        if isinstance(reasoning, str) and reasoning.strip():
            return f"<think>\n{reasoning.strip()}\n</think>\n\n{content.lstrip()}"
    return content


def _create(client: openai.OpenAI, model: str, messages: Sequence[dict], **sampling: Any) -> str:
    response = client.chat.completions.create(model=model, messages=list(messages), **sampling)  # type: ignore[arg-type]
    if not response.choices:
        raise TeacherError(f"the teacher returned no choices for model {model!r}")
    return _reply_text(response.choices[0].message)


class OpenAITeacher:
    """An OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp's server, a hosted API). The SDK's
    own retry loop (exponential backoff with jitter on timeouts, connection errors, 429 and 5xx) does
    the `retries`; its client shares one connection pool between threads."""

    def __init__(
        self, base_url: str, model: str, *, timeout: float, retries: int, extra_body: dict | None = None
    ) -> None:
        self.model = model
        self._client = openai.OpenAI(base_url=base_url, api_key="EMPTY", timeout=timeout, max_retries=retries)
        self._extra_body = extra_body or None

    def complete(self, messages: Sequence[dict], *, seed: int, temperature: float, max_tokens: int) -> str:
        return _create(
            self._client,
            self.model,
            messages,
            seed=seed,
            temperature=temperature,
            max_tokens=max_tokens,
            extra_body=self._extra_body,
        )

    def close(self) -> None:
        self._client.close()


class VLLMHandlerTeacher(OpenAITeacher):
    """Apache Beam's `VLLMChatModelHandler`: its `load_model` starts a vLLM OpenAI server on the worker
    (which needs a CUDA GPU and `pip install vllm`), and requests go to that server through the same
    client, timeouts and retries as an OpenAI-URL teacher. The server is shared by every process and
    DoFn instance of the machine the way RunInference shares it (`MultiProcessShared`, one per model),
    so a GPU holds one vLLM server, not one per worker thread. UNRUN here: vLLM is CUDA-only and our
    machines have no GPU; the OpenAI-URL teacher is the tested path."""

    def __init__(self, model: str, *, timeout: float, retries: int, extra_body: dict | None = None) -> None:
        if importlib.util.find_spec("vllm") is None:
            raise TeacherError(
                f"--synthesize-reasoning {VLLM_HANDLER_PREFIX}{model} needs vLLM on the worker: run the "
                "pipeline on GPU workers with `pip install vllm`, or start a vLLM server yourself and "
                "pass its URL (http://HOST:PORT/v1) as the teacher"
            )
        from apache_beam.ml.inference.vllm_inference import VLLMChatModelHandler
        from apache_beam.utils.multi_process_shared import MultiProcessShared

        load = VLLMChatModelHandler(model_name=model).load_model
        self._server = MultiProcessShared(load, tag=f"agentworld-synthesis-vllm-{model}").acquire()
        base_url = f"http://localhost:{self._server.get_server_port()}/v1"
        super().__init__(base_url, model, timeout=timeout, retries=retries, extra_body=extra_body)


def served_model(base_url: str, timeout: float = 30.0) -> str:
    """The first model an endpoint serves, asked once by the launcher so the teacher id is fixed."""
    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", timeout=timeout, max_retries=1)
    try:
        served = [m.id for m in client.models.list()]
    except openai.OpenAIError as exc:
        raise TeacherError(
            f"the teacher at {base_url} did not list its models ({exc}); start it, or check the URL "
            "(an OpenAI-compatible base URL ends in /v1)"
        ) from exc
    finally:
        client.close()
    if not served:
        raise TeacherError(f"the teacher at {base_url} serves no model; pass --synthesis-model")
    return served[0]


def make_teacher(config: SynthesisConfig) -> Teacher:
    if config.teacher.startswith(VLLM_HANDLER_PREFIX):
        model = config.teacher.removeprefix(VLLM_HANDLER_PREFIX)
        return VLLMHandlerTeacher(
            model, timeout=config.timeout, retries=config.retries, extra_body=config.extra_body
        )
    if config.model is None:
        raise TeacherError("an OpenAI-compatible teacher needs its model name (the launcher resolves it)")
    return OpenAITeacher(
        config.teacher,
        config.model,
        timeout=config.timeout,
        retries=config.retries,
        extra_body=config.extra_body,
    )


def resolve_model(config: SynthesisConfig) -> SynthesisConfig:
    """`config` with the model an OpenAI-compatible teacher serves, asked now when not given: the
    launcher fails before the run on a teacher it cannot reach, and the teacher id is fixed for all
    workers (the cache keys on it)."""
    if config.teacher.startswith(VLLM_HANDLER_PREFIX) or config.model is not None:
        return config
    return replace(config, model=served_model(config.teacher))
