"""The Linux guest program is agent.py and the modules beside it: copied together, importing only
the standard library, the target's system packages and each other (never the repository)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from sandboxes.desktop.sandbox import GUEST_FILES

# python3-gi, python3-xlib and (optionally) PIL, as the target's /usr/bin/python3 has them.
SYSTEM_PACKAGES = {"gi", "Xlib", "PIL"}


def test_the_guest_is_agent_and_its_modules_without_the_windows_program() -> None:
    names = {path.name for path in GUEST_FILES}
    assert "agent.py" in names and "windows_agent.py" not in names
    assert {"session.py", "a11y.py", "tree_format.py", "pyautogui_subset.py"} <= names


def test_guest_modules_import_nothing_from_the_repository() -> None:
    siblings = {path.stem for path in GUEST_FILES}
    allowed = set(sys.stdlib_module_names) | SYSTEM_PACKAGES | siblings
    for path in GUEST_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] in allowed, f"{path.name} imports {module}"


def test_the_copied_guest_starts_on_its_own(tmp_path: Path) -> None:
    for path in GUEST_FILES:
        shutil.copy(path, tmp_path / path.name)
    done = subprocess.run(
        ["/usr/bin/python3", str(tmp_path / "agent.py"), "--help"],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--workdir" in done.stdout
