"""Stage 4: redact secrets and personal data in every field of a trajectory.

Our own rules (private key blocks, AWS access key ids, GitHub tokens, e-mail and public IP
addresses, and the key/value forms terminals show: credentials files, env, export, YAML, JSON,
.env, URLs with passwords, Authorization headers, connection strings, command-line flags) plus
detect-secrets' plugins with their default settings on lines that pass a cheap prefilter (see
`beam_pipelines.redaction`). Two passes per trajectory: every field is scanned, then every value
found anywhere is replaced everywhere with its stable placeholder `<REDACTED:kind:n>`.

Counters: `redact/<kind>` (distinct values), `redact/chars_<kind>` (characters replaced),
`redact/chars_total` (characters examined), for the report's share of characters redacted by kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import islice
from typing import Any

import apache_beam as beam

from beam_pipelines.dead_letter import count
from beam_pipelines.redaction import Redactor
from beam_pipelines.secret_rules import SecretFinder, kind_slug
from beam_pipelines.text import is_screen
from schemas import Observation, Step, Trajectory
from schemas.records import ToolDefinition, Verification

STAGE = "redact"
# (text, screen width or 0, the map key it is the value of or "") -> text; returns its input object
# when it changes nothing.
Redact = Callable[[str, int, str], str]
# Covered by our own rules, which catch more: the whole key block rather than its first line,
# every public address rather than public IPv4 only, and the token rather than its prefix. Hex
# high-entropy strings out of context are checksums and commit or container ids, which stay.
_OWN_KINDS = frozenset({"Private Key", "Public IP (ipv4)", "GitHub Token", "Hex High Entropy String"})
# A file name whose extension selects detect-secrets' generic (not language-specific) rules.
SCAN_NAME = "observation.txt"


def detect_secrets_plugins() -> list:
    """detect-secrets' plugins with their default settings, less those our own rules replace."""
    # Imported here, on the worker: plugin discovery is slow and holds module state we do not ship.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import get_settings

    # Verification would call the providers' APIs; a corpus job must never send secrets out.
    get_settings().disable_filters("detect_secrets.filters.common.is_ignored_due_to_verification_policies")
    mapping = get_mapping_from_secret_type_to_class()
    return [cls() for kind, cls in sorted(mapping.items()) if kind not in _OWN_KINDS]


def secret_finder(plugins: list | None = None) -> SecretFinder:
    """Our rules plus detect-secrets (`plugins`, by default `detect_secrets_plugins()`)."""
    plugins = detect_secrets_plugins() if plugins is None else plugins

    def detect(line: str) -> Iterator[tuple[str, str]]:
        for plugin in plugins:
            for secret in plugin.analyze_line(filename=SCAN_NAME, line=line):
                if secret.secret_value:
                    yield kind_slug(secret.type), secret.secret_value

    return SecretFinder(detect)


class _Redact(beam.DoFn):
    def setup(self) -> None:
        self._finder = secret_finder()

    def process(self, t: Trajectory) -> Iterator[Trajectory]:
        redactor = Redactor(self._finder)
        redacted = redact_all(t, redactor)
        for kind, n in redactor.counts.items():
            count(STAGE, kind, n)
        for kind, n in redactor.chars.items():
            count(STAGE, f"chars_{kind}", n)
        count(STAGE, "chars_total", redactor.characters)
        count(STAGE, "trajectories_redacted" if redactor.counts else "trajectories_clean")
        yield redacted


def redact_all(t: Trajectory, redactor: Redactor) -> Trajectory:
    """`t` with every secret found in any of its fields replaced in all of them (both passes)."""

    def scan(text: str, width: int, key: str) -> str:
        redactor.scan(text, width, key)
        return text

    redact_trajectory(t, scan)
    return redact_trajectory(t, redactor.redact) if redactor.counts else t


def _may_hold_data(key: object) -> bool:
    """Whether a map key may itself be an e-mail, an address or a token: not a short identifier
    (`exit_code`, `structuredContent`), which almost every key is, so those skip the redactor."""
    return isinstance(key, str) and not (key.isidentifier() and len(key) < 20)


def _json(value: Any, redact: Redact, key: str = "") -> Any:
    """`value` with strings redacted, each with the key it is under (a list's items with the list's
    key), and map keys too (structured tool results key entries by name, address or e-mail); the
    same object when nothing changed, and a copy made only when something did."""
    if isinstance(value, str):
        return redact(value, 0, key)
    if isinstance(value, dict):
        out: dict | None = None
        for i, (k, item) in enumerate(value.items()):
            new = _json(item, redact, str(k))
            new_key = redact(k, 0, "") if _may_hold_data(k) else k
            if out is None and (new is not item or new_key is not k):
                out = dict(islice(value.items(), i))  # the unchanged pairs before this one
            if out is not None:
                out[new_key] = new
        return value if out is None else out
    if isinstance(value, list):
        items: list | None = None
        for i, item in enumerate(value):
            new = _json(item, redact, key)
            if new is not item:
                items = list(value) if items is None else items
                items[i] = new
        return value if items is None else items
    return value


def _tools(tools: list[ToolDefinition], redact: Redact) -> list[ToolDefinition]:
    """Tool definitions with their texts and schemas redacted: a server's descriptions and schema
    defaults may quote its environment (tokens, URLs with passwords). The same list when unchanged."""
    out: list[ToolDefinition] | None = None
    for i, tool in enumerate(tools):
        name, description = redact(tool.name, 0, ""), redact(tool.description, 0, "")
        input_schema = _json(tool.input_schema, redact)
        output_schema = None if tool.output_schema is None else _json(tool.output_schema, redact)
        if (
            name is not tool.name
            or description is not tool.description
            or input_schema is not tool.input_schema
            or output_schema is not tool.output_schema
        ):
            out = list(tools) if out is None else out
            out[i] = replace(
                tool,
                name=name,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
            )
    return tools if out is None else out


def _observation(observation: Observation, redact: Redact, width: int) -> Observation:
    text = redact(observation.text, width if is_screen(observation.format) else 0, "")
    data = _json(observation.data, redact)
    if text is observation.text and data is observation.data:
        return observation
    return replace(observation, text=text, data=data)


def _step(step: Step, redact: Redact, width: int) -> Step:
    text, arguments = redact(step.action.text, 0, ""), _json(step.action.arguments, redact)
    observation = _observation(step.observation, redact, width)
    info = _json(step.info, redact)
    if (
        text is step.action.text
        and arguments is step.action.arguments
        and observation is step.observation
        and info is step.info
    ):
        return step
    action = step.action
    if text is not action.text or arguments is not action.arguments:
        action = replace(action, text=text, arguments=arguments)
    return replace(step, action=action, observation=observation, info=info)


def _screen_width(t: Trajectory) -> int:
    """The pane width screens were captured at (the terminal sandbox records it), or 0."""
    width = t.environment.config.get("width")
    return width if isinstance(width, int) and width > 0 else 0


def _verification(found: Verification | None, redact: Redact, width: int) -> Verification | None:
    if found is None:
        return None
    output, error = redact(found.output, 0, ""), redact(found.error, 0, "")
    turns = [_step(turn, redact, width) for turn in found.turns]
    if (
        output is found.output
        and error is found.error
        and all(n is o for n, o in zip(turns, found.turns, strict=True))
    ):
        return found
    return replace(found, output=output, error=error, turns=turns)


def redact_trajectory(t: Trajectory, redact: Redact) -> Trajectory:
    """`t` with `redact` applied to every text it holds, in a fixed order (so placeholder numbers
    are deterministic): environment (its tool definitions included), task, policy, initial
    observation, steps (action text and arguments, observation text and data, info), outcome error,
    the verifier's output and error and its verification turns (as steps: they are SFT samples).
    Unchanged parts are shared, not copied, and the input is never mutated (Beam may hand one
    object to several consumers)."""
    width = _screen_width(t)
    environment = t.environment
    image, config = redact(environment.image, 0, ""), _json(environment.config, redact)
    tools = _tools(environment.tools, redact)
    if image is not environment.image or config is not environment.config or tools is not environment.tools:
        environment = replace(environment, image=image, config=config, tools=tools)
    task = t.task
    instruction, setup = redact(task.instruction, 0, ""), _json(task.setup, redact)
    metadata = _json(task.metadata, redact)
    if instruction is not task.instruction or setup is not task.setup or metadata is not task.metadata:
        task = replace(task, instruction=instruction, setup=setup, metadata=metadata)
    policy = t.policy
    policy_config = _json(policy.config, redact)
    if policy_config is not policy.config:
        policy = replace(policy, config=policy_config)
    initial = _observation(t.initial_observation, redact, width)
    steps = [_step(step, redact, width) for step in t.steps]
    error = redact(t.outcome.error, 0, "")
    verification = _verification(t.outcome.verification, redact, width)
    outcome = t.outcome
    if error is not outcome.error or verification is not outcome.verification:
        outcome = replace(outcome, error=error, verification=verification)
    if (
        environment is t.environment
        and task is t.task
        and policy is t.policy
        and initial is t.initial_observation
        and outcome is t.outcome
        and all(new is old for new, old in zip(steps, t.steps, strict=True))
    ):
        return t
    return replace(
        t,
        environment=environment,
        task=task,
        policy=policy,
        initial_observation=initial,
        steps=steps,
        outcome=outcome,
    )


class RedactSecrets(beam.PTransform):
    """Trajectory -> Trajectory with secrets and personal data replaced by `<REDACTED:kind:n>`."""

    def expand(self, trajectories: beam.PCollection) -> beam.PCollection:
        return trajectories | "Redact" >> beam.ParDo(_Redact())
