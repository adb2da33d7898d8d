"""Delta targets downstream: the simulator, fidelity and AgentWorldBench inference rebuild full
observations from a delta model's edit scripts; a script that does not apply is a counted format
failure; a corpus built with `--target delta` trains, and its checkpoint says it answers in deltas.

The delta model here is the HTTP server of `scripted_chat_server` answering with the real edit
scripts of recorded real terminal trajectories (what a perfectly trained delta model would write).
"""

from __future__ import annotations

import json

import pytest

from schemas import read_trajectories
from schemas.edit_script import HEADER, target_form
from schemas.records import Task, Trajectory
from schemas.render import (
    agentworldbench_record,
    extract_prediction,
    previous_observation,
    record_previous_observation,
    turn_target,
)
from tests.training.conftest import TERMINAL_RUN, build_corpus
from tests.training.test_backends import scripted_chat_server
from training.agentworldbench import infer
from training.backends.base import GenerationConfig
from training.backends.openai_http import OpenAIBackend
from training.fidelity.closed_loop import closed_loop
from training.fidelity.metrics import aggregate
from training.fidelity.noise_floor import NoiseFloor
from training.fidelity.teacher_forced import EvalSettings, teacher_forced
from training.loop import main as train_main
from training.simulator import SimulatedSandbox
from training.targets import GGUF_CORPUS_KEY, trained_target

BROKEN = f"<predicted_observation>\n{HEADER}\n@@ replace [99] @@\nnothing\n</predicted_observation>"


@pytest.fixture(scope="module")
def trajectory() -> Trajectory:
    """The recorded trajectory with the most turns whose real target is an edit script."""
    recorded = sorted(read_trajectories(str(TERMINAL_RUN)), key=lambda t: t.trajectory_id)

    def scripts(t: Trajectory) -> int:
        bodies = [extract_prediction(turn_target(t, k, "delta")) for k in range(1, len(t.steps) + 1)]
        return sum(target_form(b) == "delta" for b in bodies)

    return max(recorded, key=scripts)


def delta_world(t: Trajectory, broken_turn: int | None = None):
    """A world model that answers turn k (the number of user messages) with t's real delta target."""

    def reply(messages: list[dict]) -> str:
        k = sum(m["role"] == "user" for m in messages)
        return BROKEN if k == broken_turn else f"<think>\nok\n</think>\n\n{turn_target(t, k, 'delta')}"

    return reply


def delta_sandbox(url: str, t: Trajectory) -> SimulatedSandbox:
    """A terminal simulated by the model at `url` in delta targets, reset to `t`'s first screen."""
    sim = SimulatedSandbox(
        OpenAIBackend(url), "terminal", target="delta", initial_observation=t.initial_observation
    )
    sim.reset(Task(id="delta"))
    return sim


def test_the_simulator_hands_out_full_observations_rebuilt_from_scripts(trajectory):
    t = trajectory
    with scripted_chat_server(delta_world(t)) as server:
        sim = delta_sandbox(server.base_url, t)
        for step in t.steps:
            result = sim.step(step.action)
            assert result.info["format_failure"] is False
            assert result.observation.text == step.observation.text
        # the history the model saw holds full observations, never scripts
        last = server.requests[-1]["messages"]
        assert all(HEADER not in m["content"] for m in last if m["role"] == "assistant")
        assert sim.describe().config["target"] == "delta"


def test_a_script_that_does_not_apply_is_a_format_failure_not_a_crash(trajectory):
    t = trajectory
    with scripted_chat_server(delta_world(t, broken_turn=1)) as server:
        sim = delta_sandbox(server.base_url, t)
        broken = sim.step(t.steps[0].action)
        assert broken.info["format_failure"] is True
        assert "does not apply" in broken.info["format_error"]
        assert "no single node [99]" in broken.info["format_error"]  # says what is wrong
        assert broken.observation.data["format_error"] == broken.info["format_error"]
        assert broken.observation.data["raw_reply"] == BROKEN
        # the episode goes on
        assert sim.step(t.steps[1].action).observation.data["simulated"] is True


def test_fidelity_scores_rebuilt_observations_and_counts_a_broken_script(trajectory):
    t = trajectory
    settings = EvalSettings(config=GenerationConfig(max_new_tokens=64), concurrency=2, progress=False)
    delta = EvalSettings(**{**settings.__dict__, "target": "delta"})
    with scripted_chat_server(delta_world(t)) as server:
        rows = teacher_forced(OpenAIBackend(server.base_url), [t], NoiseFloor(), delta)
        loop = closed_loop(OpenAIBackend(server.base_url), [t], NoiseFloor(), delta)
        # read as a full-target model's, the same replies are scripts, not observations
        as_full = teacher_forced(OpenAIBackend(server.base_url), [t], NoiseFloor(), settings)
    assert [r["prediction"] for r in rows] == [s.observation.text for s in t.steps]
    assert all(r["exact"] and not r["format_failure"] for r in rows + loop)
    assert aggregate(as_full)["overall"]["exact"] < 1.0
    broken_turn = 2
    with scripted_chat_server(delta_world(t, broken_turn)) as server:
        rows = teacher_forced(OpenAIBackend(server.base_url), [t], NoiseFloor(), delta)
    failed = [r for r in rows if r["format_failure"]]
    assert [r["turn_idx"] for r in failed] == [broken_turn] and "does not apply" in failed[0]["format_error"]
    overall = aggregate(rows)["overall"]
    assert overall["tagged"] == pytest.approx(1 - 1 / len(rows)) and overall["exact"] < 1.0


def test_agentworldbench_infer_rebuilds_scripts(trajectory, tmp_path):
    t = trajectory
    records = [agentworldbench_record(t, k) for k in range(1, len(t.steps) + 1)]
    with scripted_chat_server(delta_world(t, broken_turn=3)) as server:
        infer(
            records,
            OpenAIBackend(server.base_url),
            tmp_path / "p.jsonl",
            config=GenerationConfig(),
            progress=False,
            target="delta",
        )
    rows = {r["turn_idx"]: r for r in map(json.loads, (tmp_path / "p.jsonl").read_text().splitlines())}
    for k, step in enumerate(t.steps, start=1):
        assert rows[k]["format_failure"] is (k == 3)
        if k != 3:
            assert rows[k]["prediction"] == step.observation.text and rows[k]["target"] == "delta"
    assert "does not apply" in rows[3]["format_error"]


def test_a_records_previous_observation_is_the_one_a_script_edits(trajectory):
    t = trajectory
    demos = [("### Turn 1\n\n**Action:**\nls", "**Environment Observation:**\n$ ls\n\n## How to answer\n")]
    for k in range(1, len(t.steps) + 1):
        for record in (agentworldbench_record(t, k), agentworldbench_record(t, k, demos)):
            assert record_previous_observation(record) == previous_observation(t, k).text
    public = {**agentworldbench_record(t, 1), "system_str": "You simulate a shell."}
    assert record_previous_observation(public) == ""


def test_trained_target_is_read_from_a_checkpoint_or_run_directory(tmp_path):
    assert trained_target(str(tmp_path)) == "full"  # no record: a base answers in full
    checkpoint = tmp_path / "run" / "checkpoint-000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "corpus.json").write_text(json.dumps({"target": "delta"}))
    assert trained_target(str(checkpoint)) == trained_target(str(tmp_path / "run")) == "delta"
    (checkpoint / "corpus.json").write_text(json.dumps({"target": "patch"}))
    with pytest.raises(ValueError, match="patch"):
        trained_target(str(checkpoint))
    assert trained_target("http-model-name") == "full"


def test_trained_target_is_read_from_a_gguf_files_metadata(tmp_path):
    # training.export writes the checkpoint's corpus.json under this key (training/export/to_gguf.py)
    from gguf import GGUFWriter

    path = tmp_path / "model.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_string(GGUF_CORPUS_KEY, json.dumps({"corpus": "c", "target": "delta"}))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert trained_target(str(path)) == "delta"


def test_a_delta_corpus_trains_and_its_checkpoint_answers_in_deltas(tmp_path):
    corpus = build_corpus(
        tmp_path / "corpus", "--target", "delta", "--emit", "sft", "--split-ratios", "0.8,0.2,0"
    )
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["config"]["target"] == "delta"
    assert 0 < manifest["target_tokens_p95"]["terminal"] < 4096
    out = tmp_path / "sft"
    train = ["--data", str(corpus), "--base", "qwen3-tiny"]
    train += ["--out", str(out), "--max-steps", "2", "--batch-size", "1", "--warmup-steps", "1"]
    train += ["--eval-batches", "1"]  # the validation pass runs; its loss is not what this test checks
    assert train_main("sft", train) == 0  # `python -m training.sft`, in this process
    assert json.loads((out / "summary.json").read_text())["tokens"] > 0
    checkpoint = out / "checkpoint-000002"
    assert json.loads((checkpoint / "corpus.json").read_text())["target"] == "delta"
    assert trained_target(str(out)) == "delta"
    from training.backends import make_backend

    backend = make_backend(str(out))
    try:
        sim = SimulatedSandbox(backend, "terminal", generation=GenerationConfig(max_new_tokens=8))
        assert sim.target == "delta"  # read from the checkpoint
        sim.reset(Task(id="t"))
        result = sim.step(next(read_trajectories(str(TERMINAL_RUN))).steps[0].action)
        # two steps of random weights write no valid answer: a recorded format failure, never a crash
        assert result.info["format_failure"] is True and result.observation.data["raw_reply"] is not None
    finally:
        backend.close()
