"""The Harbor pieces that need no container: reward files, base-image mapping, the task loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.harbor import HarborError, load_tasks, task_folders
from sandboxes.harbor.images import MAPPED_BASE, TERMINAL_BENCH_BASE, mapped_image, resolve_dockerfile
from sandboxes.harbor.verifier import parse_reward
from tests.sandboxes.harbor.folders import terminal_bench_image, write_task


def test_reward_txt_and_json() -> None:
    assert parse_reward("reward.txt", "1\n") == (1.0, {})
    assert parse_reward("reward.txt", " 0.25 ") == (0.25, {})
    reward, details = parse_reward("reward.json", '{"reward": 0.5, "a": 1, "b": 0}')
    assert reward == 0.5 and details == {"rewards": {"reward": 0.5, "a": 1, "b": 0}}
    # No "reward" key: the mean of the values.
    assert parse_reward("reward.json", '{"a": 1, "b": 0, "c": 0.5}')[0] == 0.5


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("reward.txt", "passed!", "not a number"),
        ("reward.txt", "nan", "not a finite number"),
        ("reward.txt", "3", "outside [0, 1]"),
        ("reward.json", "{oops", "not JSON"),
        ("reward.json", '{"reward": "high"}', "not finite numbers"),
        ("reward.json", "[1]", "object of numbers"),
    ],
)
def test_garbage_rewards_are_refused_with_the_reason(name: str, text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("[", r"\[").replace("]", r"\]")):
        parse_reward(name, text)


def test_base_image_table() -> None:
    for image in ("ubuntu:24.04", "docker.io/library/debian:12-slim", "python:3.13-slim", "ubuntu"):
        assert mapped_image(image) == MAPPED_BASE, image
    assert mapped_image("ghcr.io/acme/builder:1") is None
    assert mapped_image("alpine:3.20") is None
    # terminal-bench's base images, as its tasks name them.
    for image in (
        "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
        "ghcr.io/laude-institute/t-bench/python-3-13:20250620",
        "ghcr.io/laude-institute/t-bench/python-3-13",
    ):
        assert mapped_image(image) == TERMINAL_BENCH_BASE, image
    assert mapped_image("ghcr.io/laude-institute/t-bench/deveval:latest") is None


def test_terminal_bench_from_gets_the_images_offline_settings_for_its_build_only() -> None:
    terminal_bench_image()
    text = "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nRUN pip3 install pytest==8.4.1\n"
    resolved, sources = resolve_dockerfile(text, map_base_images=True)
    assert sources == {"ghcr.io/laude-institute/t-bench/python-3-13:20250620": TERMINAL_BENCH_BASE}
    assert resolved.splitlines() == [
        f"FROM {TERMINAL_BENCH_BASE}",
        "USER root",
        "ARG UV_OFFLINE=1",
        "ARG PIP_NO_INDEX=1",
        "RUN pip3 install pytest==8.4.1",
    ]


def test_dockerfile_from_lines_are_mapped_only_when_allowed() -> None:
    text = "FROM ubuntu:24.04 AS build\nRUN true\nFROM build\nCOPY x /x\n"
    with pytest.raises(HarborError, match=r"ubuntu:24.04 is not present locally.*--map-base-images"):
        resolve_dockerfile(text, map_base_images=False)
    resolved, sources = resolve_dockerfile(text, map_base_images=True)
    assert sources == {"ubuntu:24.04": MAPPED_BASE}
    # The mapped image runs as root like ubuntu's; a later stage naming an earlier one is left alone.
    assert resolved.splitlines()[:2] == [f"FROM {MAPPED_BASE} AS build", "USER root"]
    assert "FROM build" in resolved.splitlines()
    with pytest.raises(HarborError, match=r"ghcr.io/acme/builder:1 .*not one --map-base-images maps"):
        resolve_dockerfile("FROM ghcr.io/acme/builder:1\n", map_base_images=True)


def test_loader_uses_harbors_model_and_names_what_it_refuses(tmp_path: Path) -> None:
    write_task(tmp_path, "good")
    (write_task(tmp_path, "no-test") / "tests" / "test.sh").unlink()
    tasks, refused = load_tasks(task_folders(tmp_path))
    assert [t.name for t in tasks] == ["good"]
    good = tasks[0]
    assert good.environment["memory_mb"] == 384 and good.environment["network"] == "no-network"
    assert good.agent["timeout_sec"] == 60.0 and good.verifier["timeout_sec"] == 30.0
    assert good.paths["solve"].endswith("solution/solve.sh")
    [(path, why)] = refused.items()
    assert path.endswith("no-test") and "harbor cannot load it" in why and "test.sh" in why
    assert task_folders(tmp_path / "good") == [tmp_path / "good"]


def test_missing_harbor_venv_says_to_run_make_setup(tmp_path: Path) -> None:
    write_task(tmp_path, "good")
    with pytest.raises(HarborError, match="run `make setup`"):
        load_tasks(task_folders(tmp_path), python=tmp_path / "no-venv" / "bin" / "python")
