"""Harbor task folders written by the tests, in the real format (task.toml, instruction.md,
environment/Dockerfile, tests/test.sh, solution/solve.sh)."""

from __future__ import annotations

from pathlib import Path

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
) -> Path:
    folder = root / name
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(
        TOML.format(agent_timeout=agent_timeout, verifier_timeout=verifier_timeout)
    )
    (folder / "instruction.md").write_text(f"Task {name}: do what tests/test.sh checks under /app.\n")
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {base}\nWORKDIR /app\nRUN echo {name} > /app/README\n"
    )
    (folder / "tests" / "test.sh").write_text(test_sh)
    if solve_sh is not None:
        (folder / "solution" / "solve.sh").write_text(solve_sh)
    return folder
