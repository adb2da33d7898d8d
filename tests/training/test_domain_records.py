"""Each training consumer of the domain registry (sandboxes.domains) resolves what a record names, on
observations the real sandboxes recorded (fixtures/README.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from sandboxes.domains import SPECS, DomainSpec, domain_spec
from schemas import read_trajectories
from schemas.records import Action
from training.agentworldbench import task_domain
from training.fidelity.agents import collector_argv, parse_args
from training.fidelity.comparison import FALLBACK_METRIC, main_metric, main_score
from training.fidelity.domain_metrics import SCORERS, domain_metrics, domain_scores
from training.observations.parsers import observation_data
from training.perturb import PerturbationConfig
from training.rewards.public_judge import JudgePromptError, public_task
from training.rewards.verifiers.formats import RULES, format_failures

FIXTURES = Path(__file__).parent / "fixtures" / "real_observations.json"
TERMINAL_RUN = Path(__file__).parents[1] / "beam_pipelines" / "fixtures" / "terminal_run"
AGENTS_ARGV = ["--policy", "scripted", "--model-endpoint", "http://127.0.0.1:8000/v1"]


def recorded(spec: DomainSpec) -> list[str]:
    """The texts of the domain's real observations in its own observation format."""
    found = [
        o["text"]
        for o in json.loads(FIXTURES.read_text(encoding="utf-8"))
        if o["domain"] == spec.name and o["format"] == spec.observation_format
    ]
    for trajectory in read_trajectories(str(TERMINAL_RUN)):
        found += [s.observation.text for s in trajectory.steps if trajectory.domain == spec.name]
    assert found, f"no recorded {spec.observation_format} observation of {spec.name}"
    return found


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_scorer_gives_the_main_metrics_and_a_real_observation_matches_itself(spec: DomainSpec) -> None:
    assert spec.scorer in {"", *SCORERS}
    assert set(spec.main_metrics) <= set(domain_metrics(spec.name))
    assert main_metric(spec.name) == (*spec.main_metrics, FALLBACK_METRIC)
    read_on = set()
    for text in recorded(spec):
        row = {"domain": spec.name, FALLBACK_METRIC: 1.0, **domain_scores(spec.name, text, text)}
        assert main_score(row) == 1.0
        read_on.add(next(m for m in main_metric(spec.name) if row.get(m) is not None))
    # The chain is read on the domain's own metric, not only on the fallback, where it names one.
    assert read_on - {FALLBACK_METRIC} or not spec.main_metrics


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_observation_format_has_a_reader_and_a_format_rule(spec: DomainSpec) -> None:
    assert spec.observation_format in RULES
    for text in recorded(spec):
        assert format_failures(spec.name, text, text) == []
        data = observation_data(spec.name, text, Action(kind="", arguments={"name": "tool"}))
        # The terminal's screen has no structure to read; every other form is read into data.
        assert bool(data) == (spec.name != "terminal"), (spec.name, text[:80])


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_public_task_and_the_collector_package_resolve(spec: DomainSpec, tmp_path: Path) -> None:
    for key in {spec.name, spec.package, *spec.aliases}:
        assert public_task(f"lwm/{key}") == spec.public_task
        args = parse_args([*AGENTS_ARGV, "--out", str(tmp_path), "--domain", key])
        assert collector_argv(args, "scripted", "real")[2] == f"collectors.{spec.package}"
    assert importlib.util.find_spec(f"collectors.{spec.package}.__main__") is not None


def test_a_bench_records_task_reads_as_its_domain() -> None:
    assert task_domain("lwm/desktop") == task_domain("os") == "os"
    assert task_domain("robotics") == "robotics"  # no domain: kept, as the judge and the scores show it


def test_an_unknown_domain_is_refused_by_name() -> None:
    with pytest.raises(JudgePromptError, match="the public tasks are terminal, swe, search"):
        public_task("robotics")
    with pytest.raises(SystemExit):
        parse_args([*AGENTS_ARGV, "--out", "x", "--domain", "robotics"])
    assert domain_metrics("overall") == () and main_metric("robotics") == (FALLBACK_METRIC,)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.injected_error], ids=lambda s: s.name)
def test_an_injected_error_is_the_records(spec: DomainSpec) -> None:
    action = Action(kind="command", arguments={"command": "ls -la"}, text="ls -la")
    expected = spec.injected_error.format(command="ls", action="ls -la")
    assert PerturbationConfig(error_rate=1.0).error_text(spec.name, action) == expected
    assert domain_spec("terminal").injected_error == "bash: {command}: Input/output error"
