"""The GRPO example end to end on CPU: llama.cpp's SmolLM2 as the world model, `python -m sandboxes.serve`
over the simulated terminal, two GRPO steps of SmolLM2-135M-Instruct with TRL, its checkpoint reloaded."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from examples.grpo_simulated_terminal import BASE, main
from tests.import_graph import ROOT
from tests.llm_server import LLMServer
from training.bases import resolve_base

SCRIPT = ROOT / "examples" / "grpo_simulated_terminal.py"
TASKS = ["files-create-notes", "files-append"]  # command verifiers: the simulated verifier asks about them
TRAIN_LAYERS = 1


def test_help_lists_examples_and_options() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for text in ("examples:", "--simulator", "--server", "--steps", "--num-generations", "summary"):
        assert text in done.stdout


@pytest.mark.llm
def test_grpo_steps_against_the_served_simulated_terminal(llm_server: LLMServer, tmp_path) -> None:
    asked_before = llm_server.chat_requests()
    output = tmp_path / "run"
    summary = main(
        [
            "--simulator",
            llm_server.base_url,
            "--simulator-model",
            llm_server.model,
            "--output",
            str(output),
            "--task-ids",
            *TASKS,
            "--steps",
            "2",
            "--num-generations",
            "2",
            "--max-completion-length",
            "64",
            "--tool-turns",
            "1",
            "--world-max-tokens",
            "48",
            "--train-layers",
            str(TRAIN_LAYERS),
            "--learning-rate",
            "1e-4",
            # The 135M policy seldom earns a task reward, so the group's advantages are often all 0:
            # the entropy bonus keeps the update (and this test's weight check) from depending on luck.
            "--entropy-coef",
            "0.01",
        ]  # fmt: skip
    )

    # Two optimizer steps ran, each logged with its loss and reward.
    assert summary["steps"] == 2
    logged = [entry for entry in summary["log_history"] if "loss" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert all("reward" in entry and "tools/call_frequency" in entry for entry in logged)

    # Every rollout was an episode of the server: reset there, ended there with "done", rewarded or
    # counted as without a task reward.
    assert summary["rollouts"] == summary["episodes_started"] == 4
    assert summary["rollouts_with_task_reward"] + summary["rollouts_without_task_reward"] == 4
    assert summary["valid_tool_calls"] <= summary["tool_calls"]
    counts = dict(re.findall(r"(sessions opened|episodes ended) (\d+)", summary["server"]))
    assert int(counts["sessions opened"]) >= 2 and int(counts["episodes ended"]) == 4, summary["server"]
    # The simulated verifier asked the world model about each check of each ended episode.
    assert llm_server.chat_requests() - asked_before >= 4
    assert json.loads((output / "summary.json").read_text())["steps"] == 2

    # The checkpoint loads and generates; the top layer moved, the frozen ones did not.
    final = output / "final"
    tokenizer = AutoTokenizer.from_pretrained(final)
    trained = AutoModelForCausalLM.from_pretrained(final).eval()
    base = AutoModelForCausalLM.from_pretrained(resolve_base(BASE)).eval()
    layers = len(base.model.layers)
    moved = {
        name
        for name, weight in trained.state_dict().items()
        if not torch.equal(weight, base.state_dict()[name])
    }
    top = f"model.layers.{layers - 1}."
    assert moved and all(name.startswith((top, "model.norm.")) for name in moved), sorted(moved)[:5]
    ids = tokenizer("agent@sandbox:~$", return_tensors="pt")
    with torch.no_grad():
        out = trained.generate(**ids, max_new_tokens=2, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 2
