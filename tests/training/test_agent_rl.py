"""training.agent_rl for real: SmolLM2-135M-Instruct (the offline base) plays REAL bubblewrap terminals
and the REAL simulator (llama.cpp in this process over SmolLM2's GGUF as the world model), and one GRPO
step of TRL runs on the episodes' tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandboxes.agent_prompt import screen_message, system_prompt
from sandboxes.domains import domain_spec
from schemas.invalid_actions import invalid_action_observation
from tests.llm_server import smollm2_gguf
from training.agent_rl.__main__ import main, pick_tasks
from training.agent_rl.play import Agent, Sampling, play, real_factory

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
TASK = "files-mkdir-tree"


@pytest.fixture(scope="module")
def agent() -> Agent:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.bases import resolve_base

    path = resolve_base("smollm2-135m-instruct")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    return Agent(model, AutoTokenizer.from_pretrained(path), Sampling(temperature=0.0, max_reply_tokens=12))


def test_an_episode_on_the_real_terminal_masks_exactly_the_screens(agent: Agent) -> None:
    task = pick_tasks(None, [TASK])[0]
    sandbox = real_factory("bwrap")()
    sandbox.start()
    try:
        played = play(agent, sandbox, task, max_steps=2, seed=5)
    finally:
        sandbox.close()
    tokens, tok = played.tokens, agent.tokenizer
    # greedy SmolLM2-135M answers in prose, not JSON: two invalid actions, each shown back as an error
    reply = "The current screen is:\n- Agent: sandbox\n"
    assert played.replies == [reply, reply] and played.actions == ["invalid", "invalid"]
    assert (played.status, played.reward, played.verifier) == ("truncated", 0.0, "command")
    assert len(tokens.completion_ids) == len(tokens.logprobs) == len(tokens.env_mask)
    # the agent's tokens are its two replies as sampled: 12 tokens each, cut at the bound
    agent_ids = tokens.agent_tokens()
    assert len(agent_ids) == 24 and [tok.decode(agent_ids[:12]), tok.decode(agent_ids[12:])] == [reply, reply]
    # reply, screen, reply: the mask is 0 on one run of tokens between the two replies, and only there
    shown = [t for t, m in zip(tokens.completion_ids, tokens.env_mask, strict=True) if not m]
    assert tokens.env_mask == [1] * 12 + [0] * len(shown) + [1] * 12
    assert all(lp == 0.0 for lp, m in zip(tokens.logprobs, tokens.env_mask, strict=True) if not m)
    assert all(lp <= 0.0 for lp, m in zip(tokens.logprobs, tokens.env_mask, strict=True) if m)
    # ... and that run is exactly the first reply's turn closed and the second screen's turn opened
    second = screen_message(invalid_action_observation("no JSON object in reply"))
    assert tok.decode(shown) == f"<|im_end|>\n<|im_start|>user\n{second}<|im_end|>\n<|im_start|>assistant\n"
    # the whole sequence is the chat template over the episode's messages, the last reply left open
    first = (
        tok.decode(tokens.prompt_ids)
        .split("<|im_start|>user\n")[1]
        .removesuffix("<|im_end|>\n<|im_start|>assistant\n")
    )
    assert first.startswith("Current screen:\n")
    messages = [{"role": "system", "content": system_prompt(task, domain_spec("terminal"))}]
    messages += [{"role": "user", "content": first}, {"role": "assistant", "content": reply}]
    messages += [{"role": "user", "content": second}, {"role": "assistant", "content": reply}]
    assert tok.decode(tokens.ids) + "<|im_end|>\n" == tok.apply_chat_template(messages, tokenize=False)


def test_one_grpo_step_in_the_simulator_then_the_real_terminal(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    argv = ["--world-model", str(smollm2_gguf()), "--world-model-max-tokens", "48", "--task", TASK]
    argv += ["--steps", "1", "--generations", "2", "--max-episode-steps", "2", "--eval-episodes", "1"]
    argv += ["--max-reply-tokens", "12", "--lr", "1e-4", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    rollouts = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    # one GRPO step: the task's group of 2 whole episodes in the simulator, judged by the simulated verifier
    assert [(r["step"], r["task_id"]) for r in rollouts] == [(1, TASK), (1, TASK)]
    assert {r["verifier"] for r in rollouts} == {"simulated:command"}
    assert all(r["status"] == "truncated" and len(r["actions"]) == 2 for r in rollouts)
    assert results["simulated"]["by_step"]["1"]["episodes"] == 2
    # TRL counted only the agent's tokens (env_mask) as the completion: 2 replies of at most 12 tokens
    (logged,) = results["training"]["log"]
    assert logged["completions/mean_length"] == sum(r["agent_tokens"] for r in rollouts) / 2
    assert all(r["observation_tokens"] > 0 for r in rollouts)
    # weights move exactly when the group's rewards differ (equal rewards: zero advantage, no gradient)
    scores = [r["reward"] or 0.0 for r in rollouts]
    change = results["training"]["max_weight_change"]
    assert (change > 0) == (scores[0] != scores[1])
    # the real evaluation: one bwrap episode before and one after, the difference recomputed from them
    before, after = results["episodes"]["before"], results["episodes"]["after"]
    assert [(e["task_id"], e["verifier"]) for e in before + after] == [(TASK, "command")] * 2
    assert before[0]["seed"] == after[0]["seed"]
    difference = results["real_difference"]
    assert difference["difference"] == (after[0]["reward"] or 0.0) - (before[0]["reward"] or 0.0)
    assert (difference["ci_low"], difference["trajectories"], difference["turns"]) == (None, 1, 1)
    assert results["real_before"]["mean_reward"] == (before[0]["reward"] or 0.0)
    assert "after - before" in printed and "no interval (one task)" in printed


def test_usage_errors_exit_2_before_any_model_loads(tmp_path: Path, capsys) -> None:
    base = ["--world-model", "none.gguf", "--out", str(tmp_path / "run")]
    assert main([*base, "--task", "files-rename", "--task", "no-such-task"]) == 2
    assert "unknown task id(s) no-such-task in the embedded suite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*base, "--generations", "1"])
    assert exited.value.code == 2
    assert "--generations must be at least 2" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    assert [t.id for t in pick_tasks(None, ["files-rename", "files-mkdir-tree"])] == [
        "files-rename",
        "files-mkdir-tree",
    ]
