"""Controlled simulation: perturb what any sandbox (real or simulated) shows the agent.

The reference system's MCP and search experiments stress agents with failing tools, paginated and
truncated results, and answers kept out of reach. `PerturbedSandbox` applies those controls to the
observations of a wrapped sandbox with a seeded RNG, and records each one it applied in
`StepResult.info["perturbations"]` and `observation.data["perturbations"]`, so the trajectory says
what the agent really saw. `PerturbationConfig.as_instructions()` words the same controls for a
world model's prompt (`SimulatedSandbox(instructions=...)`), which can then simulate them itself.

Order per step: an injected error replaces the whole result (the action is not run: a failed call
has no effect), then hidden answers are masked (before cutting, so no fragment of one survives a cut),
then pagination, then truncation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any

from sandboxes.base import Sandbox, StepResult
from sandboxes.domains import find_domain
from schemas.records import Action, Attachment, Environment, Observation, Step, Task, Verification

GENERIC_ERROR = "Error: the environment could not complete the action (Input/output error)"


@dataclass(frozen=True)
class PerturbationConfig:
    error_rate: float = 0.0  # probability that a step fails with an injected error
    error_template: str = ""  # "" -> the domain record's injected_error (sandboxes.domains)
    page_lines: int = 0  # > 0: show only the first page of this many lines of longer results
    hidden_answers: tuple[str, ...] = ()
    hidden_placeholder: str = "[hidden]"
    max_chars: int = 0  # > 0: cut observations longer than this, with a marker

    def __post_init__(self) -> None:
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be within [0, 1], got {self.error_rate}")
        if self.page_lines < 0 or self.max_chars < 0:
            raise ValueError("page_lines and max_chars must be >= 0 (0 turns them off)")
        if any(not answer for answer in self.hidden_answers):
            raise ValueError("hidden_answers must be non-empty strings")

    def _template(self, domain: str) -> str:
        spec = find_domain(domain)
        return self.error_template or (spec.injected_error if spec else "") or GENERIC_ERROR

    def error_text(self, domain: str, action: Action) -> str:
        return self._template(domain).format(command=_program(action), action=action.text)

    def as_instructions(self, domain: str = "terminal") -> str:
        """The same controls as natural-language rules for a world model's system prompt."""
        rules = []
        if self.error_rate > 0:
            example = self._template(domain)
            rules.append(
                f"About {self.error_rate:.0%} of actions fail: instead of the normal result, show an error "
                f"in this environment's usual form, such as `{example}`. A failed action changes nothing."
            )
        if self.hidden_answers:
            listed = ", ".join(f"`{answer}`" for answer in self.hidden_answers)
            rules.append(
                f"Never reveal these strings: {listed}. Wherever one would appear, write "
                f"`{self.hidden_placeholder}` instead."
            )
        if self.page_lines > 0:
            rules.append(
                f"Results longer than {self.page_lines} lines are paginated: show only the first "
                f"{self.page_lines} lines, then a line `-- more (page 1/K) --`, where K is the number of "
                f"pages of {self.page_lines} lines the full result needs."
            )
        if self.max_chars > 0:
            rules.append(
                f"An observation longer than {self.max_chars} characters is cut after {self.max_chars} "
                "characters and ends with a line `[... output truncated: N more characters]`."
            )
        return "\n".join(f"- {rule}" for rule in rules)

    def describe(self) -> dict[str, Any]:
        """The config for the trajectory record; hidden answers only as hashes, never in the clear."""
        shown = dataclasses.asdict(self)
        shown["hidden_answers"] = [hashlib.sha256(a.encode()).hexdigest()[:16] for a in self.hidden_answers]
        return shown


def _program(action: Action) -> str:
    """The program an action starts: the first word of its command line or typed text."""
    if action.kind == "command":
        line = str(action.arguments.get("command", ""))
    elif action.kind == "keystrokes":
        line = "".join(str(item.get("keystrokes", "")) for item in action.arguments.get("keystrokes", []))
    else:
        line = action.kind
    words = line.split()
    return words[0] if words else action.kind


def _replace_all(value: Any, answers: tuple[str, ...], placeholder: str) -> tuple[Any, int]:
    """`value` (a JSON-like tree) with every answer replaced, and how many replacements were made."""
    if isinstance(value, str):
        count = 0
        for answer in answers:
            count += value.count(answer)
            value = value.replace(answer, placeholder)
        return value, count
    if isinstance(value, dict):
        pairs = [(k, _replace_all(v, answers, placeholder)) for k, v in value.items()]
        return {k: v for k, (v, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(value, list):
        items = [_replace_all(v, answers, placeholder) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


class PerturbedSandbox(Sandbox):
    def __init__(self, inner: Sandbox, config: PerturbationConfig, seed: int = 0) -> None:
        self.inner = inner
        self.config = config
        self.seed = seed
        self.domain = inner.domain
        self._rng = random.Random(seed)
        self._last: Observation | None = None  # the inner sandbox's latest screen, for error rendering

    def start(self) -> None:
        self.inner.start()

    def reset(self, task: Task) -> Observation:
        observation = self.inner.reset(task)
        self._last = observation
        # Errors are injected into steps only; a task must always be able to start.
        return self._present(observation, [])[0]

    def step(self, action: Action) -> StepResult:
        # One draw per step whatever the rate, so a seed gives the same sequence under any config.
        fails = self._rng.random() < self.config.error_rate
        if fails:
            error = self.config.error_text(self.domain, action)
            result = StepResult(observation=self._error_observation(action, error))
            applied = [{"kind": "error", "text": error, "action_executed": False}]
        else:
            result = self.inner.step(action)
            self._last = result.observation
            applied = []
        observation, applied = self._present(result.observation, applied)
        info = {**result.info, "perturbations": applied}
        return dataclasses.replace(result, observation=observation, info=info)

    def close(self) -> None:
        self.inner.close()

    @property
    def alive(self) -> bool:
        return self.inner.alive

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        return self.inner.verify(task, steps)  # perturbations touch what the agent sees, not the state

    def describe(self) -> Environment:
        env = self.inner.describe()
        config = {**env.config, "perturbations": {**self.config.describe(), "seed": self.seed}}
        return dataclasses.replace(env, config=config)

    def resources(self) -> list[str]:
        getter = getattr(self.inner, "resources", None)
        return list(getter()) if getter else []

    # -- perturbations ---------------------------------------------------------------------------

    def _error_observation(self, action: Action, error: str) -> Observation:
        last = self._last
        fmt = last.format if last else "text"
        spec = find_domain(self.domain)
        if spec is not None and spec.screen_with_prompt and last is not None and last.text.strip():
            # The screen as a shell shows a failed command: the line typed at the prompt, the error,
            # and the same prompt again.
            lines = last.text.rstrip("\n").split("\n")
            prompt = lines[-1].rstrip()
            text = "\n".join([*lines[:-1], f"{prompt} {action.text}", error, prompt])
        else:
            text = error
        return Observation(format=fmt, text=text, data={"injected_error": True})

    def _present(self, obs: Observation, applied: list[dict]) -> tuple[Observation, list[dict]]:
        config = self.config
        text, data, attachments = obs.text, dict(obs.data), list(obs.attachments)
        applied = list(applied)
        if config.hidden_answers:
            text, hidden = _replace_all(text, config.hidden_answers, config.hidden_placeholder)
            data, in_data = _replace_all(data, config.hidden_answers, config.hidden_placeholder)
            attachments, in_files = self._mask_attachments(attachments)
            if hidden or in_data or in_files:
                applied.append(
                    {"kind": "hidden_answer", "text": hidden, "data": in_data, "attachments": in_files}
                )
        lines = text.split("\n")
        if config.page_lines and len(lines) > config.page_lines:
            pages = math.ceil(len(lines) / config.page_lines)
            text = "\n".join([*lines[: config.page_lines], f"-- more (page 1/{pages}) --"])
            applied.append({"kind": "pagination", "pages": pages, "lines": len(lines)})
        if config.max_chars and len(text) > config.max_chars:
            cut = len(text) - config.max_chars
            text = f"{text[: config.max_chars]}\n[... output truncated: {cut} more characters]"
            applied.append({"kind": "truncation", "removed_chars": cut})
        data["perturbations"] = applied
        return dataclasses.replace(obs, text=text, data=data, attachments=attachments), applied

    def _mask_attachments(self, attachments: list[Attachment]) -> tuple[list[Attachment], int]:
        """Mask answers in text attachments held in memory; one only stored by URI cannot be
        checked, so it is dropped rather than risk leaking the answer (counted as one replacement)."""
        config, kept, count = self.config, [], 0
        for att in attachments:
            if att.content is None:
                count += 1
                continue
            if not att.media_type.startswith("text/") and "json" not in att.media_type:
                kept.append(att)
                continue
            raw = att.content.decode("utf-8", errors="replace")
            masked, n = _replace_all(raw, config.hidden_answers, config.hidden_placeholder)
            if n:
                content = masked.encode()
                att = dataclasses.replace(
                    att, content=content, sha256=hashlib.sha256(content).hexdigest(), size=len(content)
                )
            kept.append(att)
            count += n
        return kept, count
