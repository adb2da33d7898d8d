"""The agent playing whole episodes: the model in this process, the sandbox real or simulated.

Every episode goes through `sandboxes.episode.Episode` (DESIGN 4d: one episode loop), with the LLM
policy's prompt and reply format (sandboxes.agent_prompt), so an episode here is bounded, counted
and verified as a collector's is. An invalid reply is a step the agent sees the error of, as in a
collection; `{"done": true}` ends the episode; the verifier runs after a completed or truncated one.

Sampling is seeded per episode (`seed`), so the same agent on the same task with the same seed plays
the same episode, and the agent before and after training face the same sampling noise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandboxes.agent_prompt import parse_reply, screen_message, system_prompt
from sandboxes.base import Sandbox
from sandboxes.domains import domain_spec
from sandboxes.episode import Episode
from schemas.invalid_actions import INVALID
from schemas.records import Task
from training.agent_rl.chat import AgentChat, EpisodeTokens

DOMAIN = "terminal"


@dataclass
class Sampling:
    temperature: float = 1.0  # 0: greedy
    max_reply_tokens: int = 64


@dataclass
class Played:
    """One episode: what the agent did and what it earned."""

    task_id: str
    seed: int
    tokens: EpisodeTokens
    replies: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # each step's action text ("invalid" for a bad reply)
    status: str = ""
    reward: float | None = None  # the verifier's; None when it could not decide
    verifier: str = ""
    error: str = ""

    @property
    def score(self) -> float:
        """The reward GRPO and the before/after comparison use: an undecided verdict scores 0."""
        return self.reward if self.reward is not None else 0.0

    def summary(self) -> dict:
        return {
            "task_id": self.task_id,
            "seed": self.seed,
            "status": self.status,
            "reward": self.reward,
            "verifier": self.verifier,
            "error": self.error,
            "actions": self.actions,
            "agent_tokens": sum(self.tokens.env_mask),
            "observation_tokens": len(self.tokens.env_mask) - sum(self.tokens.env_mask),
        }


class Agent:
    """A causal LM and its tokenizer, replying turn by turn from an episode's token ids."""

    def __init__(self, model: Any, tokenizer: Any, sampling: Sampling) -> None:
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.chat = AgentChat(tokenizer)

    def reply(self, ids: list[int], seed: int) -> tuple[list[int], list[float]]:
        """The next reply's token ids (ending with end-of-turn unless cut at the bound) and the
        log-probability the sampler gave each (temperature-scaled logits, as GRPO scores them)."""
        import torch

        device = next(self.model.parameters()).device
        greedy = self.sampling.temperature <= 0
        torch.manual_seed(seed)
        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([ids], device=device),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
                max_new_tokens=self.sampling.max_reply_tokens,
                do_sample=not greedy,
                temperature=None if greedy else self.sampling.temperature,
                top_k=None if greedy else 0,
                top_p=None if greedy else 1.0,
                eos_token_id=self.tokenizer.eos_token_id,
                pad_token_id=self.tokenizer.pad_token_id,
                output_logits=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[0, len(ids) :].tolist()
        scale = 1.0 if greedy else self.sampling.temperature
        logprobs = [
            float(torch.log_softmax(logits[0].float() / scale, dim=-1)[token])
            for logits, token in zip(out.logits, new, strict=True)
        ]
        return new, logprobs


def play(agent: Agent, sandbox: Sandbox, task: Task, max_steps: int, seed: int) -> Played:
    """One episode of `task` in a started `sandbox`, verified when it ends completed or truncated."""
    spec = domain_spec(DOMAIN)
    episode = Episode(sandbox, task, max_steps)
    observation = episode.reset()
    tokens, messages = agent.chat.start(system_prompt(task, spec), screen_message(observation))
    played = Played(task.id, seed, tokens)
    turn = 0
    while not episode.over:
        ids, logprobs = agent.reply(tokens.ids, seed * 1000 + turn)
        turn += 1
        tokens.add_reply(ids, logprobs)
        reply = agent.tokenizer.decode(ids, skip_special_tokens=True)
        played.replies.append(reply)
        action = parse_reply(reply, spec)
        if action is None:
            episode.end()
            break
        step = episode.step(action)
        if step is not None:
            played.actions.append(
                INVALID if step.action.kind == INVALID else step.action.text or step.action.kind
            )
        if step is None or episode.over:
            break
        ended = bool(ids) and ids[-1] == agent.tokenizer.eos_token_id
        tokens.add_observation(
            agent.chat.observation_ids(messages, reply, ended, screen_message(step.observation))
        )
    played.status = episode.outcome.status
    if episode.outcome.status in ("completed", "truncated"):
        verification = episode.verify()
        if verification is not None:
            played.reward, played.verifier = verification.reward, verification.verifier
            played.error = verification.error if verification.reward is None else ""
    else:
        played.error = episode.outcome.error or ""
    return played


def simulated_factory(world_model: str, max_tokens: int) -> Callable[[], Sandbox]:
    """Simulated terminals over one world model (a GGUF file, a checkpoint or a URL), shared."""
    from training.backends import GenerationConfig, make_backend
    from training.simulator import SimulatedSandbox

    backend = make_backend(world_model)
    generation = GenerationConfig(max_new_tokens=max_tokens)
    return lambda: SimulatedSandbox(backend, DOMAIN, generation=generation)


def real_factory(backend: str = "bwrap") -> Callable[[], Sandbox]:
    """Real terminals: bubblewrap by default (docker where asked), never the host."""
    from sandboxes.terminal.config import TerminalConfig, make_backend
    from sandboxes.terminal.sandbox import TerminalSandbox

    if backend not in ("bwrap", "docker"):
        raise ValueError(f"the real terminal runs under bwrap or docker, not {backend!r}")
    return lambda: TerminalSandbox(TerminalConfig(backend=make_backend(backend)))


def play_all(
    agent: Agent,
    factory: Callable[[], Sandbox],
    jobs: list[tuple[Task, int]],
    max_steps: int,
    progress: Callable[[Played], None] | None = None,
) -> list[Played]:
    """Each (task, seed) played in turn in one sandbox; a sandbox that failed is replaced."""
    sandbox = factory()
    sandbox.start()
    played = []
    try:
        for task, seed in jobs:
            try:
                one = play(agent, sandbox, dataclasses.replace(task), max_steps, seed)
            except Exception as exc:  # a reset that failed: the episode is an error, the run goes on
                one = Played(
                    task.id, seed, EpisodeTokens([]), status="error", error=f"{type(exc).__name__}: {exc}"
                )
            if one.status == "error":
                sandbox.close()
                sandbox = factory()
                sandbox.start()
            played.append(one)
            if progress is not None:
                progress(one)
    finally:
        sandbox.close()
    return played
