"""Which host paths a jailed server gets bound: the command's own files where the jail hides them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sandboxes.base import SandboxError
from sandboxes.mcp.binds import command_binds, jail_hint


def make_venv(root: Path) -> Path:
    """A directory laid out as a virtual environment (what `command_binds` looks for)."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = root / "bin" / "python"
    python.symlink_to(sys.executable)
    return python


def test_the_program_its_venv_and_path_arguments_outside_the_system_directories(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    script = tmp_path / "app" / "server.py"
    script.parent.mkdir()
    script.write_text("print()\n")
    binds = command_binds("mine", [str(python), str(script), "--port", "1", "/tmp/does-not-exist"], [])
    assert binds == [tmp_path / "venv", script]
    # Paths the jail shows anyway are not bound; nor a path inside another bound one.
    assert command_binds("mine", ["/usr/bin/python3", "/usr/share/common-licenses"], []) == []
    assert command_binds("mine", [str(python), str(python.parent)], []) == [tmp_path / "venv"]


def test_the_interpreter_of_a_script_is_bound_and_ro_paths_are_checked(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    script = tmp_path / "server"
    script.write_text(f"#!{python} -u\nprint()\n")
    os.chmod(script, 0o755)
    data = tmp_path / "data"
    data.mkdir()
    binds = command_binds("mine", [str(script)], [str(data)])
    assert binds == [data, script, tmp_path / "venv"]
    with pytest.raises(SandboxError, match="ro_paths: /nonexistent/x does not exist"):
        command_binds("mine", [str(script)], ["/nonexistent/x"])


def test_the_hint_names_what_the_jail_hides_only_when_a_file_is_missing() -> None:
    program = ["/usr/bin/python3", "/srv/server.py"]
    env = {"PYTHONPATH": "/root/lib:/opt/lib"}
    hint = jail_hint(program, env, [Path("/usr/lib")], "ModuleNotFoundError: No module named 'x'")
    # Only the system directories are shown: /srv, /root and /opt are not.
    unseen = "Paths of the entry the server cannot see there: /srv/server.py, /root/lib, /opt/lib."
    assert unseen in hint and "ro_paths" in hint
    assert jail_hint(program, {}, [Path("/srv")], "RuntimeError: bad settings") == ""
