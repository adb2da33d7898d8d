"""`--backend simulator --model-endpoint URL` on every collector: the same CLI and schema, the
environment answered by a world model (llama.cpp serving SmolLM2-135M here), recorded as simulated.

The collectors run in this process (their `main(argv)`, as `python -m` calls it) to spare seven
interpreter starts; each run is one short episode of two steps at most.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.cli import EXIT_USAGE
from schemas import read_trajectories
from tests.collectors.conftest import QUICK_POLICY, run_main
from tests.llm_server import LLMServer, free_port, smollm2_gguf


@pytest.mark.parametrize(("module", "policy"), QUICK_POLICY.items(), ids=list(QUICK_POLICY))
def test_simulated_collection_records_the_model_and_validates(
    module: str, policy: str, llm_server: LLMServer, tmp_path: Path, capsys
) -> None:
    domain = "os" if module == "desktop" else module  # the AgentWorldBench name desktop records
    out = tmp_path / "data"
    code = run_main(
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
        (["--model-gguf", "/no/such/model.gguf"], "--model-gguf goes with --backend simulator"),
        (["--backend", "simulator", "--model-gguf", "/no/such/model.gguf"], "no such file"),
        (
            ["--backend", "simulator", "--model-gguf", "m.gguf", "--model-endpoint", "http://x/v1"],
            "not allowed with argument",
        ),
        (["--simulated-verdicts", "vote"], "invalid choice: 'vote'"),
    ],
)
def test_simulator_options_out_of_place_are_refused(
    args: list[str], message: str, tmp_path: Path, capsys
) -> None:
    assert run_main("terminal", *args, "--out", str(tmp_path / "data")) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("module", ["web", "android", "desktop"])
def test_collectors_without_a_backend_before_have_one_now(module: str, tmp_path: Path, capsys) -> None:
    assert run_main(module, "--backend", "simulator", "--out", str(tmp_path / "data")) == EXIT_USAGE
    assert "--backend simulator needs --model-endpoint" in capsys.readouterr().err


def test_an_endpoint_that_does_not_answer_stops_the_run_before_it_starts(tmp_path: Path, capsys) -> None:
    out = tmp_path / "data"
    dead = f"http://127.0.0.1:{free_port()}/v1"
    code = run_main("terminal", "--backend", "simulator", "--model-endpoint", dead, "--out", str(out))
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"--model-endpoint {dead} does not answer" in err and "start the model server" in err
    assert not out.exists(), "a refused run leaves no output folder"
    code = run_main("terminal", "--backend", "bwrap", "--fallback-simulator", dead, "--out", str(out))
    assert code == EXIT_USAGE
    assert f"--fallback-simulator {dead} does not answer" in capsys.readouterr().err
    assert not out.exists()


def test_a_model_the_endpoint_does_not_serve_is_named_with_those_it_does(
    llm_server: LLMServer, tmp_path: Path, capsys
) -> None:
    code = run_main(
        "search", "--backend", "simulator", "--model-endpoint", llm_server.base_url,
        "--model-name", "no-such-model", "--out", str(tmp_path / "data"),
    )  # fmt: skip
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "does not serve 'no-such-model'" in err and llm_server.model in err


def test_a_gguf_world_model_runs_in_the_collector_and_gives_verdicts_by_likelihood(
    tmp_path: Path, capsys
) -> None:
    """--model-gguf: llama.cpp in the collector's process (SmolLM2-135M's GGUF), which can score, so
    the task's check is decided by likelihood (training/simulated_verify.py) and the scores recorded."""
    tasks = tmp_path / "tasks.jsonl"
    task = {"id": "done", "actions": [{"command": "touch done.txt"}]}
    task["verifier"] = {"kind": "command", "checks": ["test -f done.txt"]}
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "data"
    code = run_main(
        "terminal", "--backend", "simulator", "--model-gguf", str(smollm2_gguf()), "--model-max-tokens", "4",
        "--policy", "scripted", "--tasks", str(tasks), "--max-steps", "1", "--out", str(out),
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err[-3000:]
    (t,) = read_trajectories(str(out), validate=True)
    config = t.environment.config
    assert (config["backend"], config["model"], config["verdicts"]) == (
        "llama.cpp",
        str(smollm2_gguf()),
        "likelihood",
    )
    verification = t.outcome.verification
    assert verification.verifier == "simulated:command" and verification.details["method"] == "likelihood"
    (check,) = verification.details["checks"]
    likelihood = check["log_likelihood"]
    assert check["said"] == ("PASS" if likelihood["PASS"] > likelihood["FAIL"] else "FAIL")
    assert t.outcome.reward == (1.0 if check["said"] == "PASS" else 0.0)
    assert check["tokens"]["PASS"] > 0 and check["tokens"]["FAIL"] > 0
