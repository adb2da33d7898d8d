from __future__ import annotations

import copy
from collections import defaultdict

from beam_pipelines.dead_letter import DEAD_LETTER
from beam_pipelines.stages.common import AGENTWORLDBENCH, AGENTWORLDBENCH_TASKS, CORPORA, CPT, RL, SFT
from beam_pipelines.stages.format import Formatter
from schemas.chat_tokens import shared_tokenizer
from schemas.records import Verification
from schemas.render import AGENTWORLDBENCH_FIELDS, cpt_document, is_echo_turn, record_messages, target_text


def _pairs(recorded):
    # every third trajectory in the test split, the rest in train
    return [("test" if i % 3 == 0 else "train", t) for i, t in enumerate(recorded)]


def _format(pairs, emit=CORPORA, seq_len=32768) -> dict[str, list]:
    formatter = Formatter(emit, None, seq_len, 4)
    out = defaultdict(list)
    for split, t in pairs:
        for tagged in formatter.format(split, t):
            out[tagged.tag].append(tagged.value)
    return out


def test_format_emits_every_corpus(recorded):
    pairs = _pairs(recorded)
    turns = sum(len(t.steps) for _, t in pairs)
    test_turns = sum(len(t.steps) for s, t in pairs if s == "test")
    echo = {
        f"{t.trajectory_id}:{k}": is_echo_turn(s) for _, t in pairs for k, s in enumerate(t.steps, start=1)
    }
    out = _format(pairs)
    assert [(s.doc_id, s.text) for s in out[CPT]] == [(t.trajectory_id, cpt_document(t)) for _, t in pairs]
    assert {s.doc_id: s.echo for s in out[SFT]} == echo and len(out[SFT]) == turns
    assert len(out[RL]) == turns
    awb = [(path, tuple(record)) for path, record in out[AGENTWORLDBENCH]]
    assert awb == [("agentworldbench/terminal_test.jsonl", AGENTWORLDBENCH_FIELDS)] * test_turns
    assert out[DEAD_LETTER] == []


def test_sft_samples_and_agentworldbench_prompts_render_identically(recorded):
    """For the same turn, the SFT prompt equals the evaluation's messages from the AgentWorldBench record,
    text for text, and so renders to the same chat-template string."""
    pairs = [("test", t) for t in recorded[:4]]
    out = _format(pairs, emit=(SFT, AGENTWORLDBENCH))
    records = {record["id"]: record for _, record in out[AGENTWORLDBENCH]}
    tok = shared_tokenizer(None)
    assert len(out[SFT]) == len(records) == sum(len(t.steps) for _, t in pairs)
    for sample in out[SFT]:
        record = records[sample.doc_id]
        expected = record_messages(record)
        assert list(sample.messages) == expected, sample.doc_id
        assert tok.render(list(sample.messages)) == tok.render(expected)
        reference = record["response"][-1].removeprefix("**Environment Observation:**\n")
        assert sample.text == f"<predicted_observation>\n{reference}\n</predicted_observation>"


def test_long_histories_are_trimmed_to_the_budget(recorded):
    t = max(recorded, key=lambda t: len(t.steps))
    budget = 1500
    samples = _format([("train", t)], emit=(SFT,), seq_len=budget)[SFT]
    tok = shared_tokenizer(None)
    for s in samples:
        rendered = tok.render([*s.messages, {"role": "assistant", "content": s.text}])
        assert len(tok.tokenizer.encode(rendered, add_special_tokens=False)) <= budget
        assert s.messages[0]["role"] == "system"
        assert t.initial_observation.text in s.messages[0]["content"]
    assert any(len(s.messages) < 2 * int(s.doc_id.rsplit(":", 1)[1]) for s in samples)


def test_a_prompt_that_cannot_fit_goes_to_the_dead_letter(recorded):
    t = recorded[0]
    assert target_text(t.steps[0].observation)
    dead = _format([("train", t)], emit=(SFT,), seq_len=64)[DEAD_LETTER]
    assert [(d.stage, d.reason) for d in dead] == [("format", "prompt_over_seq_len")] * len(t.steps)


def test_task_rewards_reach_the_rl_prompts_and_the_agentworldbench_task_lines(recorded):
    rewarded, plain = copy.deepcopy(recorded[0]), recorded[1]
    rewarded.outcome.reward = 0.5
    rewarded.outcome.verification = Verification(verifier="command", reward=0.5)
    out = _format([("test", rewarded), ("test", plain)])
    by_trajectory = {record["trajectory_id"]: record for _, record in out[RL]}
    first = by_trajectory[rewarded.trajectory_id]
    assert (first["task_reward"], first["task_verifier"]) == (0.5, "command")
    assert by_trajectory[plain.trajectory_id]["task_reward"] is None
    lines = {record["trajectory_id"]: (path, record) for path, record in out[AGENTWORLDBENCH_TASKS]}
    path, record = lines[rewarded.trajectory_id]
    assert path == "agentworldbench/tasks/terminal_test.jsonl"
    assert record["task_reward"] == 0.5 and record["task_id"] == rewarded.task.id
    assert record["total_turns"] == len(rewarded.steps)
    assert lines[plain.trajectory_id][1]["task_verifier"] == ""
