"""`--backend simulator --model-endpoint URL` on every collector: the same CLI and schema, the
environment answered by a world model (llama.cpp serving SmolLM2-135M here), recorded as simulated.

The collectors run in this process (their `main(argv)`, as `python -m` calls it) to spare seven
interpreter starts; each run is one short episode of two steps at most.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from collectors.cli import EXIT_USAGE
from schemas import read_trajectories
from tests.llm_server import LLMServer, free_port

# collector module, recorded domain, policy: the scripted one where the first embedded task has
# actions, else the domain's explorer
RUNS = [
    ("terminal", "terminal", "scripted"),
    ("web", "web", "explorer"),
    ("search", "search", "scripted"),
    ("mcp", "mcp", "scripted"),
    ("swe", "swe", "scripted"),
    ("desktop", "os", "scripted"),
    ("android", "android", "explorer"),
]


def collect(module: str, *args: str) -> int:
    main = importlib.import_module(f"collectors.{module}.__main__").main
    return main(["--no-progress", *args])


@pytest.mark.parametrize(("module", "domain", "policy"), RUNS, ids=[run[0] for run in RUNS])
def test_simulated_collection_records_the_model_and_validates(
    module: str, domain: str, policy: str, llm_server: LLMServer, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "data"
    code = collect(
        module, "--backend", "simulator", "--model-endpoint", llm_server.base_url,
        "--model-max-tokens", "4", "--policy", policy, "--episodes", "1", "--max-steps", "2",
        "--out", str(out),
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]
    assert "trajectories written: 1" in printed.out
    found = list(read_trajectories(str(out), validate=True))  # the schema validation of real runs
    assert len(found) == 1
    t = found[0]
    assert t.domain == domain and t.environment.name == domain
    assert t.environment.backend == "simulator"
    # the default model is the endpoint's first (and only) one, recorded with the endpoint
    assert t.environment.config["model"] == llm_server.model
    assert t.environment.config["base_url"] == llm_server.base_url
    assert t.environment.config["generation"]["max_new_tokens"] == 4
    assert t.provenance.simulated is True
    assert t.provenance.collector == f"collectors.{module}"
    assert t.outcome.status in ("completed", "truncated"), t.outcome
    assert 1 <= len(t.steps) <= 2
    assert t.initial_observation.data["simulated"] is True
    for step in t.steps:
        assert step.observation.data["simulated"] is True and step.info["simulated"] is True
        assert step.action.text  # the domain's own parser gave the action its canonical text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "simulator"], "--backend simulator needs --model-endpoint"),
        (["--model-endpoint", "http://127.0.0.1:1/v1"], "--model-endpoint goes with --backend simulator"),
        (["--backend", "bwrap", "--model-name", "m"], "--model-name goes with --model-endpoint"),
        (
            [
                "--backend",
                "simulator",
                "--model-endpoint",
                "http://x/v1",
                "--fallback-simulator",
                "http://x/v1",
            ],
            "--fallback-simulator is for real sandboxes",
        ),
        (["--fallback-model", "m"], "--fallback-model goes with --fallback-simulator"),
    ],
)
def test_simulator_options_out_of_place_are_refused(
    args: list[str], message: str, tmp_path: Path, capsys
) -> None:
    with pytest.raises(SystemExit) as stopped:
        collect("terminal", *args, "--out", str(tmp_path / "data"))
    assert stopped.value.code == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("module", ["web", "android", "desktop"])
def test_collectors_without_a_backend_before_have_one_now(module: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        collect(module, "--backend", "simulator", "--out", str(tmp_path / "data"))
    assert stopped.value.code == EXIT_USAGE
    assert "--backend simulator needs --model-endpoint" in capsys.readouterr().err


def test_an_endpoint_that_does_not_answer_stops_the_run_before_it_starts(tmp_path: Path, capsys) -> None:
    out = tmp_path / "data"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    code = collect("terminal", "--backend", "simulator", "--model-endpoint", dead, "--out", str(out))
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--model-endpoint {dead} does not answer" in err and "start the model server" in err
    assert not out.exists(), "a refused run leaves no output folder"
    code = collect("terminal", "--backend", "bwrap", "--fallback-simulator", dead, "--out", str(out))
    assert code == EXIT_USAGE
    assert f"--fallback-simulator {dead} does not answer" in capsys.readouterr().err
    assert not out.exists()


def test_a_model_the_endpoint_does_not_serve_is_named_with_those_it_does(
    llm_server: LLMServer, tmp_path: Path, capsys
) -> None:
    code = collect(
        "search", "--backend", "simulator", "--model-endpoint", llm_server.base_url,
        "--model-name", "no-such-model", "--out", str(tmp_path / "data"),
    )  # fmt: skip
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "does not serve 'no-such-model'" in err and llm_server.model in err
