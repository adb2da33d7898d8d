"""The domain registry: one record per domain holding every per-domain fact, found by `domain_spec`.

Adding a domain means adding one `DomainSpec` to `SPECS` (and its sandbox package exporting `HOOKS`).
A record is plain data, so reading a fact (an alias, a metric name, a backend list) imports nothing;
the sandbox's own code (`hooks`: the action parser, the replay sandbox) is imported on first use, so a
user who only collects terminal data never imports Playwright or tantivy. Facts that live in a higher
layer (training's metric functions) are named here by string and resolved there, since sandboxes may
import only schemas and the standard library (DESIGN 4).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandboxes.base import Sandbox
from schemas.records import Action, Environment

# An environment config key a replay may set to run a recording under another backend ("auto" keeps
# the recorded one); the fidelity command's --backend sets it.
REPLAY_BACKEND = "replay_backend"


@dataclass(frozen=True)
class SandboxHooks:
    """The part of a domain that is code, exported as `HOOKS` by its sandbox package."""

    # Validates an action and fills its canonical `text`; raises sandboxes.base.InvalidActionError.
    parse_action: Callable[[str, dict[str, Any]], Action]
    # How an agent writes actions, for an LLM policy's system prompt: one JSON object per turn.
    action_space: str
    # A fresh real sandbox like the one a trajectory was recorded in (its `environment`), started
    # by the caller; used to replay recorded actions for the fidelity noise floor.
    replay_sandbox: Callable[[Environment], Sandbox]
    # What a fresh sandbox shows before the first action, when the task does not say.
    initial_text: str = ""


@dataclass(frozen=True)
class DomainSpec:
    name: str  # the trajectory's `domain` (schemas.records.DOMAINS)
    # `sandboxes.<package>` and `collectors.<package>`; the lookup takes it too.
    package: str
    # The AgentWorldBench task name and public judge prompt folder (prompts/<it>/); the lookup takes it.
    public_task: str
    observation_format: str  # Observation.format of the sandbox's observations
    # The collector's real `--backend` choices, its default first ("simulator" is every domain's extra).
    backends: tuple[str, ...]
    # Backends a replay may run under (REPLAY_BACKEND, the fidelity command's --backend), the one used
    # for a recording made under another (on the host) first; () where a replay runs like the recording.
    replay_backends: tuple[str, ...]
    verifier_kinds: tuple[str, ...]  # the task `verifier.kind`s the domain's sandboxes check
    # training.fidelity.domain_metrics.SCORERS entry scoring the domain's own metrics ("" for none).
    scorer: str
    # The metric chain a comparison reads a turn on: the first that applies (edit similarity closes it).
    main_metrics: tuple[str, ...]
    # Action kinds the sandbox answers in another Observation.format than observation_format: (kind, format).
    action_formats: tuple[tuple[str, str], ...] = ()
    # A realistic failure to inject (training.perturb), a str.format template: {command} is the program
    # the action ran, {action} the action text; "" for a generic one.
    injected_error: str = ""
    # Its real sandbox is tested behind the OpenEnv server (tests/sandboxes/serve); sandboxes.serve notes
    # that the others are built as a fidelity replay builds them.
    serve_tested: bool = False
    aliases: tuple[str, ...] = ()  # other names the lookup accepts

    @property
    def hooks(self) -> SandboxHooks:
        return importlib.import_module(f"sandboxes.{self.package}").HOOKS

    @property
    def parse_action(self) -> Callable[[str, dict[str, Any]], Action]:
        return self.hooks.parse_action

    @property
    def action_space(self) -> str:
        return self.hooks.action_space

    @property
    def replay_sandbox(self) -> Callable[[Environment], Sandbox]:
        return self.hooks.replay_sandbox

    @property
    def initial_text(self) -> str:
        return self.hooks.initial_text


# In schemas.records.DOMAINS's order.
SPECS = (
    DomainSpec(
        name="terminal",
        package="terminal",
        public_task="terminal",
        observation_format="terminal_screen",
        backends=("docker", "bwrap", "local"),
        replay_backends=("bwrap", "docker"),
        # `harbor`: the terminal sandbox of imported Harbor tasks (sandboxes.harbor) runs their test.sh.
        verifier_kinds=("command", "harbor"),
        scorer="",
        main_metrics=(),
        injected_error="bash: {command}: Input/output error",
        serve_tested=True,
    ),
    DomainSpec(
        name="swe",
        package="swe",
        public_task="swe",
        observation_format="swe_tool_result",
        backends=("auto", "bwrap", "docker", "local"),
        replay_backends=("bwrap", "docker"),
        verifier_kinds=("swe_tests",),
        scorer="swe_scores",
        main_metrics=("output_line_f1",),
    ),
    DomainSpec(
        name="search",
        package="search",
        public_task="search",
        observation_format="search_results",
        backends=("tantivy", "searxng", "json_api"),
        replay_backends=(),
        verifier_kinds=("answer",),
        scorer="search_scores",
        main_metrics=("result_f1", "page_line_f1"),
        action_formats=(("web_extractor", "markdown"),),  # an extracted page
        injected_error="Error: search backend timed out (HTTP 504 Gateway Timeout)",
    ),
    DomainSpec(
        name="mcp",
        package="mcp",
        public_task="mcp",
        observation_format="mcp_result",
        backends=("bwrap", "local"),
        replay_backends=("bwrap", "local"),
        verifier_kinds=("files", "git_repo", "memory_graph"),
        scorer="mcp_scores",
        # An MCP result may hold no stable value: then its keys.
        main_metrics=("json_value_match", "json_key_f1"),
        injected_error='{{"error": {{"code": -32603, "message": "Internal error: upstream service '
        'unavailable"}}}}',
    ),
    DomainSpec(
        name="web",
        package="web",
        public_task="web",
        observation_format="a11y_tree",
        backends=("chromium",),
        replay_backends=(),
        verifier_kinds=("site_state", "page_url"),
        scorer="web_scores",
        main_metrics=("tree_f1",),
        serve_tested=True,
    ),
    DomainSpec(
        name="os",
        # `sandboxes.os` would read as the standard module.
        package="desktop",
        public_task="os",
        observation_format="desktop_a11y_tree",
        backends=("desktop",),
        replay_backends=(),
        verifier_kinds=("desktop_state",),
        scorer="desktop_scores",
        main_metrics=("node_f1",),
        aliases=("desktop",),
    ),
    DomainSpec(
        name="android",
        package="android",
        public_task="android",
        observation_format="android_ui_tree",
        backends=("appium",),
        replay_backends=(),
        verifier_kinds=("android_state",),
        scorer="android_scores",
        main_metrics=("node_f1",),
    ),
)
KNOWN_DOMAINS = tuple(spec.name for spec in SPECS)
# Every name a record is found by: its own, its package's, its public task's and its aliases.
LOOKUP = {key: spec for spec in SPECS for key in (spec.name, spec.package, spec.public_task, *spec.aliases)}


def find_domain(name: str) -> DomainSpec | None:
    """The record `name` finds (see domain_spec), or None: for the consumers that handle a name of no
    domain (a report's "overall", a dataset's domain that has no sandbox yet) with a default."""
    return LOOKUP.get(name)


def domain_spec(name_or_alias: str) -> DomainSpec:
    """The record of a domain by its name, package, public task or alias; ValueError naming the known
    domains."""
    spec = LOOKUP.get(name_or_alias)
    if spec is None:
        raise ValueError(f"no domain {name_or_alias!r}; known domains: {', '.join(KNOWN_DOMAINS)}")
    return spec
