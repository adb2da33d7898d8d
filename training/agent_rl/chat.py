"""One episode as the token sequence the agent saw and wrote, for GRPO's multi-turn rollouts.

The prompt is the chat template over the system prompt and the first screen. Everything after it is
the "completion": each reply exactly as sampled (its token ids, end-of-turn token included), then the
next screen as the template renders it, then the next reply, and so on. The agent generates each reply
from these very ids, so the sequence trained on is the sequence sampled from, with no re-tokenisation
at the turn boundaries. `env_mask` is 1 on the agent's own tokens and 0 on the screens', so the loss
(TRL reads `env_mask` as its tool mask) trains the replies only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EpisodeTokens:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # sampling log-probabilities; 0.0 on screens
    env_mask: list[int] = field(default_factory=list)  # 1: the agent's token, 0: the environment's

    @property
    def ids(self) -> list[int]:
        """What the agent's next reply is generated from."""
        return self.prompt_ids + self.completion_ids

    def add_reply(self, ids: list[int], logprobs: list[float]) -> None:
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} reply tokens but {len(logprobs)} log-probabilities")
        self.completion_ids += ids
        self.logprobs += logprobs
        self.env_mask += [1] * len(ids)

    def add_observation(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.env_mask += [0] * len(ids)

    def agent_tokens(self) -> list[int]:
        return [t for t, m in zip(self.completion_ids, self.env_mask, strict=True) if m]


class AgentChat:
    """The chat template of the agent's tokenizer, cut into the pieces a multi-turn rollout appends."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos_text = tokenizer.eos_token or ""

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=False
        )

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def start(self, system: str, screen: str) -> tuple[EpisodeTokens, list[dict]]:
        """The episode's prompt (system prompt and first screen) and the messages so far."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": screen}]
        return EpisodeTokens(self._encode(self._render(messages, True))), messages

    def observation_ids(self, messages: list[dict], reply: str, ended: bool, screen: str) -> list[int]:
        """The tokens between the agent's reply (its sampled ids, which end with the end-of-turn token
        when `ended`) and its next reply: the rest of the reply's turn as the template closes it, the
        next screen's turn, and the assistant's opening. `messages` gains both turns."""
        messages.append({"role": "assistant", "content": reply})
        closed = self._render(messages, False)
        at = closed.rindex(reply) + len(reply) if reply else len(self._render(messages[:-1], True))
        tail = closed[at:]
        if ended and tail.startswith(self.eos_text):
            tail = tail[len(self.eos_text) :]  # the sampled reply holds the end-of-turn token already
        messages.append({"role": "user", "content": screen})
        following = self._render(messages, True)
        return self._encode(tail + following[len(closed) :])
