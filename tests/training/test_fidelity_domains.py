"""`python -m training.fidelity` on web and search: trajectories recorded here with the real sandboxes
(Chromium on the embedded shop, a tantivy index of python3-doc), replayed in fresh real sandboxes for
the noise floor, scored with the domains' own metrics, with a world model served over real HTTP."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sandboxes.base import Sandbox
from sandboxes.domains import domain_spec
from sandboxes.search import (
    BuildParams,
    SearchConfig,
    SearchSandbox,
    TantivyBackend,
    build_index,
    extract_action,
    search_action,
)
from sandboxes.web import WebConfig, WebSandbox, site_url
from sandboxes.web import parse_action as web_action
from schemas import TrajectoryWriter
from schemas.records import Action, Observation, Outcome, Policy, Provenance, Step, Task, Trajectory
from tests.training.test_backends import scripted_chat_server
from training.fidelity.__main__ import main


def record(sandbox: Sandbox, task: Task, plan: list) -> Trajectory:
    """Run `plan` (actions, or functions of the last observation giving one) and keep it as a collector
    would: the sandbox's own environment, every observation as it came."""
    started = datetime.now(UTC)
    initial = sandbox.reset(task)
    observation, steps = initial, []
    for k, item in enumerate(plan):
        action: Action = item(observation) if callable(item) else item
        observation = sandbox.step(action).observation
        steps.append(Step(k, action, observation, datetime.now(UTC), 0.0))
    return Trajectory(
        trajectory_id=f"{task.id}-0",
        domain=sandbox.domain,
        environment=sandbox.describe(),
        task=task,
        policy=Policy("scripted"),
        initial_observation=initial,
        steps=steps,
        outcome=Outcome("completed"),
        provenance=Provenance("test", "0", "host", started, datetime.now(UTC)),
    )


def repeat_world(messages: list[dict]) -> str:
    """A world model that predicts nothing changes: the last observation it was shown comes back."""
    shown = [m["content"] for m in messages if m["role"] == "assistant"]
    if shown:
        last = shown[-1].removeprefix("**Environment Observation:**\n")
    else:  # the first turn: the initial state in the system prompt, up to its next section
        last = messages[0]["content"].split("before the first action:\n\n", 1)[1].split("\n\n## ", 1)[0]
    return f"<predicted_observation>\n{last}\n</predicted_observation>"


def replay_ceiling(report: dict, domain: str, finished: int = 1) -> dict:
    """The real-vs-real metrics of `domain` in a fidelity report, once `finished` replays all ran."""
    noise = report["noise_floor"]
    assert noise["counts"]["finished"] == finished, noise["counts"]
    return noise["real_vs_real"]["by_domain"][domain]


def check_tree_model(report: dict, out: Path, domain: str, metrics: tuple[str, ...], form: str) -> None:
    """On a tree domain (os, android) the teacher-forced "nothing changes" model misses what a turn
    changed and the error of a failed action, yet writes a well-formed `form` observation; the
    report's section of `domain` opens its table with `metrics`, the domain's own."""
    model = report["systems"]["model/teacher_forced"]["by_domain"][domain]
    assert model["node_f1"] < 1.0 and model["error_match"] < 1.0
    assert model["format_valid"] == 1.0, f"a real earlier screen is a well-formed {form} observation"
    markdown = (out / "report" / "report.md").read_text()
    header = r" \| ".join(metrics)
    assert re.search(rf"## {domain}\n\n\| system .*\| {header} \|", markdown)


def run_fidelity(trajectory: Trajectory, out: Path, replays: int) -> dict:
    data = out / "data"
    with TrajectoryWriter(str(data)) as writer:
        writer.write(trajectory)
    with scripted_chat_server(repeat_world) as server:
        code = main(
            [
                "--real", str(data), "--model", server.base_url, "--out", str(out / "report"),
                "--replays", str(replays), "--sandboxes", "1", "--base", "none", "--no-closed-loop",
                "--no-progress", "--concurrency", "2",
            ]
        )  # fmt: skip
    assert code == 0
    return json.loads((out / "report" / "report.json").read_text())


def bid_of(observation: Observation, name: str) -> str:
    found = [e["bid"] for e in observation.data["elements"] if e["name"].startswith(name)]
    assert found, f"no element named {name!r} in {observation.text[:2000]}"
    return found[0]


@pytest.mark.chromium
def test_web_noise_floor_from_fresh_browsers_and_tree_metrics(tmp_path: Path) -> None:
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("Chromium is missing: apt-get install chromium (never `playwright install`)")
    task = Task(id="shop", metadata={"start_url": site_url("shop", "/")})
    plan = [
        web_action("goto", {"url": site_url("shop", "/products")}),
        lambda obs: web_action("click", {"bid": bid_of(obs, "Cart")}),
        web_action("go_back", {}),
        web_action("click", {"bid": "99999"}),  # a missing element: the page unchanged, with the error
    ]
    with WebSandbox(WebConfig()) as sandbox:
        trajectory = record(sandbox, task, plan)
    assert "Error:" in trajectory.steps[-1].observation.text
    # The prompt wording names every header line the sandbox really writes.
    for line in trajectory.steps[-1].observation.text.split("\n\n", 1)[0].split("\n"):
        assert f"`{line.split(':', 1)[0]}:`" in domain_spec("web").prompt.environment
    # One fresh browser replays it (a second would only add a leave-one-out template, and a minute).
    report = run_fidelity(trajectory, tmp_path, replays=1)
    ceiling = replay_ceiling(report, "web")
    # Fresh browsers on the same embedded sites reach the same URLs, titles and (stable) bids.
    assert ceiling["url_match"] == 1.0 and ceiling["title_match"] == 1.0
    assert ceiling["tree_f1"] > 0.9 and ceiling["tree_f1_no_bids"] >= ceiling["tree_f1"]
    model = report["systems"]["model/teacher_forced"]["by_domain"]["web"]
    # "Nothing changes" is wrong after each navigation: below the ceiling on url and tree lines.
    assert model["url_match"] < 1.0 and model["tree_f1"] < ceiling["tree_f1"]
    assert model["format_valid"] == 1.0, "a real earlier page is a well-formed web observation"
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert re.search(r"## web\n\n\| system .*tree_f1_no_bids \| url_match \| title_match \|", markdown)


@pytest.fixture(scope="module")
def search_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search") / "index"
    build_index(out, BuildParams(man_pages="", limit=120), progress=False)
    return out


def test_search_noise_floor_from_fresh_sandboxes_and_result_metrics(
    search_index: Path, tmp_path: Path
) -> None:
    config = SearchConfig(backend=TantivyBackend(index_dir=str(search_index)))
    plan = [
        search_action("list sort"),
        search_action("list sort", page=2),
        lambda obs: extract_action(obs.data["results"][0]["url"]),
        extract_action("http://docs.python.agentworld.test/no/such/page.html"),
    ]
    with SearchSandbox(config) as sandbox:
        trajectory = record(sandbox, Task(id="sorting"), plan)
    assert trajectory.steps[0].observation.data["results"] and "404" in trajectory.steps[-1].observation.text
    report = run_fidelity(trajectory, tmp_path, replays=2)
    ceiling = replay_ceiling(report, "search", finished=2)
    # The engine is deterministic: a fresh sandbox lists the same URLs in the same order, same pages.
    assert ceiling["result_f1"] == ceiling["overlap_at_5"] == ceiling["rank_agreement"] == 1.0
    assert ceiling["page_line_f1"] == 1.0
    model = report["systems"]["model/teacher_forced"]["by_domain"]["search"]
    # Turn 2 repeats page 1 for page 2 (no URL in common); turn 1 repeats the "no search yet" text.
    assert model["result_f1"] == 0.0 and model["page_line_f1"] < 1.0
    tables = (tmp_path / "report" / "report.md").read_text()
    assert "| result_precision | result_recall | result_f1 | overlap_at_5 | rank_agreement |" in tables
