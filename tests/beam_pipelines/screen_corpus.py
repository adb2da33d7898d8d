"""What the corpus tests of the screen domains (android, os) share: the secrets they plant, the
screenshot every observation carries, the trajectory record around a domain's steps, the pipeline
run over three trajectories, and the reading of its AgentWorldBench and RL files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from beam_pipelines.build_corpus import main
from beam_pipelines.stages.common import AGENTWORLDBENCH, CORPORA
from beam_pipelines.stages.format import Formatter
from schemas import read_trajectories
from schemas.records import (
    Action,
    Attachment,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Step,
    Task,
    Trajectory,
)
from schemas.render import AGENTWORLDBENCH_FIELDS
from tests.beam_pipelines.conftest import write_dataset

T0 = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
EMAIL = "jane.doe@example.org"
# Screenshot bytes: a PNG signature and a marker the corpus files must never hold.
PNG = b"\x89PNG\r\n\x1a\n" + b"SCREENSHOT-PIXELS"


def screen_observation(observation_format: str, text: str, data: dict[str, Any]) -> Observation:
    return Observation(
        observation_format, text, data, [Attachment("screenshot.png", "image/png", content=PNG)]
    )


def screen_trajectory(
    i: int,
    environment: Environment,
    task: Task,
    steps: list[tuple[Action, Observation]],
    *,
    initial: Observation,
    explorer: str,
    collector: str,
    step_s: float,
) -> Trajectory:
    """Episode `i` of the domain's explorer (its seed), completed: `steps`, one a second from T0, each
    taking `step_s`."""
    return Trajectory(
        trajectory_id=f"{environment.name}-{i:04d}",
        domain=environment.name,
        environment=environment,
        task=task,
        policy=Policy(explorer, {"seed": i}),
        initial_observation=initial,
        steps=[Step(k, a, o, T0 + timedelta(seconds=k), step_s) for k, (a, o) in enumerate(steps)],
        outcome=Outcome("completed"),
        provenance=Provenance(collector, "0.3.0", "test-host", T0, T0 + timedelta(seconds=9)),
    )


def agentworldbench_records(t: Trajectory) -> list[tuple[str, dict]]:
    """(path, record) of every AgentWorldBench record the Formatter writes for `t` in the test split."""
    return [o.value for o in Formatter(CORPORA, None, 32768, 1).format("test", t) if o.tag == AGENTWORLDBENCH]


def build_test_corpus(root: Path, trajectories: list[Trajectory]) -> tuple[Path, list[Trajectory]]:
    """The corpus pipeline's output for `trajectories`, all in the test split, and the trajectories as
    the raw dataset stores them (attachments by content hash)."""
    raw = write_dataset(root / "raw", trajectories)
    stored = sorted(read_trajectories(str(raw)), key=lambda t: t.trajectory_id)
    args = ["--input", str(raw), "--output", str(root / "out"), "--split-ratios", "0,0,1", "--shards", "1"]
    assert main([*args, "--direct_num_workers=1", "--direct_running_mode=in_memory"]) == 0
    return root / "out", stored


def read_jsonl(*paths: Path) -> list[dict]:
    return [json.loads(line) for path in paths for line in path.read_text().splitlines()]


def rl_records(out: Path) -> list[dict]:
    return read_jsonl(*sorted((out / "rl").rglob("*.jsonl")))


def holds_secret(step: Step) -> bool:
    return any(v in step.action.text + step.observation.text for v in (TOKEN, EMAIL))


def recorded_turns(
    records: list[dict], stored: list[Trajectory], task: str
) -> Iterator[tuple[str, str, Step]]:
    """Each turn a record shows before its own (action text, observation response, the recorded step),
    after checking the record's fields, its task and its count of turns."""
    assert len(records) == sum(len(t.steps) for t in stored)
    by_id = {t.trajectory_id: t for t in stored}
    for record in records:
        assert tuple(record) == AGENTWORLDBENCH_FIELDS and record["task"] == task
        t = by_id[next(tid for tid in by_id if record["id"].startswith(tid))]
        assert record["total_turns"] == len(t.steps)
        for turn, step in enumerate(t.steps[: record["turn_idx"]]):
            yield record["prompt"][turn].split("**Action:**\n", 1)[1], record["response"][turn], step


def assert_no_secret_or_screenshot(out: Path) -> None:
    """No file of the corpus holds a planted secret or a screenshot's bytes."""
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    assert not any(TOKEN.encode() in body or EMAIL.encode() in body for body in texts)
    assert not any(b"SCREENSHOT-PIXELS" in body for body in texts)


def assert_screenshot_stored_once(stored: list[Trajectory]) -> None:
    """The raw dataset keeps each screenshot once, by content hash, as the schema stores attachments."""
    attachments = {a.uri for t in stored for s in t.steps for a in s.observation.attachments}
    assert len(attachments) == 1 and next(iter(attachments)).startswith("attachments/sha256/")
