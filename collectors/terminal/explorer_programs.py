"""The explorer's moves for interactive programs: how it starts them, and what it types inside.

They register in the same MOVES registry as the shell moves (importing this module does it).
"""

from __future__ import annotations

from collectors.terminal.explorer_moves import LINES, NEW_FILES, has_files, move, q, some_file
from collectors.terminal.explorer_session import Session
from collectors.terminal.screen import SHELL
from schemas.records import Action

# interactive programs: launches --------------------------------------------------------------


def launch(s: Session, command: str, expect: str, wait: float = 1.0) -> Action:
    return s.keys([(command, 0.1), ("Enter", wait)], expect=expect, command=command)


@move(1.1)
def start_python(s: Session) -> Action:
    return launch(s, "python3", "python")


@move(0.9)
def start_vim(s: Session) -> Action:
    return launch(s, f"vi {q(some_file(s))}", "vim")


@move(0.4)
def start_nano(s: Session) -> Action:
    return launch(s, f"nano {q(s.pick(NEW_FILES))}", "nano")


@move(0.9, guard=has_files)
def start_less(s: Session) -> Action:
    return launch(s, f"less {q(some_file(s))}", "less")


@move(0.4)
def start_top(s: Session) -> Action:
    return launch(s, "top", "top", wait=1.5)


@move(0.5)
def start_bc(s: Session) -> Action:
    return launch(s, "bc -q", "bc", wait=0.5)


@move(0.35)
def start_stdin(s: Session) -> Action:
    name = s.pick(NEW_FILES)
    s.files = sorted(set(s.files) | {name})
    return launch(s, f"cat > {q(name)}", "stdin", wait=0.3)


@move(0.35)
def start_and_interrupt(s: Session) -> Action:
    s.pending.append(s.keys([("C-c", 0.5)], expect=SHELL))
    return s.keys([("sleep 30", 0.1), ("Enter", 0.5)], expect="stdin", command="sleep 30")


# interactive programs: inside ----------------------------------------------------------------


def typed(s: Session, text: str, wait: float = 0.4) -> Action:
    return s.keys([(text, 0.1), ("Enter", wait)], expect=s.mode)


@move(5, modes=("python",))
def python_expression(s: Session) -> Action:
    if s.screen.rstrip().endswith("..."):
        return typed(s, "")
    return typed(
        s,
        s.pick(
            (
                "2 ** 100",
                "sum(range(101))",
                "import os; os.getcwd()",
                "[x * x for x in range(6)]",
                "'hello'.upper()",
                "sorted(os.listdir('.'))[:5]",
                "import math; math.pi",
                "x = 41",
                "x + 1",
                "open('missing.txt')",
                "print('done')",
                "dict(a=1, b=2)",
                "1 +",
                "len('world')",
            )
        ),
    )


@move(1, modes=("python",), growth=1.0)
def python_exit(s: Session) -> Action:
    return s.keys(
        [(s.pick(("exit()", "quit()")), 0.1), ("Enter", 0.5)] if s.rng.random() < 0.7 else [("C-d", 0.5)]
    )


@move(4, modes=("vim",), guard=lambda s: not s.scratch.get("vim_typed"))
def vim_insert(s: Session) -> Action:
    s.scratch["vim_typed"] = True
    key = s.pick(("i", "o", "A", "O"))
    return s.keys([("Escape", 0.1), (key, 0.1), (s.pick(LINES), 0.1), ("Escape", 0.3)], expect="vim")


@move(2, modes=("vim",))
def vim_navigate(s: Session) -> Action:
    return s.keys([(s.pick(("G", "gg", "dd", "u", "x", "w", "j", "k", "$", "0", "yyp")), 0.3)], expect="vim")


@move(0.5, modes=("vim",), growth=1.0)
def vim_quit(s: Session) -> Action:
    s.scratch.pop("vim_typed", None)
    return s.keys([("Escape", 0.1), (s.pick((":wq", ":wq", ":q!", ":x")), 0.1), ("Enter", 0.5)])


@move(3, modes=("nano",))
def nano_type(s: Session) -> Action:
    return s.keys([(s.pick(LINES), 0.1), ("Enter", 0.3)], expect="nano")


@move(0.5, modes=("nano",), growth=1.0)
def nano_exit(s: Session) -> Action:
    # Ctrl-X, then "y" to save the buffer and Enter to keep the file name.
    return s.keys([("C-x", 0.3), ("y", 0.3), ("Enter", 0.5)])


@move(3, modes=("less",))
def less_page(s: Session) -> Action:
    keys = s.pick((("Space", 0.4), ("b", 0.3), ("G", 0.3), ("g", 0.3), ("j", 0.2), ("/ERROR", 0.1)))
    items = [keys] if keys[0] != "/ERROR" else [keys, ("Enter", 0.4)]
    return s.keys(items, expect="less")


@move(0.5, modes=("less",), growth=1.2)
def less_quit(s: Session) -> Action:
    return s.keys([("q", 0.5)])


@move(1, modes=("top",))
def top_sort(s: Session) -> Action:
    return s.keys([(s.pick(("M", "P", "1", "c")), 1.0)], expect="top")


@move(1, modes=("top",), growth=1.5)
def top_quit(s: Session) -> Action:
    return s.keys([("q", 0.5)])


@move(4, modes=("bc",))
def bc_expression(s: Session) -> Action:
    return typed(
        s, s.pick(("2^64", "scale=5; 22/7", "sqrt(2)", "(3+4)*5", "10 % 3", "1/0", "ibase=2; 1011")), 0.3
    )


@move(0.5, modes=("bc",), growth=1.2)
def bc_quit(s: Session) -> Action:
    return s.keys([("quit", 0.1), ("Enter", 0.5)])


@move(2, modes=("stdin",))
def stdin_line(s: Session) -> Action:
    return typed(s, s.pick(LINES), 0.2)


@move(0.5, modes=("stdin",), growth=1.5)
def stdin_end(s: Session) -> Action:
    return s.keys([(s.pick(("C-d", "C-c")), 0.5)])
