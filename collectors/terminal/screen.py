"""Reading a rendered terminal screen: which program owns it, and what `ls`/`find` printed.

Heuristics over the text a world model sees; the explorer adapts with them and the variety
report classifies steps with them, so both agree on what "inside an interactive program" means.
"""

from __future__ import annotations

import re
import shlex

SHELL = "shell"
INTERACTIVE = ("python", "vim", "nano", "less", "top", "bc", "stdin")

_PROMPT = re.compile(r"[$#] ?$")
_SEPARATORS = {"|", "||", "&&", ";", "&"}
_SKIP_WORDS = {"sudo", "time", "env", "nohup", "command", "exec", "xargs", "!", "{", "}", "(", ")"}


def lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def screen_mode(text: str) -> str | None:
    """The program the screen shows: "shell", one of INTERACTIVE, or None when it cannot tell."""
    lines = lines_of(text)
    if not lines:
        return None
    first, last = lines[0], lines[-1]
    if first.startswith("top - ") or (len(lines) > 2 and lines[1].startswith("Tasks:")):
        return "top"
    if "GNU nano" in first or any("^X Exit" in line for line in lines[-3:]):
        return "nano"
    if last.endswith(">>>") or last.endswith(">>> ") or last.strip() == "...":
        return "python"
    if (
        "(END)" in last
        or last.strip() == ":"
        or "HELP -- Press RETURN" in last
        or "Pattern not found" in last
    ):
        return "less"
    tildes = sum(1 for line in lines if line == "~")
    if "-- INSERT --" in last or tildes >= 3 or re.search(r'^".*" \d+L, \d+B', last):
        return "vim"
    if _PROMPT.search(last):
        return SHELL
    return None


def command_programs(command: str) -> list[str]:
    """Programs a shell command line invokes: the first word of each pipeline/list element."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    programs: list[str] = []
    expect = True
    for token in tokens:
        if token in _SEPARATORS:
            expect = True
            continue
        if not expect:
            continue
        if token in _SKIP_WORDS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token) or token.startswith("-"):
            continue
        if token in {"for", "while", "if", "do", "then", "else", "done", "fi", "in"}:
            continue
        programs.append(token.rsplit("/", 1)[-1] if "/" in token and not token.startswith("./") else token)
        expect = False
    return programs


def output_after(text: str, command: str) -> list[str]:
    """Lines printed by the last occurrence of `command` on screen, up to the next prompt."""
    lines = lines_of(text)
    start = None
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].endswith(command) and _PROMPT.search(lines[index][: -len(command)].rstrip() + " "):
            start = index + 1
            break
    if start is None:
        return []
    out = []
    for line in lines[start:]:
        if _PROMPT.search(line):
            break
        out.append(line)
    return out


def parse_listing(lines: list[str]) -> tuple[list[str], list[str]]:
    """(files, dirs) named by `ls`, `ls -l`, `ls -F`/`-p` or `find` output lines."""
    files: list[str] = []
    dirs: list[str] = []
    for line in lines:
        if not line or line.startswith("total ") or line.startswith("ls:") or line.endswith(":"):
            continue
        fields = line.split()
        if len(fields) >= 9 and re.fullmatch(r"[-dlcbps][rwxsStT-]{9}[.+@]?", fields[0]):
            name = " ".join(fields[8:]).split(" -> ")[0]
            if name in {".", ".."}:
                continue
            (dirs if fields[0][0] == "d" else files).append(name)
            continue
        for name in fields:
            if name in {".", "..", "./"}:
                continue
            if name.endswith("/"):
                dirs.append(name.rstrip("/"))
            elif name.endswith("*") or name.endswith("@"):
                files.append(name[:-1])
            elif "." in name.lstrip("./") or name.startswith("./"):
                files.append(name)
            else:
                # A bare name without a suffix: a directory more often than not (README-less trees).
                dirs.append(name)
    return files, dirs
