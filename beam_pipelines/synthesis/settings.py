"""The settings of reasoning synthesis, as `build_corpus` parses them and the manifest records them."""

from __future__ import annotations

from dataclasses import dataclass, field

# Scorers are plugins loaded on the worker: beam_pipelines may not import training (README's package
# table), so the project's own scorer is registered by the distribution under this entry point group
# (pyproject.toml) and found here by its name, the default.
SCORER_GROUP = "agentworld.synthesis_scorers"
DEFAULT_SCORER = "candidates"
VLLM_HANDLER_PREFIX = "vllm-handler:"


@dataclass(frozen=True)
class SynthesisConfig:
    teacher: str  # an OpenAI-compatible base URL, or vllm-handler:MODEL
    model: str | None = None  # the served model's name; the launcher asks the server when None
    k: int = 3  # candidates per sample
    seed: int = 0  # candidate i is sampled with seed + i
    temperature: float = 0.7
    max_tokens: int = 1024
    # more request fields for every request, e.g. vLLM's {"chat_template_kwargs": {...}} or a llama.cpp
    # {"grammar": ...}: they shape the replies, so the cache keys on them and the manifest records them
    extra_body: dict = field(default_factory=dict)
    threshold: float = 0.5  # the best candidate must score at least this to be kept
    scorer: str = DEFAULT_SCORER  # a registered scorer's name, or MODULE:FUNCTION
    judge: str | None = None  # an OpenAI-compatible URL the scorer may use as a judge
    concurrency: int = 8  # requests in flight per worker
    timeout: float = 120.0  # seconds per request
    retries: int = 2  # further attempts of a failed request, with backoff
    cache: str | None = None  # fsspec path of the reply cache; OUTPUT/synthesis_cache when None

    @property
    def teacher_id(self) -> str:
        """What the cache keys on and the manifest records: the endpoint and the model it serves."""
        if self.teacher.startswith(VLLM_HANDLER_PREFIX):
            return self.teacher
        return f"{self.teacher.rstrip('/')}#{self.model}"

    def manifest_view(self) -> dict:
        """The settings that decide which reasoning a corpus holds (not how fast it was asked for)."""
        return {
            "teacher": self.teacher_id,
            "k": self.k,
            "seed": self.seed,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "extra_body": self.extra_body,
            "threshold": self.threshold,
            "scorer": self.scorer,
            "judge": self.judge,
        }
