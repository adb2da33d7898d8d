"""The explorer's moves: a registry of small, weighted, guarded shell habits.

A move returns the next Action for a Session. Shell moves pick real names the explorer read off
the screen; program moves speak the keys of the program that owns the terminal, and their exit
moves grow more likely the longer the explorer stays.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from collectors.terminal.explorer_session import Session
from collectors.terminal.screen import SHELL
from schemas.records import Action


@dataclass(frozen=True)
class Move:
    name: str
    weight: float
    modes: tuple[str, ...]
    make: Callable[[Session], Action]
    guard: Callable[[Session], bool]
    # Extra weight per step already spent in the mode: how exits become likelier over time.
    growth: float = 0.0


MOVES: list[Move] = []


def move(
    weight: float,
    modes: tuple[str, ...] = (SHELL,),
    guard: Callable[[Session], bool] | None = None,
    growth: float = 0.0,
) -> Callable[[Callable[[Session], Action]], Callable[[Session], Action]]:
    def register(make: Callable[[Session], Action]) -> Callable[[Session], Action]:
        MOVES.append(Move(make.__name__, weight, modes, make, guard or (lambda s: True), growth))
        return make

    return register


def choose_move(session: Session) -> Action:
    candidates = [m for m in MOVES if session.mode in m.modes and m.guard(session)]
    if not candidates:
        # An unknown program holds the terminal: interrupt it, the way a person would.
        return session.keys([("C-c", 0.5)], expect=SHELL)
    weights = [m.weight + m.growth * session.mode_steps for m in candidates]
    chosen = session.rng.choices(candidates, weights=weights, k=1)[0]
    return chosen.make(session)


def q(text: str) -> str:
    return shlex.quote(text)


def has_files(s: Session) -> bool:
    return bool(s.files)


def has_dirs(s: Session) -> bool:
    return bool(s.dirs)


TEXT_FILES = (".txt", ".md", ".log", ".csv", ".py", ".ini", ".sh", ".c", ".svg", "TODO")
NEW_FILES = ("notes.txt", "draft.md", "scratch.txt", "report.txt", "todo.txt", "data.csv", "hello.py")
LINES = ("hello world", "TODO: check the logs", "alpha,beta,gamma", "version=1.2.3", "error: disk full", "42")
PATTERNS = ("ERROR", "def", "import", "TODO", "main", "error", "the", "200", "a")


def some_file(s: Session) -> str:
    return s.known_file(TEXT_FILES) or s.known_file() or s.pick(NEW_FILES)


def pattern(s: Session) -> str:
    return s.pick(s.words) if s.words and s.rng.random() < 0.5 else s.pick(PATTERNS)


# navigation ---------------------------------------------------------------------------------


@move(9)
def list_dir(s: Session) -> Action:
    target = s.pick(s.dirs) if s.dirs and s.rng.random() < 0.3 else ""
    return s.cmd(
        f"{s.pick(('ls', 'ls -la', 'ls -F', 'ls -lh', 'ls -p'))} {q(target) if target else ''}".strip()
    )


@move(5, guard=has_dirs)
def change_dir(s: Session) -> Action:
    return s.cmd(f"cd {q(s.pick(s.dirs))}", fix="ls -F")


@move(2)
def move_around(s: Session) -> Action:
    return s.cmd(s.pick(("pwd", "cd ..", "cd", "cd -", "cd ~ && pwd")))


@move(2)
def find_files(s: Session) -> Action:
    return s.cmd(s.pick(("find . -maxdepth 2 -type f", "find . -name '*.py'", "find . -type d", "du -sh .")))


# reading and text processing ---------------------------------------------------------------


@move(6, guard=has_files)
def read_file(s: Session) -> Action:
    tool = s.pick(("cat", "head -n 5", "tail -n 5", "wc -l", "file", "stat", "cat -n"))
    return s.cmd(f"{tool} {q(some_file(s))}", fix="ls -la")


@move(5, guard=has_files)
def grep_file(s: Session) -> Action:
    flags = s.pick(("", "-n", "-c", "-i", "-v -c"))
    return s.cmd(f"grep {flags} {q(pattern(s))} {q(some_file(s))}".replace("  ", " "))


@move(2)
def grep_tree(s: Session) -> Action:
    return s.cmd(f"grep -rn {q(pattern(s))} . | head -n 8")


@move(4, guard=has_files)
def transform_text(s: Session) -> Action:
    name = q(some_file(s))
    return s.cmd(
        s.pick(
            (
                f"sed -n '1,5p' {name}",
                f"sed 's/e/E/g' {name} | head -n 5",
                f"awk '{{print $1}}' {name} | sort | uniq -c | sort -rn | head -n 5",
                f"awk -F, 'NR>1 {{print $2}}' {name} | sort -u",
                f"cut -c1-20 {name} | head",
                f"sort {name} | uniq | wc -l",
                f"tr a-z A-Z < {name} | head -n 3",
                f"rev {name} | head -n 3",
                f"nl {name} | tail -n 3",
                f"od -c {name} | head -n 3",
            )
        )
    )


@move(2)
def generate_text(s: Session) -> Action:
    return s.cmd(
        s.pick(
            (
                "seq 1 12 | paste - - -",
                "seq 5 | awk '{s+=$1} END {print s}'",
                "printf 'b\\na\\nc\\na\\n' | sort | uniq -c",
                "echo $((6 * 7))",
                "echo 'scale=4; 22/7' | bc",
                "date +%Y-%m-%d",
                "yes hi | head -n 3",
            )
        )
    )


# files --------------------------------------------------------------------------------------


@move(4)
def write_file(s: Session) -> Action:
    name = s.pick(NEW_FILES)
    s.created.append(name)
    s.files = sorted(set(s.files) | {name})
    return s.cmd(f"echo {q(s.pick(LINES))} {s.pick(('>', '>>'))} {q(name)}")


@move(3)
def make_things(s: Session) -> Action:
    name = s.pick(("tmp", "build", "out", "backup", "src/lib"))
    s.dirs = sorted(set(s.dirs) | {name})
    return s.cmd(
        s.pick((f"mkdir -p {name}", f"mkdir {name}", f"touch {name}.stamp", f"mkdir -p {name} && ls"))
    )


@move(3, guard=has_files)
def copy_move(s: Session) -> Action:
    name = some_file(s)
    op = s.pick(("cp", "cp", "mv", "ln -s"))
    target = f"{name}.bak" if op != "ln -s" else f"link-{name.rsplit('/', 1)[-1]}"
    s.files = sorted(set(s.files) | {target})
    return s.cmd(f"{op} {q(name)} {q(target)}", fix="ls -la")


@move(1, guard=lambda s: bool(s.created))
def remove_file(s: Session) -> Action:
    name = s.created.pop()
    s.files = [f for f in s.files if f != name]
    return s.cmd(f"rm {s.pick(('', '-f ', '-v '))}{q(name)}")


@move(1)
def archive(s: Session) -> Action:
    return s.cmd(s.pick(("tar czf /tmp/home.tgz . && ls -l /tmp/home.tgz", "tar tzf /tmp/home.tgz | head")))


# git and python ---------------------------------------------------------------------------


def in_repo(s: Session) -> bool:
    return ".git" in s.files or ".git" in s.dirs or "repo" in s.cwd.rsplit("/", 1)[-1]


GIT_READS = ("status", "status --short", "log --oneline -5", "diff --stat", "branch -a", "show --stat HEAD")


@move(5, guard=in_repo)
def git(s: Session) -> Action:
    return s.cmd(f"git {s.pick(GIT_READS)}", fix="ls -a")


@move(0.7, guard=lambda s: not in_repo(s))
def git_elsewhere(s: Session) -> Action:
    # Outside a repository git fails; people do this all the time.
    return s.cmd(f"git {s.pick(GIT_READS)}", fix="ls -a")


@move(0.7, guard=lambda s: "repo" in s.dirs)
def enter_repo(s: Session) -> Action:
    return s.cmd("cd repo && git status --short")


@move(1, guard=in_repo)
def git_commit(s: Session) -> Action:
    return s.cmd("git add -A && git -c user.name=explorer -c user.email=e@example.com commit -q -m wip")


@move(3)
def python_oneliner(s: Session) -> Action:
    code = s.pick(
        (
            "print(sum(range(101)))",
            "import os; print(sorted(os.listdir('.'))[:5])",
            "import sys; print(sys.version.split()[0])",
            "print([n * n for n in range(8)])",
            "import json; print(json.dumps({'ok': True}))",
            "import platform; print(platform.machine())",
        )
    )
    return s.cmd(f"python3 -c {q(code)}")


@move(2, guard=lambda s: s.known_file((".py",)) is not None)
def python_script(s: Session) -> Action:
    return s.cmd(f"python3 {q(s.known_file(('.py',)) or 'main.py')}")


@move(3)
def system_info(s: Session) -> Action:
    return s.cmd(
        s.pick(
            (
                "whoami",
                "id",
                "uname -a",
                "hostname",
                "uptime",
                "df -h .",
                "ps aux | head -n 5",
                "env | sort | head -n 5",
                "echo $HOME $SHELL",
                "which python3 git",
                "history | tail -n 3",
                "free -m",
                "type ls cd",
                "sleep 1 && echo slept",
            )
        )
    )


# errors a user makes, each with the retry a user would type ---------------------------------


TYPOS = (
    ("gti status", "git status"),
    ("sl", "ls"),
    ("pyhton3 --version", "python3 --version"),
    ("grpe -rn TODO .", "grep -rn TODO ."),
    ("cta README.md", "ls -F"),
    ("ls --colour-me-happy", "ls --color=never"),
    ("cd no_such_dir", "ls -F"),
    ("cat missing.txt", "ls -la"),
    ("python3 -c 'print(1/0)'", "python3 -c 'print(1/1)'"),
    ("python3 no_such_script.py", "ls *.py"),
    ("cat /etc/shadow", "ls -l /etc/shadow"),
    ("ls /root", "whoami"),
    ("touch /usr/bin/x", "ls -ld /usr/bin"),
    ("mkdir .", "ls -a"),
    ("grep -E '(' notes.txt", "grep -F '(' notes.txt"),
    ("git checkout no-such-branch", "git branch -a"),
    ("tar xzf missing.tgz", "ls"),
)


@move(6)
def make_mistake(s: Session) -> Action:
    wrong, right = s.pick(TYPOS)
    return s.cmd(wrong, fix=right)


@move(2, guard=has_dirs)
def cat_directory(s: Session) -> Action:
    name = s.pick(s.dirs)
    return s.cmd(f"cat {q(name)}", fix=f"ls {q(name)}")
