"""Harbor task folders written by the tests, in the real format (task.toml, instruction.md,
environment/Dockerfile, tests/test.sh, solution/solve.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandboxes.harbor.images import TERMINAL_BENCH_BASE

TOML = """version = "1.0"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = {verifier_timeout}

[agent]
timeout_sec = {agent_timeout}

[environment]
build_timeout_sec = 120.0
cpus = 1
memory_mb = 384
"""

# Two files to write; test.sh gives half the reward for each one right (reward.json, partial credit).
PARTIAL_TEST = """#!/bin/bash
mkdir -p /logs/verifier
a=0; b=0
[ "$(cat /app/a.txt 2>/dev/null)" = alpha ] && a=1
[ "$(cat /app/b.txt 2>/dev/null)" = beta ] && b=1
echo "a=$a b=$b"
python3 -c "import json; print(json.dumps({'reward': ($a + $b) / 2, 'a': $a, 'b': $b}))" \\
    > /logs/verifier/reward.json
"""
PARTIAL_SOLVE = "#!/bin/bash\necho alpha > /app/a.txt\necho beta > /app/b.txt\n"

# reward.txt: 1 when /app/done.txt says "yes".
SIMPLE_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if grep -qx yes /app/done.txt 2>/dev/null; then echo ok; echo 1 > /logs/verifier/reward.txt
else echo "done.txt is not yes"; echo 0 > /logs/verifier/reward.txt; fi
"""
SIMPLE_SOLVE = "#!/bin/bash\necho yes > /app/done.txt\n"


def write_task(
    root: Path,
    name: str,
    test_sh: str = SIMPLE_TEST,
    solve_sh: str | None = SIMPLE_SOLVE,
    base: str = "ubuntu:24.04",
    agent_timeout: float = 60.0,
    verifier_timeout: float = 30.0,
    dockerfile: str | None = None,
    test_files: dict[str, str] | None = None,
) -> Path:
    """A task folder; `dockerfile` replaces the default one (FROM `base`), `test_files` are written
    into tests/ beside test.sh."""
    folder = root / name
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(
        TOML.format(agent_timeout=agent_timeout, verifier_timeout=verifier_timeout)
    )
    (folder / "instruction.md").write_text(f"Task {name}: do what tests/test.sh checks under /app.\n")
    (folder / "environment" / "Dockerfile").write_text(
        dockerfile or f"FROM {base}\nWORKDIR /app\nRUN echo {name} > /app/README\n"
    )
    (folder / "tests" / "test.sh").write_text(test_sh)
    for file, text in (test_files or {}).items():
        (folder / "tests" / file).write_text(text)
    if solve_sh is not None:
        (folder / "solution" / "solve.sh").write_text(solve_sh)
    return folder


def terminal_bench_image() -> str:
    """agentworld/terminal-bench, which terminal-bench tasks are mapped onto; the test fails when
    it is not built (the setup builds it)."""
    if subprocess.run(["docker", "image", "inspect", TERMINAL_BENCH_BASE], capture_output=True).returncode:
        pytest.fail(f"image {TERMINAL_BENCH_BASE} is missing: run `bash infra/terminal-bench-image/build.sh`")
    return TERMINAL_BENCH_BASE


# A terminal-bench task as published: FROM terminal-bench's Ubuntu base, its Dockerfile installing the
# test tools with apt and pip, its test.sh in the usual Harbor shape: apt-get curl, uv's installer,
# then uvx pytest on tests/test_outputs.py.
TB_DOCKERFILE = """FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && \\
    apt-get install -y python3-pip && \\
    ln -s /usr/bin/python3 /usr/bin/python && \\
    rm -rf /var/lib/apt/lists/*
RUN pip3 install --no-cache-dir --break-system-packages pytest==8.4.1 pandas==2.3.2 scipy==1.16.1
WORKDIR /app
ENV TEST_DIR=/tests
"""
TB_TEST_OUTPUTS = """from pathlib import Path


def test_done_says_yes():
    assert Path("/app/done.txt").read_text().strip() == "yes"
"""
UV_INSTALLER = "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh"
TB_UVX_TEST = f"""#!/bin/bash
set -e

apt-get update
apt-get install -y curl

{UV_INSTALLER}
source $HOME/.local/bin/env

mkdir -p /logs/verifier

set +e
uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
# The same steps under `set -o pipefail`: the installer's failed download ends test.sh.
TB_PIPEFAIL_TEST = TB_UVX_TEST.replace("set -e\n", "set -euo pipefail\n", 1)
# A pytest plugin the image's uv cache does not hold: uvx cannot install it offline, the tests do not run.
TB_MISSING_PLUGIN = "pytest-timeout==2.3.1"
TB_MISSING_TEST = TB_UVX_TEST.replace("-w pytest-json-ctrf==0.3.5", f"-w {TB_MISSING_PLUGIN}")
