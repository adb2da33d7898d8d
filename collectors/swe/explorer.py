"""The embedded default SWE policy: a debugging session without a model.

It looks around (the listing, directories, source files), runs the tests, reads the failure (the
source lines the traceback names), greps for names it saw, and tries fixes: a small edit on a line
near the failure (an operator or a number changed, the kind of slip the task's bug is), sometimes
a wrong one, sometimes an `old_str` that does not match or is not unique, as agents do; after an
edit it reruns the tests, and it may undo an edit with git. It stops once the tests pass after an
edit. All randomness comes from the rng given at reset.
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from collectors.policies.explorer import Explorer
from sandboxes.swe.actions import bash_action, edit_action, read_action
from schemas.records import Action, Observation, Task

# A traceback location as pytest prints it ("pkg/mod.py:12: in f") or as Python does.
_PYTEST_LOCATION = re.compile(r"^([\w./-]+\.py):(\d+): ", re.MULTILINE)
_PYTHON_LOCATION = re.compile(r'File "(?:/repo/)?([\w./-]+\.py)", line (\d+)')
_READ_LINE = re.compile(r"^ *(\d+)\t(.*)$")
_GREP_LINE = re.compile(r"^(?:\./)?([\w./-]+\.py):(\d+):(.*)$", re.MULTILINE)
_CODE = re.compile(r"[=()\[\]]")  # a line of code rather than prose in a docstring
_CALLED = re.compile(r"\b([A-Za-z_]\w{2,})\(")
_IDENTIFIER = re.compile(r"\b(?:def|class) ([A-Za-z_]\w*)|\b([a-z_]\w{3,})\(")
# Swaps an edit may try on a line, the bug kinds of sandboxes/swe/mutation_sites.py among them.
_SWAPS = [
    (" <= ", " < "), (" < ", " <= "), (" >= ", " > "), (" > ", " >= "), (" == ", " != "),
    (" != ", " == "), (" is not ", " is "), (" is ", " is not "), (" not in ", " in "),
    (" in ", " not in "), (" and ", " or "), (" or ", " and "), (" + ", " - "), (" - ", " + "),
    (" * ", " // "), (" // ", " * "),
]  # fmt: skip
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
SHELL_LOOKS = (
    "git status --short",
    "git diff",
    "git log --oneline -3",
    "ls -la",
    "find . -name '*.py' | head -40",
)


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        name.startswith("test") or name.endswith("_test.py") or "/test" in f"/{path}" or name == "conftest.py"
    )


@dataclass
class _Session:
    rng: random.Random
    test_command: str
    steps: int = 0
    files: list[str] = field(default_factory=list)  # .py files seen in listings
    dirs: list[str] = field(default_factory=list)
    read_lines: dict[str, dict[int, str]] = field(default_factory=dict)  # path -> line number -> text
    failures: list[tuple[str, int]] = field(default_factory=list)  # source locations of the last failure
    names: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)  # names the failing test calls
    looked_at: set[tuple[str, int]] = field(default_factory=set)
    edited: list[str] = field(default_factory=list)
    last_kind: str = ""  # the last action's tool, or its command for bash
    read_path: str = ""  # the path the last action read
    opened: set[str] = field(default_factory=set)  # paths read so far
    tests_ran: bool = False
    tests_pass: bool = False


@dataclass(eq=False)
class SweExplorer(Explorer):
    name = "explorer"
    stop_probability: float = 0.04
    wrong_edit_probability: float = 0.3
    session: _Session | None = field(default=None, init=False, repr=False)

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        command = task.metadata.get("test_command") or ["python3", "-m", "pytest", "-q"]
        text = command if isinstance(command, str) else shlex.join(command)
        self.session = _Session(rng=rng, test_command=text)
        self._listing(observation.text.partition("\n\n")[2], "")

    def act(self, observation: Observation) -> Action | None:
        s = self.started(self.session)
        if s.steps:
            self._observe(observation)
        s.steps += 1
        if s.tests_pass and s.edited:
            return None  # fixed
        if s.steps > 6 and s.rng.random() < self.stop_probability:
            return None
        moves = [(weight, move) for weight, move, ready in self._moves(s) if ready]
        action = s.rng.choices([m for _, m in moves], weights=[w for w, _ in moves])[0]()
        s.last_kind = action.kind if action.kind != "bash" else action.arguments["command"]
        s.read_path = action.arguments["path"] if action.kind == "read" else ""
        s.opened.add(s.read_path)
        return action

    def _moves(self, s: _Session) -> list[tuple[float, Callable[[], Action], bool]]:
        # Agents open what they have not seen yet far more often than what they already read.
        source = [f for f in s.files if not _is_test_file(f) and f not in s.opened]
        dirs = [d for d in s.dirs if d not in s.opened]
        after_edit = bool(s.edited) and s.last_kind == "edit"
        return [
            (40 if not s.tests_ran or after_edit else 6, self._run_tests, True),
            (30 if set(s.failures) - s.looked_at else 4, self._read_failure, bool(s.failures)),
            (20, self._find_definition, bool(s.suspects)),
            (12, lambda: read_action(s.rng.choice(source)), bool(source)),
            (2, lambda: read_action(s.rng.choice(s.files)), bool(s.files)),
            (8, lambda: read_action(s.rng.choice(dirs)), bool(dirs)),
            (
                25 if any(_variants(t) for _, _, t in self._near_failure()) else 3,
                self._edit,
                bool(self._editable()),
            ),
            (5, self._grep, bool(s.names)),
            (3, lambda: bash_action(s.rng.choice(SHELL_LOOKS)), True),
            (4, lambda: bash_action(f"git checkout -- {shlex.quote(s.edited[-1])}"), bool(s.edited)),
            (2, lambda: read_action(s.rng.choice(["missing.py", "src/", "README"])), True),
        ]

    def _run_tests(self) -> Action:
        return bash_action(self.session.test_command)  # type: ignore[union-attr]

    def _read_failure(self) -> Action:
        s = self.session
        assert s is not None
        fresh = [loc for loc in s.failures if loc not in s.looked_at] or s.failures
        path, line = fresh[-1] if s.rng.random() < 0.7 else s.rng.choice(fresh)
        s.looked_at.add((path, line))
        return read_action(path, max(1, line - 12), line + 12)

    def _find_definition(self) -> Action:
        s = self.session
        assert s is not None
        name = s.suspects.pop(s.rng.randrange(len(s.suspects)))
        return bash_action(f"grep -rn {shlex.quote(f'def {name}')} --include='*.py' . | head -20")

    def _near_failure(self) -> list[tuple[str, int, str]]:
        """Source lines read so far within a few lines of a failure's source location."""
        s = self.session
        assert s is not None
        return [
            (path, n, text)
            for path, line in s.failures
            if not _is_test_file(path)
            for n, text in s.read_lines.get(path, {}).items()
            if abs(n - line) <= 6 and _CODE.search(text) and not text.lstrip().startswith("#")
        ]

    def _editable(self) -> list[tuple[str, int, str]]:
        """(path, line, text) of source lines read so far, those near a failure first."""
        s = self.session
        assert s is not None
        near = self._near_failure()
        if near:
            return near
        return [
            (path, n, text)
            for path, lines in s.read_lines.items()
            if not _is_test_file(path)
            for n, text in lines.items()
            if text.strip()
        ]

    def _edit(self) -> Action:
        s = self.session
        assert s is not None
        candidates = self._editable()
        changeable = [(p, n, t) for p, n, t in candidates if _variants(t)]
        path, _, text = s.rng.choice(changeable or candidates)
        variants = _variants(text)
        roll = s.rng.random()
        if not variants or roll < self.wrong_edit_probability / 3:
            old = text.strip() + "  "  # a slip: trailing spaces that are not in the file
        elif roll < self.wrong_edit_probability * 2 / 3 and len(text.strip()) > 3:
            old = text.strip()[: max(3, len(text.strip()) // 3)]  # too short a piece: maybe not unique
        else:
            old = text
        new = s.rng.choice(variants) if variants else text.strip()
        if old != text:
            new = new.strip()
        s.edited.append(path)
        return edit_action("str_replace", path, old_str=old, new_str=new)

    def _grep(self) -> Action:
        s = self.session
        assert s is not None
        return bash_action(f"grep -rn {shlex.quote(s.rng.choice(s.names))} --include='*.py' . | head -20")

    def _observe(self, observation: Observation) -> None:
        s = self.session
        assert s is not None
        data = observation.data or {}
        tool, text = data.get("tool"), observation.text
        if tool == "read" and not data.get("error"):
            path = s.read_path
            numbered = [_READ_LINE.match(line) for line in text.splitlines()]
            if numbered and all(numbered[:3]):
                lines = {int(m[1]): m[2] for m in numbered if m}
                s.read_lines.setdefault(path, {}).update(lines)
                if _is_test_file(path):
                    near = " ".join(
                        t for n, t in lines.items() if any(abs(n - f) <= 4 for p, f in s.failures)
                    )
                    called = set(_CALLED.findall(near)) - {
                        "assertEqual",
                        "assertTrue",
                        "assertFalse",
                        "assertRaises",
                    }
                    s.suspects = sorted(set(s.suspects) | called)[:20]
                found = (a or b for a, b in _IDENTIFIER.findall(text))
                s.names = sorted(set(s.names) | {n for n in found if n})[:80]
            else:
                self._listing(text, path)
        elif tool == "bash" and s.last_kind.startswith("grep"):
            for path, n, line in _GREP_LINE.findall(text):
                if not _is_test_file(path) and "def " in line and (path, int(n)) not in s.failures:
                    s.failures.append((path, int(n)))
        elif tool == "bash" and s.last_kind == s.test_command:
            s.tests_ran = True
            s.tests_pass = data.get("exit_status") == 0
            locations = _PYTEST_LOCATION.findall(text) + _PYTHON_LOCATION.findall(text)
            found = [(path.removeprefix("./"), int(n)) for path, n in locations]
            source = [loc for loc in found if not _is_test_file(loc[0])]
            s.failures = (source or found)[-6:]

    def _listing(self, text: str, base: str) -> None:
        s = self.session
        assert s is not None
        prefix = f"{base.rstrip('/')}/" if base and base not in (".", "/") else ""
        for entry in text.splitlines():
            entry = entry.strip()
            if not entry or " " in entry:
                continue
            if entry.endswith("/"):
                if not entry.startswith(".") and prefix + entry not in s.dirs:
                    s.dirs.append(prefix + entry)
            elif entry.endswith(".py") and prefix + entry not in s.files:
                s.files.append(prefix + entry)


def _variants(line: str) -> list[str]:
    """The line with one operator swapped or one integer off by one."""
    found = [line.replace(old, new, 1) for old, new in _SWAPS if old in line]
    for match in _NUMBER.finditer(line):
        value = int(match[1])
        for changed in {value + 1, max(0, value - 1)} - {value}:
            found.append(line[: match.start()] + str(changed) + line[match.end() :])
    return found
