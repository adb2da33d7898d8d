"""python -m training.agentworldbench infer/judge/score on records rendered from REAL trajectories, with a
REAL llama.cpp server (SmolLM2-135M) as both the world model and the judge.

The records hold whole trajectories in their lists, as public files may: every text after turn_idx, and
the reference, carry marks, and a relay in front of the server records every chat it is sent, so the
test sees exactly what reached the model and the judge."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import read_trajectories
from schemas.render import agentworldbench_record, chat_messages, parse_prediction
from tests.llm_server import LLMServer
from tests.training.conftest import OFFLINE, ROOT, TERMINAL_RUN
from tests.training.test_backends import ScriptedServer, scripted_chat_server
from training.agentworldbench import main, score
from training.backends.base import GenerationConfig
from training.backends.openai_http import OpenAIBackend
from training.rewards.judge import DIMENSIONS

REFERENCE, FUTURE = "REFERENCE-MARK", "FUTURE-MARK"
TERMINAL_PROMPT = "TERMINAL-JUDGE: you grade simulated terminal screens against real ones.\n"


def write_prompts(root: Path) -> Path:
    """A prompts folder in the public Qwen-AgentWorld layout (our own text), with the terminal prompt."""
    (root / "prompts" / "terminal").mkdir(parents=True)
    (root / "prompts" / "terminal" / "judge_system_prompt.txt").write_text(TERMINAL_PROMPT)
    return root / "prompts"


def bench_process(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m training.agentworldbench` as users run it."""
    argv = [sys.executable, "-m", "training.agentworldbench", *args]
    return subprocess.run(argv, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=timeout)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    """The same CLI's `main(argv)` in this process (no interpreter and torch import per call), its exit
    code and printed text in the same shape."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def marked_record(trajectory, turn_idx: int, current_prompt: str | None = None) -> dict:
    """The record for `turn_idx` with the whole trajectory in its lists; the reference and every later
    text marked."""
    record = agentworldbench_record(trajectory, len(trajectory.steps))
    k = turn_idx
    record["id"], record["turn_idx"] = f"{trajectory.trajectory_id}:{k}", k
    record["current_prompt"] = record["prompt"][k - 1] if current_prompt is None else current_prompt
    record["prompt"][k:] = [f"{p}\n{FUTURE}" for p in record["prompt"][k:]]
    record["response"][k - 1] += f"\n{REFERENCE}"
    record["response"][k:] = [f"{r}\n{FUTURE}" for r in record["response"][k:]]
    return record


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def relay(llm_server: LLMServer) -> Iterator[ScriptedServer]:
    """An OpenAI-compatible server that records each request and has the llama.cpp server answer it."""
    # On a loaded two-core machine one request of SmolLM2 can take a minute: the relay waits for it.
    backend = OpenAIBackend(llm_server.base_url, llm_server.model, timeout=600)
    with scripted_chat_server(lambda messages: backend.complete(messages, GenerationConfig(24))) as server:
        yield server
    backend.close()


@pytest.mark.llm
@pytest.mark.timeout(1200)  # six requests to a CPU model; see `relay`
def test_infer_judge_score_sees_nothing_after_turn_idx(tmp_path: Path, relay: ScriptedServer) -> None:
    trajectories = sorted(read_trajectories(str(TERMINAL_RUN)), key=lambda t: len(t.steps), reverse=True)
    first, second = trajectories[:2]
    assert len(first.steps) > 3 and len(second.steps) > 2
    turns = [(first, 2, ""), (first, 3, None), (second, 1, None)]
    records = [marked_record(t, k, current) for t, k, current in turns]
    data = tmp_path / "terminal_test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    preds, judged = tmp_path / "preds.jsonl", tmp_path / "judged.jsonl"

    infer = ["infer", "--data", str(data), "--model", relay.base_url, "--out", str(preds)]
    # One request at a time: the server answers them in turn, and a queued one must not time out.
    infer += ["--concurrency", "1", "--no-progress"]
    done = bench_process(*infer)
    assert done.returncode == 0, done.stderr[-3000:]
    # The model got each turn's chat exactly as a record cut at turn_idx renders it (an empty
    # current_prompt read as prompt[turn_idx-1]), and neither the reference nor any later turn.
    sent = sorted(json.dumps(r["messages"]) for r in relay.requests)
    assert sent == sorted(json.dumps(chat_messages(t, k)) for t, k, _ in turns)
    assert not [m for r in relay.requests for m in r["messages"] if REFERENCE in m["content"]]
    assert not [m for r in relay.requests for m in r["messages"] if FUTURE in m["content"]]
    rows = lines(preds)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in records)
    for row in rows:
        # What the public evaluator reads in the reply is what was stored.
        reading = parse_prediction(row["reply"])
        assert (row["prediction"], row["tagged"]) == (reading.content, reading.tagged)
        assert row["format_failure"] is not row["tagged"]
    # Resumable: a rerun finds every id done and asks nothing.
    again = bench(*infer)
    assert again.returncode == 0 and "3 already done, 0 predicted" in again.stdout
    assert lines(preds) == rows and len(relay.requests) == len(records)

    judge = ["judge", "--data", str(data), "--predictions", str(preds), "--judge-url", relay.base_url]
    judge += ["--out", str(judged), "--max-chars", "300", "--concurrency", "1", "--no-progress"]
    done = bench(*judge)
    assert done.returncode == 0, done.stderr[-3000:]
    judge_chats = [r["messages"][1]["content"] for r in relay.requests[len(records) :]]
    assert len(judge_chats) == len(records)
    for chat in judge_chats:
        # The reference is response[turn_idx-1], shown once as the real observation; nothing later.
        assert chat.count(REFERENCE) == 1 and chat.index(REFERENCE) > chat.index("## Real observation")
        assert FUTURE not in chat
    for t, k, _ in turns[:2]:
        # The judge sees the turn before (its tail at least, the texts being cut to 300 characters).
        previous, action = t.steps[k - 2].observation.text[-100:], t.steps[k - 1].action.text
        assert any(previous in chat and action in chat for chat in judge_chats)
    verdicts = lines(judged)
    assert sorted(v["id"] for v in verdicts) == sorted(r["id"] for r in records)
    for v in verdicts:
        # A 135M judge often rambles: then the failure is recorded with its reason, never a crash.
        if v["scores"] is None:
            assert v["error"]
        else:
            assert set(v["scores"]) == set(DIMENSIONS) and all(1 <= s <= 5 for s in v["scores"].values())
    assert bench(*judge).returncode == 0 and lines(judged) == verdicts

    out_json = tmp_path / "scores.json"
    done = bench("score", "--judged", str(judged), "--json", str(out_json))
    assert done.returncode == 0, done.stderr
    table = json.loads(out_json.read_text())
    failed = sum(v["scores"] is None for v in verdicts)
    tagged = 100 * sum(r["tagged"] for r in rows) / len(rows)
    for key in ("overall", "macro"):
        assert table[key]["samples"] == 3 and table[key]["failed"] == failed
        assert table[key]["format_validity"] == pytest.approx(tagged)
        assert table[key]["strict"] <= (table[key]["score"] if failed < 3 else 0)
    assert table["domains"]["terminal"]["samples"] == 3
    for word in ("terminal", "overall", "macro", "strict", "format%", "factuality"):
        assert word in done.stdout


@pytest.mark.llm
@pytest.mark.timeout(900)  # up to three requests to a CPU model on a loaded machine; see `relay`
def test_the_public_judge_with_a_real_model(tmp_path: Path, relay: ScriptedServer) -> None:
    """`--prompts-dir` (tests/training/test_judge_public.py) with a real model judging."""
    prompts_dir = write_prompts(tmp_path)
    trajectory = max(read_trajectories(str(TERMINAL_RUN)), key=lambda t: len(t.steps))
    record = marked_record(trajectory, 2)
    data, preds, judged = (tmp_path / name for name in ("terminal_test.jsonl", "preds.jsonl", "judged.jsonl"))
    data.write_text(json.dumps(record) + "\n")
    prediction = trajectory.steps[1].observation.text  # the real screen: a judge may well score it high
    preds.write_text(json.dumps({"id": record["id"], "prediction": prediction, "tagged": True}) + "\n")
    done = bench(
        "judge", "--data", str(data), "--predictions", str(preds), "--judge-url", relay.base_url,
        "--out", str(judged), "--prompts-dir", str(prompts_dir), "--max-chars", "300",
        "--max-new-tokens", "48", "--concurrency", "1", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert 1 <= len(relay.requests) <= 3
    for request in relay.requests:
        system, user = (m["content"] for m in request["messages"])
        assert system == TERMINAL_PROMPT and (request["temperature"], request["max_tokens"]) == (0.6, 48)
        assert user.startswith("# Context (Historical Interactions):\n\n### Turn 1\n\n**Action:**\n")
        assert "<final_evaluation>" in user and FUTURE not in user and user.count(REFERENCE) == 1
    [row] = lines(judged)
    assert row["prompt"].startswith("public:terminal:") and row["raw"]
    # A 135M judge rarely writes the verdict: then it was asked three times and says why it failed.
    if row["scores"] is None:
        assert len(relay.requests) == 3 and row["error"].endswith("(3 attempts)")
    else:
        assert set(row["scores"]) == set(DIMENSIONS) and all(0 <= v <= 5 for v in row["scores"].values())


def _row(task: str, value: int | None, tagged: bool = True) -> dict:
    if value is None:
        return {
            "task": task,
            "scores": None,
            "percent": {},
            "error": "unreadable",
            "format_failure": not tagged,
        }
    percent = (value - 1) / 4 * 100
    return {
        "task": task,
        "scores": dict.fromkeys(DIMENSIONS, value),
        "percent": dict.fromkeys(DIMENSIONS, percent),
        "format_failure": not tagged,
    }


def test_score_reports_the_public_numbers_and_the_strict_and_macro_ones() -> None:
    rows = [
        _row("terminal", 5),
        _row("terminal", 3, tagged=False),
        _row("terminal", None, tagged=False),
        _row("mcp", None),
        _row("web", 1),
    ]
    table = score({str(n): row for n, row in enumerate(rows)})
    terminal, mcp, web = (table["domains"][d] for d in ("terminal", "mcp", "web"))
    # The public script: the mean over the samples the judge scored, beside the count of failed ones.
    assert (terminal["score"], terminal["factuality"], terminal["failed"]) == (75.0, 75.0, 1)
    assert (mcp["score"], mcp["failed"], web["score"]) == (None, 1, 0.0)
    # Strict: a failed sample counts as the lowest score.
    assert (terminal["strict"], mcp["strict"], web["strict"]) == (50.0, 0.0, 0.0)
    assert terminal["format_validity"] == pytest.approx(100 / 3)
    overall, macro = table["overall"], table["macro"]
    assert (overall["samples"], overall["failed"], overall["score"], overall["strict"]) == (5, 2, 50.0, 30.0)
    assert overall["format_validity"] == 60.0
    # Macro: each domain weighs the same (the public README's Overall); mcp has no valid score.
    assert (macro["domains"], macro["score"]) == (3, 37.5)
    assert macro["strict"] == pytest.approx(50 / 3)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"turn_idx": 9}, "turn_idx 9 must lie in 1..total_turns"),
        ({"prompt": ["### Turn 1\n\n**Action:**\nls"]}, "prompt must be a list of at least turn_idx=2"),
        ({"response": []}, "response must be a list of at least turn_idx=2 turns, has 0"),
        ({"total_turns": None}, "total_turns"),
        ({"id": "same"}, "id 'same' already at"),
    ],
)
def test_bad_records_are_clear_errors_naming_file_and_line(tmp_path: Path, change: dict, says: str) -> None:
    trajectory = next(iter(read_trajectories(str(TERMINAL_RUN))))
    good = {**agentworldbench_record(trajectory, 2), "id": "same"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "id": "other", **change}) + "\n")
    done = bench(
        "infer", "--data", str(bad), "--model", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "p")
    )
    assert done.returncode == 2 and "bad.jsonl:3: " in done.stderr and says in done.stderr, done.stderr


def test_a_record_missing_fields_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "terminal"}\n')
    done = bench(
        "infer", "--data", str(bad), "--model", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "p")
    )
    assert done.returncode == 2 and "bad.jsonl:1" in done.stderr and "missing" in done.stderr


def test_predictions_from_an_older_infer_are_a_clear_error(tmp_path: Path) -> None:
    trajectory = next(iter(read_trajectories(str(TERMINAL_RUN))))
    data, preds = tmp_path / "terminal_test.jsonl", tmp_path / "preds.jsonl"
    record = agentworldbench_record(trajectory, 1)
    data.write_text(json.dumps(record) + "\n")
    # Before infer stored what the public evaluator reads, an untagged reply had no prediction.
    preds.write_text(json.dumps({"id": record["id"], "reply": "ls", "prediction": None}) + "\n")
    judge = [
        "judge",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--judge-url",
        "http://127.0.0.1:9/v1",
    ]
    done = bench(*judge, "--out", str(tmp_path / "judged.jsonl"))
    assert done.returncode == 2 and "preds.jsonl" in done.stderr and "rerun `infer`" in done.stderr
