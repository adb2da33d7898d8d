"""The domain registry (sandboxes.domains): one complete record per domain, one lookup, and each fact
agreeing with the sandbox code and the recordings it describes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxes.android.verify import KIND as ANDROID_STATE
from sandboxes.desktop.verify import KIND as DESKTOP_STATE
from sandboxes.domains import (
    HOST_BACKEND,
    KNOWN_DOMAINS,
    SPECS,
    DomainSpec,
    SandboxHooks,
    domain_spec,
    find_domain,
)
from sandboxes.harbor.verifier import HARBOR
from sandboxes.mcp.actions import error_observation
from sandboxes.mcp.actions import initial_observation as mcp_initial
from sandboxes.mcp.verify import VERIFIER_KINDS as MCP_KINDS
from sandboxes.search.verify import KIND as ANSWER
from sandboxes.swe.domain import recorded_config as swe_config
from sandboxes.swe.verify import SWE_TESTS
from sandboxes.tasks import embedded_tasks
from sandboxes.terminal.domain import recorded_config as terminal_config
from sandboxes.terminal.verify import COMMAND
from sandboxes.web.verify import VERIFIER_KINDS as WEB_KINDS
from schemas import read_trajectories
from schemas.domains import (
    ATIF_CALL_AS_TOOL,
    ATIF_CALL_PER_KEYSTROKE,
    ATIF_CALL_PER_KIND,
    RECORDS,
    DomainRecord,
    find_record,
    lookup_keys,
)
from schemas.records import DOMAINS, Environment

TESTS = Path(__file__).parents[1]
REAL_OBSERVATIONS = TESTS / "training" / "fixtures" / "real_observations.json"
TERMINAL_RUN = TESTS / "beam_pipelines" / "fixtures" / "terminal_run"
# What each domain's sandbox code checks a task's verifier kind against.
SANDBOX_VERIFIER_KINDS = {
    "terminal": {COMMAND, HARBOR},
    "swe": {SWE_TESTS},
    "search": {ANSWER},
    "mcp": set(MCP_KINDS),
    "web": set(WEB_KINDS),
    "os": {DESKTOP_STATE},
    "android": {ANDROID_STATE},
}


def recorded_formats() -> dict[str, set[str]]:
    """The Observation.format of every real observation the tests hold, per domain (the fixtures'
    READMEs say where each was recorded)."""
    found: dict[str, set[str]] = {}
    for o in json.loads(REAL_OBSERVATIONS.read_text(encoding="utf-8")):
        found.setdefault(o["domain"], set()).add(o["format"])
    for trajectory in read_trajectories(str(TERMINAL_RUN)):
        found.setdefault(trajectory.domain, set()).update(s.observation.format for s in trajectory.steps)
    return found


def test_there_is_one_record_per_trajectory_domain_in_the_schemas_order() -> None:
    assert KNOWN_DOMAINS == DOMAINS == tuple(record.name for record in RECORDS)
    assert [spec.name for spec in SPECS] == list(DOMAINS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_spec_extends_its_schemas_record_unchanged(spec: DomainSpec) -> None:
    record = find_record(spec.name)
    assert isinstance(spec, DomainRecord) and record is not None
    assert vars(record).items() <= vars(spec).items()
    assert [find_record(key) for key in lookup_keys(spec)] == [record] * len(lookup_keys(spec))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_record_is_complete(spec: DomainSpec) -> None:
    # Facts every domain has; scorer, main_metrics, replay_backends and injected_error may be empty.
    for field in ("name", "package", "public_task", "observation_format", "backends", "verifier_kinds"):
        assert getattr(spec, field), f"{spec.name}: {field} is empty"
    assert set(spec.replay_backends) <= set(spec.backends) | {"local"}
    assert "simulator" not in spec.backends  # every collector adds it; no record lists it
    assert spec.injected_error.format(command="ls", action="ls -la") is not None
    assert spec.prompt.title and spec.prompt.environment and spec.prompt.actions


def test_the_atif_way_of_each_record_is_one_schemas_atif_knows() -> None:
    ways = {spec.name: spec.atif_calls for spec in SPECS}
    assert set(ways.values()) == {ATIF_CALL_PER_KIND, ATIF_CALL_PER_KEYSTROKE, ATIF_CALL_AS_TOOL}
    assert {name for name, way in ways.items() if way != ATIF_CALL_PER_KIND} == {"terminal", "mcp"}
    assert ways["terminal"] == ATIF_CALL_PER_KEYSTROKE and ways["mcp"] == ATIF_CALL_AS_TOOL


def keys(spec: DomainSpec) -> set[str]:
    return set(lookup_keys(spec))


def test_the_lookup_finds_a_record_by_each_of_its_names_and_no_name_is_shared() -> None:
    every = [key for spec in SPECS for key in keys(spec)]
    assert len(every) == len(set(every)), "two records claim the same name"
    for spec in SPECS:
        for key in keys(spec):
            assert domain_spec(key) is spec
    assert domain_spec("desktop").name == "os" and find_domain("desktop") is domain_spec("os")
    assert find_domain("overall") is None
    with pytest.raises(ValueError, match="no domain 'robotics'; known domains: terminal, swe"):
        domain_spec("robotics")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_package_exports_its_hooks(spec: DomainSpec) -> None:
    hooks = spec.hooks
    assert isinstance(hooks, SandboxHooks)
    assert spec.parse_action is hooks.parse_action and spec.replay_sandbox is hooks.replay_sandbox
    assert spec.action_space == hooks.action_space and "JSON object" in spec.action_space


def test_the_verifier_kinds_are_the_ones_the_sandboxes_check() -> None:
    assert {spec.name: set(spec.verifier_kinds) for spec in SPECS} == SANDBOX_VERIFIER_KINDS


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_package_holds_the_embedded_task_suite_whose_verifiers_the_record_lists(spec: DomainSpec) -> None:
    # The server's and the collectors' default suite: collectors.<package>/tasks.jsonl.
    tasks = embedded_tasks(spec.package)
    assert tasks
    assert {t.task.verifier.get("kind", "none") for t in tasks} <= {*spec.verifier_kinds, "none"}


def test_the_observation_format_is_the_one_the_real_sandboxes_recorded() -> None:
    formats = recorded_formats()
    assert set(formats) == set(DOMAINS)
    for spec in SPECS:  # beside error observations and, for search, extracted pages
        assert spec.observation_format in formats[spec.name], (spec.name, formats[spec.name])


def test_a_domain_marked_as_tested_behind_the_server_is_served_by_its_tests() -> None:
    tests = (TESTS / "sandboxes" / "serve").glob("test_*.py")
    served = "\n".join(p.read_text(encoding="utf-8") for p in tests)
    for spec in SPECS:
        if spec.serve_tested:
            assert f'domain="{spec.name}"' in served, spec.name


@pytest.mark.parametrize(("domain", "recorded"), [("terminal", terminal_config), ("swe", swe_config)])
def test_a_replay_runs_under_each_replay_backend_and_a_host_recording_under_the_first(
    domain: str, recorded
) -> None:
    backends = domain_spec(domain).replay_backends
    assert recorded(Environment(name=domain, backend="local")).backend.kind == backends[0]
    for backend in backends:
        assert recorded(Environment(name=domain, backend="local"), backend).backend.kind == backend


def test_the_isolated_backends_are_the_replay_backends_other_than_the_host() -> None:
    isolated = {spec.name: spec.isolated_backends for spec in SPECS if spec.isolated_backends}
    assert isolated == {"terminal": ("bwrap", "docker"), "swe": ("bwrap", "docker"), "mcp": ("bwrap",)}
    assert all(HOST_BACKEND not in backends for backends in isolated.values())
    assert HOST_BACKEND in domain_spec("mcp").replay_backends  # a fidelity replay may ask for the host


def test_only_the_terminal_shows_a_shell_screen_ending_at_its_prompt() -> None:
    assert [spec.name for spec in SPECS if spec.screen_with_prompt] == ["terminal"]
    assert domain_spec("terminal").initial_text == "agent@sandbox:~$"


def test_the_task_keys_a_record_names_are_in_the_observations_of_its_real_sandbox() -> None:
    assert {spec.name: spec.task_keys_in_data for spec in SPECS if spec.task_keys_in_data} == {
        "mcp": ("server",)
    }
    # The MCP sandbox serves the server its task's metadata names (sandboxes/mcp/sandbox.py).
    for observation in (
        mcp_initial("memory", "n", "1", ["read_graph"]),
        error_observation("memory", "t", 1, "m"),
    ):
        assert observation.data["server"] == "memory"
