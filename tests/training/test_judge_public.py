"""`--prompts-dir`: the public AgentWorldBench judge protocol over HTTP, for the benchmark CLI and the
fidelity judge. A real OpenAI-compatible HTTP server (tests/training/test_backends.py) logs every request
and answers in the public reply format, so the tests see exactly what a judge receives; the prompts tree
is written here in the public layout with our own text. test_agentworldbench.py runs the same against a
real llama.cpp model
(test_the_public_judge_with_a_real_model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas import read_trajectories
from schemas.render import reference_observation
from tests.training.conftest import TERMINAL_RUN
from tests.training.test_agentworldbench import (
    FUTURE,
    REFERENCE,
    TERMINAL_PROMPT,
    bench,
    lines,
    marked_record,
    write_prompts,
)
from tests.training.test_backends import scripted_chat_server
from training.backends.openai_http import OpenAIBackend
from training.fidelity.teacher_forced import EvalSettings, judge_rows
from training.rewards.judge import PROJECT_PROMPT
from training.rewards.public_judge import DIMENSIONS, JudgePromptError

SCORES = dict(zip(DIMENSIONS, (4, 3, 5, 4, 2), strict=True))
PREDICTED = "PREDICTED-SCREEN\n$ "


def public_reply(scores: dict[str, int] = SCORES) -> str:
    verdict = json.dumps({"strengths": ["prompt kept"], "weaknesses": ["output differs"], "scores": scores})
    answer = f"<final_evaluation>\n```json\n{verdict}\n```\n</final_evaluation>"
    return f"<think>Compare both screens.</think>\nFormat: fine.\n{answer}"


@pytest.fixture
def prompts_dir(tmp_path: Path) -> Path:
    return write_prompts(tmp_path)


def expected_head(record: dict, prediction: str) -> str:
    """The user message up to the instructions, as the public evaluation lays it out (written out here
    independently of the code under test)."""
    k = record["turn_idx"]
    turns = zip(record["prompt"][: k - 1], record["response"][: k - 1], strict=True)
    history = "".join(f"{p}\n{r}\n\n" for p, r in turns)
    context = f"# Context (Historical Interactions):\n\n{history}" if history else ""
    current = record["current_prompt"] or record["prompt"][k - 1]
    head = (
        f"{context}\n\n# Current Turn:\n\n{current}\n\n"
        f"**World Model Output (Simulated):**\n```\n{prediction}\n```\n\n"
        f"**Ground Truth (Real Output):**\n```\n{reference_observation(record).strip()}\n```\n\n"
    )
    return head.lstrip()


def test_benchmark_judge_sends_the_public_layout_and_reads_the_public_reply(
    tmp_path: Path, prompts_dir: Path
) -> None:
    trajectories = sorted(read_trajectories(str(TERMINAL_RUN)), key=lambda t: len(t.steps), reverse=True)
    first, second = trajectories[:2]
    records = [marked_record(first, 3), marked_record(second, 1)]
    records[1]["task"] = "lwm/terminal"  # a public task path reads as its last part
    data, preds, judged = (tmp_path / name for name in ("terminal_test.jsonl", "preds.jsonl", "judged.jsonl"))
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    # What infer stores. The public judge reads the raw reply its own way (here a block left open);
    # without a reply it takes the prediction, less the observation marker.
    unclosed = f"<think>a screen</think>\n<predicted_observation>\n{PREDICTED}"
    rows = [
        {"id": records[0]["id"], "reply": unclosed, "prediction": "OUR-READING", "tagged": False},
        {"id": records[1]["id"], "prediction": f"**Environment Observation:**\n{PREDICTED}", "tagged": True},
    ]
    preds.write_text("".join(json.dumps(row) + "\n" for row in rows))
    replies = iter(["I cannot decide.", public_reply(), public_reply()])  # the first is read as a failure
    with scripted_chat_server(lambda messages: next(replies)) as server:
        judge = ["judge", "--data", str(data), "--predictions", str(preds), "--judge-url", server.base_url]
        judge += ["--out", str(judged), "--concurrency", "1", "--no-progress"]
        done = bench(*judge, "--prompts-dir", str(prompts_dir))
        assert done.returncode == 0, done.stderr[-3000:]
        requests = server.requests
        # The unreadable reply was asked again: three requests for two samples.
        assert len(requests) == 3
        for request in requests:
            assert [m["role"] for m in request["messages"]] == ["system", "user"]
            assert request["messages"][0]["content"] == TERMINAL_PROMPT
            # The public evaluation's sampling: temperature 0.6, up to 32768 new tokens.
            assert (request["temperature"], request["max_tokens"]) == (0.6, 32768)
        users = [r["messages"][1]["content"] for r in requests]
        # The retry is the same request with the next seed, so that it draws a new sample.
        assert users[0] == users[1] and [r["seed"] for r in requests] == [0, 1, 0]
        for record, user in zip(records, users[1:], strict=True):
            head = expected_head(record, PREDICTED.strip())
            assert user.startswith(head), (user[:2000], head[:2000])
            instructions = user[len(head) :]
            assert "<final_evaluation>" in instructions and all(d in instructions for d in DIMENSIONS)
            # The judge never sees the world model's system prompt, nor anything after turn_idx.
            assert record["system_str"] not in user and FUTURE not in user
            assert user.count(REFERENCE) == 1
        assert "# Context (Historical Interactions)" not in users[2]  # turn 1 has no history

        rows = {r["id"]: r for r in lines(judged)}
        assert set(rows) == {r["id"] for r in records}
        for row in rows.values():
            assert row["scores"] == SCORES and row["error"] == ""
            assert row["prompt"].startswith("public:terminal:")
        expected = sum((v - 1) / 4 * 100 for v in SCORES.values()) / len(SCORES)
        out_json = tmp_path / "scores.json"
        assert bench("score", "--judged", str(judged), "--json", str(out_json)).returncode == 0
        assert json.loads(out_json.read_text())["overall"]["score"] == pytest.approx(expected)

        # Judgements with another prompt do not go into the same file.
        judged.write_text(judged.read_text().splitlines(keepends=True)[0])
        mixed = bench(*judge)
        assert mixed.returncode == 2 and "judge into a new --out" in mixed.stderr, mixed.stderr
        assert len(server.requests) == 3


def test_a_domain_without_its_prompt_stops_the_judge_before_any_request(
    tmp_path: Path, prompts_dir: Path
) -> None:
    trajectory = next(iter(read_trajectories(str(TERMINAL_RUN))))
    record = {**marked_record(trajectory, 1), "task": "mcp"}
    data, preds = tmp_path / "mcp_test.jsonl", tmp_path / "preds.jsonl"
    data.write_text(json.dumps(record) + "\n")
    preds.write_text(json.dumps({"id": record["id"], "prediction": "{}", "tagged": True}) + "\n")
    with scripted_chat_server(lambda messages: public_reply()) as server:
        done = bench(
            "judge", "--data", str(data), "--predictions", str(preds), "--judge-url", server.base_url,
            "--out", str(tmp_path / "judged.jsonl"), "--prompts-dir", str(prompts_dir),
        )  # fmt: skip
        assert server.requests == []
    assert done.returncode == 2
    assert f"no judge prompt at {prompts_dir.resolve() / 'mcp' / 'judge_system_prompt.txt'}" in done.stderr


def test_fidelity_judge_rows_judge_the_public_way(prompts_dir: Path) -> None:
    trajectory = max(read_trajectories(str(TERMINAL_RUN)), key=lambda t: len(t.steps))
    rows = [
        {"trajectory_id": trajectory.trajectory_id, "turn_idx": 2, "error": "", "prediction": PREDICTED},
        {"trajectory_id": trajectory.trajectory_id, "turn_idx": 3, "error": "timeout", "prediction": ""},
    ]
    settings = EvalSettings(concurrency=1, progress=False)
    partial = {"format": 5, "factuality": "3/5"}  # the other dimensions are left out of the means
    with scripted_chat_server(lambda messages: public_reply(partial)) as server:
        backend = OpenAIBackend(server.base_url)
        judge_rows(backend, rows, [trajectory], settings, prompts_dir=prompts_dir)
        with pytest.raises(JudgePromptError, match="no judge prompt at"):
            judge_rows(backend, rows, [trajectory], settings, prompts_dir=prompts_dir.parent)
        backend.close()
        assert len(server.requests) == 1  # the failed turn has nothing to judge; the bad folder asks nothing
        system, user = (m["content"] for m in server.requests[0]["messages"])
    assert system == TERMINAL_PROMPT
    action, real = trajectory.steps[1].action.text, trajectory.steps[1].observation.text
    assert f"# Current Turn:\n\n### Turn 2\n\n**Action:**\n{action}" in user
    assert f"**Ground Truth (Real Output):**\n```\n{real.strip()}\n```" in user
    judged = rows[0]["judge"]
    assert judged["scores"] == {**dict.fromkeys(DIMENSIONS, 0), "format": 5, "factuality": 3}
    assert judged["percent"] == {"format": 100.0, "factuality": 50.0}
    assert judged["prompt"].startswith("public:terminal:") and judged["prompt"] != PROJECT_PROMPT
    assert rows[1]["judge"]["scores"] is None and "no predicted observation" in rows[1]["judge"]["error"]
