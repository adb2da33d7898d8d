"""The domain registry: one record per domain holding every per-domain fact, found by `domain_spec`.

A `DomainSpec` is the domain's `schemas.domains.DomainRecord` (its names, its observation format and
shape, which the schemas layer reads too) extended with the facts of the sandbox layer and above.
Adding a domain means adding its `DomainRecord` to `schemas.domains.RECORDS` and its `DomainSpec`
here (and its sandbox package exporting `HOOKS`).
A record is plain data, so reading a fact (an alias, a metric name, a backend list) imports nothing;
the sandbox's own code (`hooks`: the action parser, the replay sandbox) is imported on first use, so a
user who only collects terminal data never imports Playwright or tantivy. Facts that live in a higher
layer (training's metric functions) are named here by string and resolved there, since sandboxes may
import only schemas and the standard library (DESIGN 4).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sandboxes.base import Sandbox
from schemas.domains import KNOWN_DOMAINS, DomainRecord, find_record, lookup_keys
from schemas.records import Action, Environment

# An environment config key a replay may set to run a recording under another backend ("auto" keeps
# the recorded one); the fidelity command's --backend sets it.
REPLAY_BACKEND = "replay_backend"
HOST_BACKEND = "local"  # the backend that runs actions on the host itself, with no isolation


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


@dataclass(frozen=True, kw_only=True)
class DomainSpec(DomainRecord):
    """The domain's record of schemas.domains (name, package, public_task, observation_format, prompt,
    node_ids, renumbered_ids, atif_calls, aliases) and the facts below; `_spec` builds one on its record."""

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
    # Each observation is the whole screen of a shell, its last line the prompt: a failed command shows
    # on it as a shell shows one (the command typed at the prompt, the error, the prompt again), where
    # another domain's failure is the whole observation (training.perturb).
    screen_with_prompt: bool = False
    # Task metadata keys the real sandbox repeats in every observation's `data` (the MCP server a task
    # names); a simulated sandbox copies them from the task the same way (training.simulator).
    task_keys_in_data: tuple[str, ...] = ()
    # Its real sandbox is tested behind the OpenEnv server (tests/sandboxes/serve); sandboxes.serve notes
    # that the others are built as a fidelity replay builds them.
    serve_tested: bool = False

    @property
    def isolated_backends(self) -> tuple[str, ...]:
        """The replay backends that keep actions off the host, the default first: where a served
        sandbox may run (sandboxes.serve's --backend); () where the sandbox has no such choice."""
        return tuple(backend for backend in self.replay_backends if backend != HOST_BACKEND)

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


def _spec(name: str, **facts: Any) -> DomainSpec:
    """The DomainSpec of the domain `name` of schemas.domains: its record's fields and `facts`."""
    record = find_record(name)
    if record is None or record.name != name:
        raise ValueError(f"schemas.domains has no record named {name!r}")
    return DomainSpec(**{f.name: getattr(record, f.name) for f in fields(DomainRecord)}, **facts)


# In schemas.domains.RECORDS's order (schemas.records.DOMAINS).
SPECS = (
    _spec(
        "terminal",
        backends=("docker", "bwrap", "local"),
        replay_backends=("bwrap", "docker"),
        # `harbor`: the terminal sandbox of imported Harbor tasks (sandboxes.harbor) runs their test.sh.
        verifier_kinds=("command", "harbor"),
        scorer="",
        main_metrics=(),
        injected_error="bash: {command}: Input/output error",
        screen_with_prompt=True,
        serve_tested=True,
    ),
    _spec(
        "swe",
        backends=("auto", "bwrap", "docker", "local"),
        replay_backends=("bwrap", "docker"),
        verifier_kinds=("swe_tests",),
        scorer="swe_scores",
        main_metrics=("output_line_f1",),
    ),
    _spec(
        "search",
        backends=("tantivy", "searxng", "json_api"),
        replay_backends=(),
        verifier_kinds=("answer",),
        scorer="search_scores",
        main_metrics=("result_f1", "page_line_f1"),
        action_formats=(("web_extractor", "markdown"),),  # an extracted page
        injected_error="Error: search backend timed out (HTTP 504 Gateway Timeout)",
    ),
    _spec(
        "mcp",
        backends=("bwrap", "local"),
        replay_backends=("bwrap", "local"),
        verifier_kinds=("files", "git_repo", "memory_graph"),
        scorer="mcp_scores",
        # An MCP result may hold no stable value: then its keys.
        main_metrics=("json_value_match", "json_key_f1"),
        injected_error='{{"error": {{"code": -32603, "message": "Internal error: upstream service '
        'unavailable"}}}}',
        task_keys_in_data=("server",),
    ),
    _spec(
        "web",
        backends=("chromium",),
        replay_backends=(),
        verifier_kinds=("site_state", "page_url"),
        scorer="web_scores",
        main_metrics=("tree_f1",),
        serve_tested=True,
    ),
    _spec(
        "os",
        backends=("desktop",),
        replay_backends=(),
        verifier_kinds=("desktop_state",),
        scorer="desktop_scores",
        main_metrics=("node_f1",),
    ),
    _spec(
        "android",
        backends=("appium",),
        replay_backends=(),
        verifier_kinds=("android_state",),
        scorer="android_scores",
        main_metrics=("node_f1",),
    ),
)
# The same names, as schemas.domains finds its records by.
LOOKUP = {key: spec for spec in SPECS for key in lookup_keys(spec)}


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
