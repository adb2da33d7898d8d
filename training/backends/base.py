"""The world-model backend contract: chat messages in, the model's raw reply out.

Every consumer (the simulated sandbox, the fidelity evaluation, the AgentWorldBench runner) talks to a
model only through this interface, so a local transformers model, an OpenAI-compatible server (vLLM,
SGLang, llama.cpp) and vLLM's offline engine are interchangeable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 1024
    temperature: float = 0.0  # greedy by default: fidelity numbers must be reproducible
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = field(default=())
    # Keep the stop string that ended a reply (vLLM's include_stop_str_in_output): a world model's reply
    # ends at its first </predicted_observation>, and without the tag the block would read as unclosed.
    include_stop: bool = False
    # Stop a reply once its tail loops (training/backends/repetition.py). Off unless asked for, so that a
    # caller gets exactly what greedy decoding gives; `python -m training.fidelity` turns it on.
    repetition_guard: bool = False
    # (domain, bound) pairs that replace max_new_tokens for that domain's turns: see for_domain. They are
    # answer lengths of one target form (schemas.edit_script.TARGET_FORMS), `bounds_form`.
    max_new_tokens_by_domain: tuple[tuple[str, int], ...] = ()
    bounds_form: str = "full"

    def for_domain(self, domain: str, form: str = "full") -> GenerationConfig:
        """The config of one domain's turns for a model answering in target form `form`: the domain's
        own token bound if it has one in that form, else max_new_tokens (an edit script's bound would
        cut a whole observation short). The table is dropped, so a reply's cache key and batch depend
        only on the bound it ran with."""
        table = dict(self.max_new_tokens_by_domain) if form == self.bounds_form else {}
        bound = table.get(domain, self.max_new_tokens)
        return replace(self, max_new_tokens=bound, max_new_tokens_by_domain=(), bounds_form="full")


def ending_at_answer(config: GenerationConfig) -> GenerationConfig:
    """`config` with the reply ending at its first </predicted_observation>, kept: the answer format
    allows nothing after it, and an undertrained model otherwise repeats the tag to its bound."""
    from schemas.render import CLOSE_TAG

    stop = config.stop if CLOSE_TAG in config.stop else (*config.stop, CLOSE_TAG)
    return replace(config, stop=stop, include_stop=True)


def cut_at_stop(text: str, stop: tuple[str, ...], keep: bool = False) -> str:
    """The text before the first stop string, as OpenAI-compatible servers return it; with `keep`,
    up to and including it."""
    ends = [i + (len(s) if keep else 0) for s in stop if s and (i := text.find(s)) >= 0]
    return text[: min(ends)] if ends else text


class WorldModelBackend(ABC):
    """`complete` must be safe to call from several threads at once (fidelity runs requests
    concurrently); a backend that cannot overlap requests serialises them itself."""

    name: str = ""

    @abstractmethod
    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        """The model's whole reply (reasoning and tagged observation) to one chat conversation."""

    def log_likelihood(self, prompts: list[list[dict]], answers: list[str]) -> list[tuple[float, int]]:
        """Teacher-forced scores of `answers[i]` as the reply to the chat `prompts[i]`: per pair, (the
        answer tokens' total negative log-likelihood in nats, the number of answer tokens).

        The context is the prompt exactly as `complete` would send it (chat template with the
        generation prompt), plus whatever the template puts before a final assistant message's content
        (Qwen3's empty think block); only the answer's own tokens are scored, not the end-of-turn token.
        Forward passes only, so any number of pairs is cheap next to generating them. Optional: a
        backend without weights (an HTTP endpoint) raises NotImplementedError saying so."""
        raise NotImplementedError(f"no weights: the {self.name or type(self).__name__} backend only replies")

    def describe(self) -> dict:
        """Recorded with every simulated trajectory and report: model, endpoint, settings."""
        return {"backend": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing to release
        """Release the model or the connection pool."""
