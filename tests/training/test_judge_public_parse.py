"""The public AgentWorldBench judge's reading of replies (rewards/public_judge.py), on the reply forms its
evaluation code handles: reasoning blocks closed, nested, unclosed on either side; the answer tag closed,
repeated, unclosed or missing; JSON fenced, bare, broken in the ways it repairs; scores as floats,
fractions and out-of-range numbers. And the prompts folder's layout and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.records import DOMAINS
from training.rewards.public_judge import (
    DIMENSIONS,
    JudgePromptError,
    check_prompts,
    drop_reasoning,
    object_backward,
    objects_forward,
    parse_reply,
    prompt_path,
    public_task,
    read_prediction,
    system_prompt,
)

SCORES = dict(zip(DIMENSIONS, (4, 3, 5, 4, 2), strict=True))
OTHER = dict.fromkeys(DIMENSIONS, 1)
VERDICT = json.dumps({"strengths": ["same files"], "weaknesses": ["wrong size"], "scores": SCORES})
DRAFT = json.dumps({"scores": OTHER})
TOOL_RESULT = json.dumps({"ok": True})


def tagged(body: str) -> str:
    return f"<final_evaluation>\n{body}\n</final_evaluation>"


def fenced(body: str, language: str = "json") -> str:
    return f"```{language}\n{body}\n```"


READABLE = {
    "reasoning, then the tagged fenced verdict": (
        f"<think>compare the screens</think>\nFormat is fine.\n{tagged(fenced(VERDICT))}"
    ),
    "a draft verdict inside the reasoning is not read": f"<think>{tagged(fenced(DRAFT))}</think>\n"
    + tagged(fenced(VERDICT)),
    "nested reasoning blocks": f"<think>a <think>{DRAFT}</think> b</think>{tagged(fenced(VERDICT))}",
    "the last of two answer blocks": f"{tagged(fenced(DRAFT))}\nOn reflection:\n{tagged(fenced(VERDICT))}",
    "an answer block cut before its closing tag": f"<final_evaluation>\n{fenced(VERDICT)}",
    "reasoning left open stops at the answer tag": f"<think>hmm {DRAFT}\n{tagged(fenced(VERDICT))}",
    "a closing mark without its opening drops what precedes it": f"{DRAFT}</think>{VERDICT}",
    "no answer tag: a fence without a language": f"Verdict:\n{fenced(VERDICT, language='')}",
    "the last fence with scores wins over a later one without": (
        f"{fenced(DRAFT)}\n{fenced(VERDICT)}\nExample of a tool result:\n{fenced(TOOL_RESULT)}"
    ),
    "no fence: the last bare object with scores": f'I saw {{"x": 1}}. {DRAFT} then {VERDICT} and {{"y": 2}}',
    "repairs: bare and single-quoted keys, trailing commas": tagged(
        "{strengths: ['same files',], 'scores': {format: 4, 'factuality': 3, consistency: 5, "
        "realism: 4, quality: 2,},}"
    ),
    "JSON broken outside the scores: the scores alone": tagged(
        fenced('{"strengths": ["a" "b"], "scores": ' + json.dumps(SCORES) + "}")
    ),
}


@pytest.mark.parametrize("reply", READABLE.values(), ids=READABLE.keys())
def test_readable_reply_forms(reply: str) -> None:
    assert parse_reply(reply) == (SCORES, "")


def test_score_values_are_read_rounded_and_clamped_and_missing_ones_are_zero() -> None:
    scores = {"format": 3.6, "factuality": "4/5", "consistency": 7, "realism": "n/a", "quality": None}
    assert parse_reply(tagged(fenced(json.dumps({"scores": scores})))) == (
        {"format": 4, "factuality": 4, "consistency": 5, "realism": 0, "quality": 0},
        "",
    )
    assert parse_reply('{"scores": {"format": 0, "realism": -2}}')[0] == dict.fromkeys(DIMENSIONS, 0)


UNREADABLE = {
    "": "empty",
    "   \n": "empty",
    "The prediction is good, I give it a four.": "no JSON object",
    f"<think>still deciding {VERDICT}": "no JSON object",
    tagged(fenced(json.dumps(SCORES))): "no `scores` object",
    tagged('{"scores": [4, 3, 5, 4, 2]}'): "no `scores` object",
    tagged('{"scores": {"format": 4, "factuality": }'): "does not parse",
}


@pytest.mark.parametrize(("reply", "says"), UNREADABLE.items())
def test_unreadable_replies_say_why(reply: str, says: str) -> None:
    scores, error = parse_reply(reply)
    assert scores is None and says in error


def test_the_backward_reading_takes_over_when_no_object_closes_forwards() -> None:
    text = 'note {"a": {\\""b": 1}} end'
    assert objects_forward(text) is None
    assert object_backward(text) == '{"a": {\\""b": 1}}'
    assert object_backward("no braces") is None


def test_reasoning_removal_keeps_the_answer() -> None:
    assert drop_reasoning("<THINK>a</think>b<think>c</think>d") == "bd"
    assert drop_reasoning("x<think>y") == "x"
    assert drop_reasoning("x<think>y<final_evaluation>z") == "x<final_evaluation>z"
    assert drop_reasoning("a</think>b</think>c") == "c"
    assert drop_reasoning("plain") == "plain"


def test_every_domain_has_its_public_folder_and_a_task_path_reads_as_its_last_part() -> None:
    assert {public_task(d) for d in DOMAINS} == {"terminal", "swe", "search", "mcp", "web", "os", "android"}
    assert public_task("lwm/terminal") == "terminal"
    with pytest.raises(JudgePromptError, match="'robotics' has no public judge prompt.*terminal, swe"):
        public_task("robotics")


def test_a_missing_or_empty_prompt_is_an_error_naming_the_expected_path(tmp_path: Path) -> None:
    (tmp_path / "terminal").mkdir()
    (tmp_path / "terminal" / "judge_system_prompt.txt").write_text("Grade the terminal screen.\n")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "judge_system_prompt.txt").write_text("\n")
    assert system_prompt(tmp_path, "terminal") == "Grade the terminal screen.\n"
    expected = str(prompt_path(tmp_path, "mcp"))
    assert expected == str(tmp_path / "mcp" / "judge_system_prompt.txt")
    with pytest.raises(JudgePromptError, match=f"no judge prompt at {expected}"):
        check_prompts(tmp_path, ["terminal", "mcp"])
    with pytest.raises(JudgePromptError, match="is empty"):
        check_prompts(tmp_path, ["web"])
    with pytest.raises(JudgePromptError, match="no such directory"):
        check_prompts(tmp_path / "absent", ["terminal"])


def test_the_prediction_is_read_from_the_reply_as_the_public_evaluation_reads_it() -> None:
    block = "<predicted_observation>\n$ ls\na.txt\n</predicted_observation>"
    draft = "<think>draft <predicted_observation>x</predicted_observation></think>"
    assert read_prediction(draft + block) == "$ ls\na.txt"
    assert read_prediction("<think>cut short\n<predicted_observation>\n$ ls\na.") == "$ ls\na."
    assert read_prediction("<predicted_observation></predicted_observation>") == ""
    assert read_prediction("**Environment Observation:**\n$ ls") == "**Environment Observation:**\n$ ls"
    assert read_prediction("<think>only thinking") == "No output"
