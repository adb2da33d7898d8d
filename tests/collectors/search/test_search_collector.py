"""`python -m collectors.search` end to end on the embedded corpus, and its explorer on a real index."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from collectors.search.explorer import SearchExplorer, seed_queries
from collectors.tasks import embedded_tasks
from sandboxes.search import BuildParams, SearchConfig, SearchSandbox, TantivyBackend, build_index
from sandboxes.search.build import load_topics
from schemas import read_trajectories
from schemas.records import Task
from tests.collectors.conftest import play, run_main

ROOT = Path(__file__).resolve().parents[3]


def run_collector(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "collectors.search", "--no-progress", *args]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment)


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("search") / "index"
    build_index(out, BuildParams(limit=400, seed=1), progress=False)
    return out


def test_help_has_examples() -> None:
    result = run_collector("--help")
    assert result.returncode == 0
    assert "examples:" in result.stdout and "--workers" in result.stdout and "--searxng-url" in result.stdout


def test_embedded_defaults_write_valid_trajectories(tmp_path: Path) -> None:
    """No --index: the default index is built into the cache, then a fleet of 2 records episodes."""
    out, cache = tmp_path / "data", tmp_path / "cache"
    args = ["--workers", "2", "--episodes", "6", "--max-steps", "6", "--out", str(out)]
    result = run_collector(*args, env={"AGENTWORLD_CACHE_DIR": str(cache)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "building the default search index (2,000 documents)" in result.stderr
    found = list(read_trajectories(str(out), validate=True))
    assert sorted(t.task.metadata["slot"] for t in found) == list(range(6))
    assert {t.domain for t in found} == {"search"} and {t.policy.name for t in found} == {"explorer"}
    assert all(t.outcome.status in ("completed", "truncated") for t in found), [t.outcome for t in found]
    assert {t.environment.backend for t in found} == {"tantivy"}
    assert found[0].environment.config["documents"] == 2000
    assert all(t.initial_observation.text.startswith("A web search engine is ready.") for t in found)
    steps = [s for t in found for s in t.steps]
    assert {s.action.kind for s in steps} == {"web_search", "web_extractor"}
    assert {s.observation.format for s in steps} == {"search_results", "markdown"}
    first = found[0].steps[0]
    assert first.action.text.startswith("web_search(query=") and first.observation.text.startswith(
        "Results 1-"
    )
    assert any(s.observation.data.get("status") == 200 for s in steps if s.action.kind == "web_extractor")
    assert "trajectories written: 6" in result.stdout
    # The second run reuses the cached index and finds every episode finished.
    again = run_collector(*args, env={"AGENTWORLD_CACHE_DIR": str(cache)})
    assert again.returncode == 0 and "skipped as already finished: 6" in again.stdout
    assert "building the default search index" not in again.stderr


def test_scripted_policy_plays_the_task_queries(tmp_path: Path, small_index: Path) -> None:
    out = tmp_path / "scripted"
    result = run_collector(
        "--index", str(small_index), "--policy", "scripted", "--episodes", "3", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tasks = {spec.id: spec for spec in embedded_tasks("search")}
    for trajectory in read_trajectories(str(out), validate=True):
        played = [s.action.arguments["query"] for s in trajectory.steps if s.action.kind == "web_search"]
        assert played == tasks[trajectory.task.id].task.metadata["queries"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "json_api"], "--backend json_api needs --json-api FILE"),
        (["--index", "/nonexistent/index"], "is not a search index; build one with"),
        (
            ["--backend", "searxng", "--searxng-url", "http://127.0.0.1:1", "--retries", "0"],
            "the searxng search backend does not work: SearXNG is unreachable",
        ),
    ],
)
def test_bad_backends_fail_before_the_fleet_with_what_to_do(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main("search", *args, "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert message in err, err


def _episodes(index: Path, seed: int, episodes: int = 10, steps: int = 12) -> list[list[tuple[str, dict]]]:
    tasks = embedded_tasks("search")
    explorer = SearchExplorer(topics=load_topics(index))
    sessions = []
    with SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(index)))) as sandbox:
        for n in range(episodes):
            played = play(sandbox, explorer, tasks[n % len(tasks)].task, random.Random(f"{seed}:{n}"), steps)
            sessions.append([(action.text, observation.data) for action, observation in played])
    return sessions


def test_explorer_reads_refines_pages_and_guesses(small_index: Path) -> None:
    sessions = _episodes(small_index, seed=0)
    texts = [text for session in sessions for text, _ in session]
    data = [d for session in sessions for _, d in session]
    kinds = Counter(text.split("(")[0] for text in texts)
    assert kinds["web_extractor"] >= 0.15 * len(texts) and kinds["web_search"] >= 0.4 * len(texts)
    assert any("page=2" in t for t in texts), "never asked for page 2"
    assert any("num_results=" in t for t in texts), "never changed the result count"
    assert any(d.get("status") == 404 for d in data), "never opened a page that does not exist"
    assert any(d.get("status") == 200 for d in data)
    queries = [t for t in texts if t.startswith("web_search")]
    assert len(set(queries)) >= 0.7 * len(queries), "queries repeat too much"
    # Every session starts with the task's own first query.
    tasks = embedded_tasks("search")
    for n, session in enumerate(sessions):
        assert session[0][0] == f"web_search(query={seed_queries(tasks[n % len(tasks)].task)[0]!r})"
    assert all(1 <= len(s) <= 12 for s in sessions)


def test_explorer_is_deterministic_per_seed(small_index: Path) -> None:
    first = _episodes(small_index, seed=5, episodes=2, steps=8)
    assert _episodes(small_index, seed=5, episodes=2, steps=8) == first
    assert _episodes(small_index, seed=6, episodes=2, steps=8) != first


def test_seed_queries_fall_back_to_the_instruction() -> None:
    task = Task(id="t", instruction="Which signal does the kill command send by default?")
    assert seed_queries(task) == ["signal kill command send default"]
    assert seed_queries(Task(id="q", metadata={"queries": ["a b", ""]})) == ["a b"]
    assert (
        json.dumps(SearchExplorer(topics=["x"]).config())
        == '{"topics": 1, "stop_probability": 0.08, "min_steps": 3}'
    )
