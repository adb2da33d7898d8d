"""terminal-bench tasks as published, offline: `FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04`
mapped onto agentworld/terminal-bench, a Dockerfile that installs its test tools with apt and pip, and
a test.sh that installs curl, runs uv's installer and `uvx pytest`. The oracle reaches reward 1 with
no network; a test.sh that cannot go on without one fails naming the command and what it printed.
Real docker, harbor's own task model, the image built by infra/terminal-bench-image/build.sh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.terminal.__main__ import main
from schemas import read_trajectories
from tests.sandboxes.harbor.folders import (
    TB_DOCKERFILE,
    TB_MISSING_PLUGIN,
    TB_MISSING_TEST,
    TB_PIPEFAIL_TEST,
    TB_TEST_OUTPUTS,
    TB_UVX_TEST,
    UV_INSTALLER,
    terminal_bench_image,
    write_task,
)

pytestmark = [pytest.mark.docker, pytest.mark.tmux]

CURL_OFFLINE = "curl: (6) Could not resolve host: astral.sh"
APT_OFFLINE = "Temporary failure resolving 'deb.debian.org'"
UNBUILDABLE_RUN = "RUN pip3 install --no-cache-dir --break-system-packages networkx"
UVX_MISSING = (
    f"uvx -p 3.13 -w pytest==8.4.1 -w {TB_MISSING_PLUGIN} pytest --ctrf /logs/verifier/ctrf.json"
    " /tests/test_outputs.py -rA"
)


def test_terminal_bench_tasks_verify_offline_and_failures_name_their_cause(
    tmp_path: Path, terminal_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal_bench_image()
    tasks = tmp_path / "tasks"
    tests = {"test_outputs.py": TB_TEST_OUTPUTS}
    for name, test_sh in (
        ("tb-uvx", TB_UVX_TEST),
        ("tb-pipefail", TB_PIPEFAIL_TEST),
        ("tb-missing", TB_MISSING_TEST),
    ):
        write_task(tasks, name, test_sh=test_sh, dockerfile=TB_DOCKERFILE, test_files=tests)
    # A Dockerfile that pip-installs a package outside the image's wheelhouse: refused, naming it.
    write_task(tasks, "tb-unbuildable", dockerfile=TB_DOCKERFILE + f"{UNBUILDABLE_RUN}\n")
    out = tmp_path / "out"
    argv = ["--no-progress", "--harbor-tasks", str(tasks), "--map-base-images", "--episodes", "0"]
    code = main([*argv, "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed  # two oracles fail, one task is refused

    found = {t.task.id: t for t in read_trajectories(str(out), validate=True)}
    assert set(found) == {"tb-uvx#oracle", "tb-uvx#nothing", "tb-pipefail#oracle", "tb-missing#oracle"}
    oracle = found["tb-uvx#oracle"]
    assert oracle.outcome.reward == 1.0 and oracle.environment.config["network"] is False
    assert oracle.environment.config["env"] == ["UV_OFFLINE=1", "PIP_NO_INDEX=1"]
    check = oracle.outcome.verification
    # apt-get update and the installer found no network and test.sh went on; uvx ran pytest from
    # the image's uv cache.
    assert "curl is already the newest version" in check.output
    assert "platform linux -- Python 3.13." in check.output and "pytest-8.4.1" in check.output
    assert "plugins: json-ctrf-0.3.5" in check.output
    assert (
        "PASSED ../tests/test_outputs.py::test_done_says_yes" in check.output and "1 passed" in check.output
    )
    assert check.details["no_network"] == [
        {"command": "apt-get update", "message": APT_OFFLINE},
        {"command": UV_INSTALLER, "message": CURL_OFFLINE},
    ]
    assert found["tb-uvx#nothing"].outcome.reward == 0.0  # without done.txt, pytest fails

    summary = json.loads((out / "harbor_summary.json").read_text())
    reports = {r["name"]: r for r in summary["tasks"]}
    assert reports["tb-uvx"]["oracle_reward"] == 1.0 and reports["tb-uvx"]["oracle_error"] == ""
    [(path, why)] = summary["refused"].items()
    assert path.endswith("tb-unbuildable")
    assert f"no network for `{UNBUILDABLE_RUN}` (No matching distribution found for networkx)" in why
    assert "tb-uvx: oracle passed; do-nothing reward 0.0; policy rewards []" in printed

    pipefail = reports["tb-pipefail"]
    assert pipefail["oracle_reward"] is None
    assert pipefail["oracle_error"].startswith(
        "test.sh exited 6 without writing /logs/verifier/reward.txt or reward.json; no network for"
        f" `apt-get update` ({APT_OFFLINE}), `{UV_INSTALLER}` ({CURL_OFFLINE}); last output: "
    )
    assert pipefail["oracle_error"].endswith(CURL_OFFLINE)
    assert f"  tb-pipefail: oracle FAILED ({pipefail['oracle_error']})" in printed

    missing = reports["tb-missing"]
    assert missing["oracle_reward"] == 0.0
    assert missing["oracle_error"].startswith("reward 0.0; test.sh exited 0; no network for ")
    assert f"`{UVX_MISSING}` (pytest-timeout was not found in the cache" in missing["oracle_error"]
    assert "  tb-missing: oracle FAILED (reward 0.0; test.sh exited 0; no network for" in printed
