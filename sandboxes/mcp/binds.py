"""Which host paths a jailed server needs to see, and what to say when it still sees too little.

The jail (`sandboxes.jail`) shows only the host's system directories (/usr, /bin, /lib...), so a
server living anywhere else (a virtual environment in a checkout, a script in /root, a checkout
under /tmp) would not exist inside. The command's own files are therefore bound read-only at their
own paths: the program (and the virtual environment it belongs to, and the interpreter its `#!`
line names) and every argument that is an existing absolute path outside the system directories,
plus the entry's `ro_paths`.
"""

from __future__ import annotations

from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.jail import SYSTEM_DIRS, shown

SHEBANG_BYTES = 256
# How a program says it misses a file (C library, shells, Python, Node).
MISSING_FILE_WORDS = ("No such file", "not found", "No module named", "Cannot find module", "ENOENT")


def hidden_in_jail(path: Path) -> bool:
    """Whether the jail does not show this host path by itself (it is outside the system dirs)."""
    return not shown(path)


def command_binds(server: str, program: list[str], ro_paths: list[str]) -> list[Path]:
    """The host paths to bind read-only for `program` (filled-in argv, program resolved) to run."""
    wanted: list[Path] = []
    for raw in ro_paths:
        path = Path(raw)
        if not path.exists():
            raise SandboxError(
                f"MCP server {server!r}: ro_paths: {raw} does not exist on this host (list paths that do)"
            )
        wanted.append(path)
    for path in _program_files(Path(program[0])):
        if hidden_in_jail(path):
            wanted.append(path)
    for argument in program[1:]:
        path = Path(argument)
        if path.is_absolute() and hidden_in_jail(path) and path.exists():
            wanted.append(path)
    return outermost(wanted)


def _program_files(program: Path) -> list[Path]:
    """The program, the virtual environment it is in, and the interpreter its `#!` line names."""
    files = [program]
    venv = _venv_root(program)
    if venv is not None:
        files.append(venv)
    try:
        with open(program, "rb") as f:
            head = f.read(SHEBANG_BYTES)
    except OSError:
        return files
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        if words and words[0].startswith(b"/"):
            interpreter = Path(words[0].decode(errors="replace"))
            files.append(interpreter)
            venv = _venv_root(interpreter)
            if venv is not None:
                files.append(venv)
    return files


def _venv_root(program: Path) -> Path | None:
    root = program.parent.parent
    return root if (root / "pyvenv.cfg").is_file() else None


def outermost(paths: list[Path]) -> list[Path]:
    """`paths` without duplicates and without those inside another one."""
    unique = list(dict.fromkeys(paths))
    return [p for p in unique if not any(other != p and other in p.parents for other in unique)]


def jail_hint(program: list[str], env: dict[str, str], bound: list[Path], error: str) -> str:
    """What a server that failed to start in the jail could not see, and how to show it more; ""
    when nothing points at a file it missed."""
    unseen = []
    for value in [*program, *env.values()]:
        for part in value.split(":"):  # PATH-like values too
            path = Path(part)
            covered = any(b == path or b in path.parents for b in bound)
            if path.is_absolute() and hidden_in_jail(path) and not covered:
                unseen.append(str(path))
    if not unseen and not any(words in error for words in MISSING_FILE_WORDS):
        return ""
    lines = [
        "It ran in bwrap, which shows of the host only its system directories "
        f"({', '.join(SYSTEM_DIRS)}) and binds from the host only: "
        + (", ".join(str(b) for b in bound) or "nothing of this entry's")
        + "."
    ]
    if unseen:
        lines.append(f"Paths of the entry the server cannot see there: {', '.join(dict.fromkeys(unseen))}.")
    lines.append(
        "If it needs those files, list them in the entry's ro_paths "
        "(bound read-only at the same path), or run it on the host with --backend local."
    )
    return " ".join(lines)
