"""SimulatedSandbox: a sandbox whose step asks a world model instead of running anything.

It implements `sandboxes.base.Sandbox`, so collectors, policies and `check_sandbox` run against it
unchanged. Each step renders the episode so far (its own earlier predictions are the history, as a
closed-loop simulator must) with `schemas.render.chat_messages`, the renderer the corpus pipeline uses,
asks the backend, and keeps the last `<predicted_observation>` block outside `<think>`. A reply without
one is a format failure: recorded in the observation and `info`, never raised, because a world model
that breaks format is a measurement, not a crash. A model trained on delta targets (`training.targets`,
read from its checkpoint unless `target` says) answers with an edit script of the previous observation:
the simulator applies it and hands out the rebuilt full observation, and a script that does not apply
is a format failure whose `format_error` says why.

Its `verify` asks the world model a task's verifier as extra turns on a copy of the episode: by default
by likelihood, scoring the answers a real check could have recorded with `score_turn` (the prompt
`step` would send, the answers in the model's own target form), else by generation
(training/simulated_verify.py).

What a domain's real sandbox does comes from its spec (sandboxes.domains): actions are validated and
given their canonical text by the domain's own parser, observations carry the real format, and the
predicted text is read back into `data` (a web page's url, title and elements; a search's results; an
MCP result's error flag and structured content; a SWE tool's exit status and diff). Tool definitions
(an MCP server's, a SWE workspace's) come from the constructor or the task's metadata (`tools`, as
recorded in a trajectory's environment): `describe()` carries them and the system prompt lists them.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sandboxes.base import Sandbox, SandboxClosedError, SandboxError, StepResult
from sandboxes.domains import DomainSpec, find_domain
from schemas.records import (
    Action,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Step,
    Task,
    ToolDefinition,
    Trajectory,
    Verification,
)
from schemas.render import chat_messages, extract_prediction, strip_think, turn_target
from schemas.verification_turns import VERIFICATION_FORMAT, VERIFY_KIND
from training.backends.base import GenerationConfig, WorldModelBackend, ending_at_answer
from training.observations.parsers import observation_data
from training.simulated_verify import LIKELIHOOD, METHODS, Asides, simulated_verification
from training.targets import answer_form, model_target, rebuild

DEFAULT_GENERATION = GenerationConfig(max_new_tokens=1024)


def _observation_from(value: Any, fmt: str) -> Observation:
    """An initial observation given in task metadata: an Observation, a {format, text, data} dict or text."""
    if isinstance(value, Observation):
        return copy.deepcopy(value)
    if isinstance(value, dict):
        return Observation(
            format=value.get("format") or fmt,
            text=str(value.get("text", "")),
            data=dict(value.get("data") or {}),
        )
    if isinstance(value, str):
        return Observation(format=fmt, text=value)
    raise ValueError(f"task metadata initial_observation must be an observation, dict or str, got {value!r}")


def _tools_from(value: Any) -> list[ToolDefinition]:
    """Tool definitions given in task metadata: ToolDefinitions or their dicts (as `dataclasses.asdict`
    or a recorded environment write them)."""
    if not isinstance(value, list):
        raise ValueError(f"task metadata tools must be a list of tool definitions, got {value!r}")
    tools = []
    for item in value:
        if isinstance(item, ToolDefinition):
            tools.append(copy.deepcopy(item))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            tools.append(
                ToolDefinition(
                    name=item["name"],
                    description=str(item.get("description") or ""),
                    input_schema=dict(item.get("input_schema") or {}),
                    output_schema=item.get("output_schema"),
                )
            )
        else:
            raise ValueError(f"a tool definition needs at least a name, got {item!r}")
    return tools


def _spec(domain: str) -> DomainSpec | None:
    """The real sandbox's spec: its observation format, first observation and action parser. A domain
    without a sandbox package yet is simulated with plain text and its actions taken as given."""
    return find_domain(domain)


def _canonical(spec: DomainSpec | None, action: Action) -> Action:
    """Validate a domain's action and fix its text the way the real sandbox would record it."""
    if spec is not None:
        return spec.parse_action(action.kind, action.arguments)  # raises InvalidActionError
    if action.text:
        return action
    return dataclasses.replace(action, text=f"{action.kind} {action.arguments}")


class SimulatedSandbox(Sandbox):
    """One episode at a time, like a real sandbox; the backend may be shared by many of them.

    `close()` does not close the backend: a fleet of simulated sandboxes shares one model.
    """

    def __init__(
        self,
        backend: WorldModelBackend,
        domain: str = "terminal",
        *,
        generation: GenerationConfig | None = None,
        history_budget_tokens: int | None = None,
        instructions: str = "",
        initial_observation: Observation | None = None,
        observation_format: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        target: str | None = None,
        verdicts: str = LIKELIHOOD,
    ) -> None:
        if verdicts not in METHODS:
            raise ValueError(f"verdicts must be one of {METHODS}, got {verdicts!r}")
        self.verdicts = verdicts  # how the world model is asked a verifier (training.simulated_verify)
        self.domain = domain
        self.target = target or model_target(backend)
        self.spec = _spec(domain)
        self.backend = backend
        # a reply ends at its first </predicted_observation> (training.backends.base.ending_at_answer)
        self.generation = ending_at_answer(generation or DEFAULT_GENERATION)
        self.history_budget_tokens = history_budget_tokens
        self.instructions = instructions.strip()
        self.format = (
            observation_format
            or (initial_observation.format if initial_observation else "")
            or (self.spec.observation_format if self.spec else "text")
        )
        self._initial = initial_observation
        self._default_tools = list(tools)
        self._tools = list(tools)
        self._counter: Callable[[list[dict]], int] | None = None
        self._episode: Trajectory | None = None
        self._started = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._started and not self._closed:
            return
        self._started, self._closed = True, False

    def reset(self, task: Task) -> Observation:
        self.start()
        if task.metadata.get("initial_observation") is not None:
            initial = _observation_from(task.metadata["initial_observation"], self.format)
        elif self._initial is not None:
            initial = copy.deepcopy(self._initial)
        else:
            initial = Observation(format=self.format, text=self.spec.initial_text if self.spec else "")
        initial.data = {**initial.data, "simulated": True}
        self._begin(task, initial, [])
        return copy.deepcopy(initial)

    def resume(self, task: Task, initial_observation: Observation, steps: Sequence[Step]) -> None:
        """Go on with an episode a real sandbox began (the collector's fallback when it fails): its
        real initial observation and steps become the history the next prediction is asked from,
        as they were recorded (not marked simulated: they were not)."""
        self.start()
        self._begin(task, copy.deepcopy(initial_observation), copy.deepcopy(list(steps)))

    def _begin(self, task: Task, initial: Observation, steps: list[Step]) -> None:
        given = task.metadata.get("tools")
        self._tools = _tools_from(given) if given is not None else list(self._default_tools)
        stamp = datetime.now(UTC)
        # Only the fields the renderer reads matter; the collector writes the real trajectory.
        self._episode = Trajectory(
            trajectory_id=f"simulated-{task.id}",
            domain=self.domain,
            environment=self.describe(),
            task=task,
            policy=Policy(name="unknown"),
            initial_observation=initial,
            steps=steps,
            outcome=Outcome(status="truncated"),
            provenance=Provenance("simulator", "", "", stamp, stamp, simulated=True),
        )

    def step(self, action: Action) -> StepResult:
        pending, asked_whole = self._pending(action)
        messages = self._prompt(pending)
        clock = time.perf_counter()
        try:
            reply = self.backend.complete(messages, self.generation)
        except Exception as exc:
            # The runner ends the episode with outcome "error" and this message; nothing is half-recorded.
            raise SandboxError(f"world model backend failed: {type(exc).__name__}: {exc}") from exc
        latency = time.perf_counter() - clock
        predicted = extract_prediction(reply)
        error = "" if predicted is not None else "the reply has no closed observation block"
        if predicted is not None:
            predicted, error = rebuild(self._previous_text(), predicted, self.domain, self.target)
        failure = bool(error)
        data: dict[str, Any] = {"simulated": True, "format_failure": failure}
        if failure:
            data["raw_reply"] = reply
            data["format_error"] = error
        elif not asked_whole:
            # What the real sandbox would put in `data` (url, title, results, ...), read from the text.
            data.update(observation_data(self.domain, predicted, pending.action))
            # What the real sandbox repeats from the task in every observation (the MCP server's name).
            metadata, keys = self._episode.task.metadata, self.spec.task_keys_in_data if self.spec else ()
            data.update({key: metadata[key] for key in keys if key in metadata})
        observation = Observation(
            format=pending.observation.format,
            text=strip_think(reply).strip() if failure else predicted,
            data=data,
        )
        pending.observation, pending.latency_s = observation, latency
        self._episode.steps.append(pending)
        info = {"simulated": True, "format_failure": failure, "model_latency_s": latency}
        if failure:
            info["format_error"] = error
        return StepResult(observation=copy.deepcopy(observation), info=info)

    def _pending(self, action: Action) -> tuple[Step, bool]:
        """(the step `action` would add, its observation still empty and in the format the real
        sandbox gives; whether the action is a verifier asked as a whole)."""
        if self._closed or not self._started:
            raise SandboxClosedError("simulated sandbox is closed; create a new one or call reset")
        if self._episode is None:
            raise SandboxClosedError("simulated sandbox has no episode yet; call reset first")
        # A verifier asked as a whole (the simulated verifier's aside turn) is no agent action: it
        # reaches the model as recorded (schemas.verification_turns), not through the domain's parser.
        asked_whole = action.kind == VERIFY_KIND
        action = action if asked_whole else _canonical(self.spec, action)
        if asked_whole:
            fmt = VERIFICATION_FORMAT
        else:
            fmt = dict(self.spec.action_formats).get(action.kind, self.format) if self.spec else self.format
        pending = Step(
            index=len(self._episode.steps),
            action=action,
            observation=Observation(format=fmt, text=""),
            started_at=datetime.now(UTC),
            latency_s=0.0,
        )
        return pending, asked_whole

    def _prompt(self, pending: Step) -> list[dict]:
        """The prompt that asks the model for the pending step's observation: the one place a turn is
        prompted, for a generated turn (`step`) and a scored one (`score_turn`) alike."""
        assert self._episode is not None
        view = dataclasses.replace(self._episode, steps=[*self._episode.steps, pending])
        return self._with_instructions(chat_messages(view, len(view.steps), fits=self._fits()))

    def _answer(self, pending: Step, messages: list[dict], observation: Observation) -> str:
        """The reply the model was trained to give if `observation` were the pending turn's: the tagged
        observation, or for a delta model its edit script of the previous one (`turn_target`, the
        corpus's own function, so a scored answer is exactly what a recorded turn trains)."""
        assert self._episode is not None
        turn = dataclasses.replace(pending, observation=observation)
        view = dataclasses.replace(self._episode, steps=[*self._episode.steps, turn])
        k = len(view.steps)
        return turn_target(view, k, answer_form(self.target, k, messages))

    def score_turn(self, action: Action, candidates: Sequence[Observation]) -> list[tuple[float, int]]:
        """Teacher-forced scores of each candidate observation as the next turn's (per candidate: its
        answer's total negative log-likelihood in nats and its token count), asked with the prompt
        `step` sends and answered in the form the model was trained on; nothing is recorded.
        NotImplementedError when the backend cannot score (an HTTP endpoint)."""
        pending, _ = self._pending(action)
        messages = self._prompt(pending)
        answers = [self._answer(pending, messages, candidate) for candidate in candidates]
        return self.backend.log_likelihood([messages] * len(answers), answers)

    def keep_turn(self, action: Action, observation: Observation) -> None:
        """Go on as if the model had answered `action` with `observation` (a scored verdict's choice)."""
        pending, _ = self._pending(action)
        pending.observation = Observation(
            format=observation.format, text=observation.text, data={**observation.data, "simulated": True}
        )
        assert self._episode is not None
        self._episode.steps.append(pending)

    def _previous_text(self) -> str:
        """The observation an edit script of the next turn edits: the last one handed out."""
        steps = self._episode.steps if self._episode is not None else []
        return steps[-1].observation.text if steps else self._episode.initial_observation.text

    def close(self) -> None:
        self._closed = True
        self._episode = None

    @property
    def alive(self) -> bool:
        return self._started and not self._closed

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """The simulated verdict (training/simulated_verify.py, named `simulated:<kind>`): verifiers that
        read only the episode run on its steps; the others are asked of the world model, in the form
        real episodes record their verification turns (schemas.verification_turns), as turns that
        follow the episode one after another, as the real checks do in the pane, on a copy of the
        episode that is never recorded; by `self.verdicts`: the likelier of the answers a real check
        could record (`score_turn`, then `keep_turn` of the choice), or the model's generated turn."""
        initial = self._episode.initial_observation if self._episode is not None else None
        episode = self._episode
        if episode is not None:
            self._episode = dataclasses.replace(episode, steps=list(episode.steps))
        asides = Asides(ask=self._aside, score=self.score_turn, keep=self.keep_turn, method=self.verdicts)
        try:
            return simulated_verification(self.domain, task, steps, initial, asides)
        finally:
            self._episode = episode

    def _aside(self, action: Action) -> Observation:
        """One more predicted turn on the verifier's copy of the episode (see `verify`)."""
        if self._episode is None:
            raise SandboxClosedError("simulated sandbox has no episode to ask about")
        return self.step(action).observation

    def describe(self) -> Environment:
        config = {
            **self.backend.describe(),
            # JSON has no tuples: the stop strings and per-domain bounds are recorded as lists.
            "generation": json.loads(json.dumps(dataclasses.asdict(self.generation))),
            "history_budget_tokens": self.history_budget_tokens,
            # The instructions may name hidden answers: record that the run was controlled, not the text.
            "controlled": bool(self.instructions),
            "target": self.target,
            "verdicts": self.verdicts,
        }
        return Environment(
            name=self.domain, backend="simulator", config=config, tools=copy.deepcopy(self._tools)
        )

    # -- prompt ----------------------------------------------------------------------------------

    def _with_instructions(self, messages: list[dict]) -> list[dict]:
        if not self.instructions:
            return messages
        system = messages[0]
        content = f"{system['content']}\n\n## Simulation controls\n{self.instructions}"
        return [{**system, "content": content}, *messages[1:]]

    def _fits(self) -> Callable[[list[dict]], bool] | None:
        budget = self.history_budget_tokens
        if budget is None:
            return None
        if self._counter is None:
            self._counter = getattr(self.backend, "count_tokens", None) or _template_counter()
        counter = self._counter
        return lambda messages: counter(self._with_instructions(messages)) <= budget


def _template_counter() -> Callable[[list[dict]], int]:
    """Prompt tokens under the Qwen3 chat template, for backends that cannot count (remote servers)."""
    from training.tokenizer import load_tokenizer

    tokenizer = load_tokenizer()

    def count(messages: list[dict]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def endpoint_factory(
    domain: str,
    endpoint: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    max_new_tokens: int = DEFAULT_GENERATION.max_new_tokens,
    temperature: float = 0.0,
    seed: int = 0,
    timeout_s: float = 120.0,
    verdicts: str = LIKELIHOOD,
) -> Callable[[], SimulatedSandbox]:
    """Simulated sandboxes of `domain` over one world model, all sharing it: the model an
    OpenAI-compatible `endpoint` URL serves (one client, one connection pool), or a local GGUF file
    (`endpoint` ending in .gguf) loaded once into llama.cpp in this process, which can also score
    answers (verdicts by likelihood; an endpoint falls back to generation). `verdicts`: see
    training.simulated_verify. Registered as the `simulator` entry point of `sandboxes.plugins`, so
    collectors and the OpenEnv server build it without importing training."""
    backend: WorldModelBackend
    if endpoint.startswith(("http://", "https://")):
        from training.backends.openai_http import OpenAIBackend

        backend = OpenAIBackend(endpoint, model, api_key, timeout=timeout_s)
    elif endpoint.endswith(".gguf"):
        from training.backends.llama_cpp_local import LlamaCppBackend

        backend = LlamaCppBackend(endpoint)
    else:
        raise ValueError(f"{endpoint!r} is neither an http(s) URL nor a GGUF file (*.gguf)")
    generation = GenerationConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    return lambda: SimulatedSandbox(backend, domain, generation=generation, verdicts=verdicts)
