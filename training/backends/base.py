"""The world-model backend contract: chat messages in, the model's raw reply out.

Every consumer (the simulated sandbox, the fidelity evaluation, the AgentWorldBench runner) talks to a
model only through this interface, so a local transformers model, an OpenAI-compatible server (vLLM,
SGLang, llama.cpp) and vLLM's offline engine are interchangeable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 1024
    temperature: float = 0.0  # greedy by default: fidelity numbers must be reproducible
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = field(default=())


class WorldModelBackend(ABC):
    """`complete` must be safe to call from several threads at once (fidelity runs requests
    concurrently); a backend that cannot overlap requests serialises them itself."""

    name: str = ""

    @abstractmethod
    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        """The model's whole reply (reasoning and tagged observation) to one chat conversation."""

    def describe(self) -> dict:
        """Recorded with every simulated trajectory and report: model, endpoint, settings."""
        return {"backend": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing to release
        """Release the model or the connection pool."""
