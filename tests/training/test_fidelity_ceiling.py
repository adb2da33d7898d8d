"""The fidelity ceiling is fair, replies are read the public evaluator's way, and the report says so.

Pure logic on hand-made trajectories: no sandbox or model runs here (test_fidelity_cli does that)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sandboxes.terminal.config import BwrapBackend, DockerBackend
from sandboxes.terminal.domain import recorded_config, replay_sandbox
from schemas.records import Action, Environment, Observation, Trajectory
from schemas.render import parse_prediction
from tests.schemas.factories import trajectory as build_trajectory
from training.fidelity.metrics import aggregate, score_turn
from training.fidelity.noise_floor import NoiseFloor, build_noise_floor, volatile_template
from training.fidelity.replay import Replay, replay_counts, replay_environment
from training.fidelity.report import build_report
from training.fidelity.report_html import write_all
from training.fidelity.teacher_forced import scored_row

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SCREEN = "agent@sandbox:~$ ls\nnotes.txt  report.md\nagent@sandbox:~$"


def trajectory(
    observations: list[str], tid: str = "t1", domain: str = "terminal", environment: Environment | None = None
) -> Trajectory:
    steps = [
        (Action("command", {"command": f"cmd{k}"}, f"cmd{k}"), Observation("terminal_screen", text))
        for k, text in enumerate(observations)
    ]
    return build_trajectory(
        steps,
        trajectory_id=tid,
        domain=domain,
        environment=environment or Environment("terminal", "bwrap"),
        initial=Observation("terminal_screen", "agent@sandbox:~$"),
        at=NOW,
    )


def tag(text: str) -> str:
    return f"<predicted_observation>\n{text}\n</predicted_observation>"


def test_a_model_that_behaves_like_a_real_run_scores_the_ceiling_not_above() -> None:
    # The second replay alone moved a value. Scored against a pooled template (all three runs) any
    # value of that form passes; real run B, scored leave-one-out, fails. The model must face the same.
    recorded, a, b = "job 7 done\n$", "job 7 done\n$", "job 8 done\n$"
    t = trajectory([recorded])
    floor = build_noise_floor([t], {"t1": [Replay("t1", 0, [a]), Replay("t1", 1, [b])]})
    ceiling = aggregate(floor.real_vs_real)["overall"]["stable_exact"]
    model = scored_row("model", "teacher_forced", t, 1, parse_prediction(tag("job 9 done\n$")), floor)
    assert ceiling == 0.5 and model["stable_exact"] == 0.5
    assert score_turn(
        "terminal", "job 9 done\n$", volatile_template(recorded, [a, b])
    ).stable_exact  # lenient
    # Metrics that do not depend on the volatile spans stay plain values.
    assert model["exact"] is False and model["tagged"] is True and model["format_valid"] is True


def test_without_replays_every_turn_is_scored_against_its_recorded_text() -> None:
    t = trajectory([SCREEN])
    row = scored_row("model", "teacher_forced", t, 1, parse_prediction(tag(SCREEN)), NoiseFloor())
    assert row["exact"] and row["stable_exact"] and row["volatile_share"] == 0.0


def test_untagged_reply_is_scored_on_its_content_with_format_validity_zero() -> None:
    t = trajectory([SCREEN])
    untagged = scored_row(
        "model",
        "teacher_forced",
        t,
        1,
        parse_prediction(f"**Environment Observation:**\n{SCREEN}"),
        NoiseFloor(),
    )
    assert untagged["edit_similarity"] == 1.0 and untagged["stable_exact"]
    assert not untagged["tagged"] and not untagged["format_valid"] and untagged["format_failure"]
    reply = f"<think>\n{tag('no')}\n</think>\n{tag(SCREEN)}"
    tagged = scored_row("model", "teacher_forced", t, 1, parse_prediction(reply), NoiseFloor())
    assert tagged["exact"] and tagged["tagged"] and tagged["format_valid"] and not tagged["format_failure"]


def test_each_turn_reports_its_volatile_share() -> None:
    recorded = "at 09:51:07\n$"
    t = trajectory([recorded])
    floor = build_noise_floor([t], {"t1": [Replay("t1", 0, ["at 10:02:44\n$"])]})
    share = floor.volatile_share(t, 1)
    # Leave-one-out with one replay: its template is the recording alone, so nothing is volatile for it...
    assert share == 0.0
    floor = build_noise_floor(
        [t], {"t1": [Replay("t1", 0, ["at 10:02:44\n$"]), Replay("t1", 1, ["at 11:13:21\n$"])]}
    )
    # ...with two, each template holds the other replay: hours, minutes and seconds, 6 of 13 characters.
    assert floor.volatile_share(t, 1) == 6 / len(recorded)
    assert floor.summary()["volatile_share_max"] == 6 / len(recorded)


def test_replays_use_the_recordings_own_environment() -> None:
    docker = Environment(
        "terminal",
        "docker",
        "agentworld/terminal:7",
        {"cpus": 2.0, "memory": "1g", "width": 120, "height": 30},
    )
    config = recorded_config(docker)
    assert config.backend == DockerBackend(image="agentworld/terminal:7", cpus=2.0, memory="1g")
    assert (config.width, config.height) == (120, 30)
    # A recording on the host is never replayed on the host; another backend's limits do not carry over.
    local = Environment("terminal", "local", "", {"cpus": None, "network": True})
    assert recorded_config(local).backend == BwrapBackend()
    assert recorded_config(docker, "bwrap").backend == BwrapBackend()
    # The fidelity command's --backend reaches the terminal's replay sandbox through the environment.
    t = trajectory([SCREEN], environment=docker)
    assert replay_environment(t, "auto") is t.environment
    overridden = replay_sandbox(replay_environment(t, "bwrap"))
    assert overridden.config.backend == BwrapBackend() and overridden.config.width == 120


def test_replay_counts_name_failures_and_retries() -> None:
    runs = {"a": [Replay("a", 0, ["x"], attempts=2), Replay("a", 1, [], "SandboxError: boom", attempts=3)]}
    counts = replay_counts(runs)
    assert counts == {
        "replays": 2,
        "finished": 1,
        "failed": 1,
        "retries": 3,
        "errors": ["a/1: SandboxError: boom"],
    }


def _rows(reply: str, t: Trajectory, floor: NoiseFloor) -> dict[str, list[dict]]:
    model = [scored_row("model", "teacher_forced", t, 1, parse_prediction(reply), floor)]
    repeat = [scored_row("repeat_previous", "teacher_forced", t, 1, parse_prediction("$"), floor)]
    return {
        "model/teacher_forced": model,
        "repeat_previous/teacher_forced": repeat,
        "real_vs_real": floor.real_vs_real,
    }


def test_report_without_ceiling_says_so_and_names_a_model_without_the_format(tmp_path: Path) -> None:
    t = trajectory([SCREEN])
    rows = _rows("**Environment Observation:**\nagent@sandbox:~$ ls", t, NoiseFloor())
    noise = {"skipped": "no real-vs-real ceiling: --replays 0 skipped the real replays. Scores ..."}
    report = build_report(rows, {"request_errors": 0}, noise)
    assert report["headline"]["terminal"]["ceiling"] is None
    assert report["headline"]["terminal"]["systems"]["model/teacher_forced"]["share_of_ceiling"] is None
    assert report["notes"][0].startswith("No real-vs-real ceiling")
    assert any("never produced the <predicted_observation> format" in n for n in report["notes"])
    turns = [{**r, "action": "ls", "real": SCREEN} for r in rows["model/teacher_forced"]]
    paths = write_all(report, tmp_path, turns)
    html = paths["html"].read_text()
    assert "No real-vs-real ceiling" in html and "none" in html
    assert "No real-vs-real ceiling" in paths["md"].read_text()


def test_report_reads_top_down_with_every_turn_worst_first(tmp_path: Path) -> None:
    recorded = "at 09:51:07\n$"
    t1, t2 = trajectory([recorded, SCREEN], "t1"), trajectory([SCREEN], "t2", domain="mcp")
    replays = {"t1": [Replay("t1", r, ["at 10:02:44\n$", SCREEN]) for r in range(2)]}
    floor = build_noise_floor([t1, t2], replays)
    model = [
        scored_row("model", "teacher_forced", t, k, parse_prediction(tag(text)), floor)
        for t, k, text in ((t1, 1, "at 23:59:59\n$"), (t1, 2, "wrong"), (t2, 1, "{}"))
    ]
    rows = {"model/teacher_forced": model, "real_vs_real": floor.real_vs_real}
    noise = {
        "replays": 2,
        "backend": "bwrap",
        "attempts": 3,
        "summary": floor.summary(),
        "counts": replay_counts(replays),
    }
    report = build_report(rows, {"request_errors": 0, "model": {"backend": "x"}}, noise)
    terminal, model_terminal = (
        report["headline"]["terminal"],
        report["headline"]["terminal"]["systems"]["model/teacher_forced"],
    )
    ceiling = terminal["ceiling"]["edit_similarity"]
    assert 0.5 < ceiling < 1.0  # the replays' clock differs from the recording's
    assert model_terminal["share_of_ceiling"] == pytest.approx(model_terminal["edit_similarity"] / ceiling)
    assert report["headline"]["mcp"]["ceiling"] is None  # no mcp replays
    steps = {(t.trajectory_id, k): s for t in (t1, t2) for k, s in enumerate(t.steps, 1)}
    turns = [
        {**r, "action": "a", "real": steps[(r["trajectory_id"], r["turn_idx"])].observation.text}
        for r in model
    ]
    html = write_all(report, tmp_path, turns)["html"].read_text()
    # headline table, then plots, then the turns (all of them, worst first), then the configuration
    order = [html.index(s) for s in ('class="headline"', "<svg", 'class="turns"', "<summary>Configuration")]
    assert order == sorted(order)
    assert html.count('<details class="turn') == 3 and html.count('class="diff"') == 3
    assert html.index("t1 turn 2") < html.index("t1 turn 1")  # "wrong" is the worst turn
    assert 'id="dom-mcp"' in html and "#dom-mcp:checked~.turns .turn:not(.dom-mcp)" in html
    assert "<pre>{" not in html.split("<summary>Configuration")[0]  # no raw JSON before the configuration
    assert "<script" not in html and "<link" not in html and "<img" not in html
