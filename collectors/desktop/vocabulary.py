"""What the desktop explorer types and presses, per application (logical names as tasks give them)."""

from __future__ import annotations

import random

# Logical application name -> the program a terminal starts it with (the desktop sandbox's apps).
PROGRAMS = {"calculator": "gnome-calculator", "editor": "mousepad", "terminal": "xterm"}
# Substrings of an application or window name that tell which logical application it is.
_APP_HINTS = {
    "calculator": ("calculator", "gnome-calculator"),
    "editor": ("mousepad", "editor", "untitled"),
    "terminal": ("xterm", "terminal", "@"),
}

_WORDS = (
    "the", "quick", "brown", "fox", "meeting", "notes", "tomorrow", "budget", "draft", "report",
    "hello", "world", "agenda", "list", "todo", "call", "Alice", "Bob", "review", "plan",
)  # fmt: skip
_COMMANDS = ("ls", "pwd", "echo hello", "date", "ls -la", "whoami", "cat notes.txt", "uname -a", "ls /tmp")

# Keyboard shortcuts (pyautogui key names), per application and for any window.
SHORTCUTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "calculator": (("esc",), ("enter",), ("backspace",), ("ctrl", "z"), ("ctrl", "c"), ("ctrl", "v")),
    "editor": (
        ("ctrl", "a"),
        ("ctrl", "c"),
        ("ctrl", "v"),
        ("ctrl", "z"),
        ("ctrl", "s"),
        ("ctrl", "n"),
        ("ctrl", "f"),
        ("home",),
        ("end",),
        ("enter",),
        ("backspace",),
        ("ctrl", "end"),
    ),  # fmt: skip
    "terminal": (("ctrl", "c"), ("ctrl", "l"), ("up",), ("enter",), ("tab",)),
    "": (("tab",), ("esc",), ("alt", "tab"), ("enter",), ("shift", "tab")),
}
# Quitting the focused application: its own quit shortcut or the window manager's close.
CLOSE_KEYS = (("ctrl", "q"), ("alt", "f4"))
FILE_NAMES = ("notes.txt", "todo.txt", "draft.md", "report.txt")


def logical_app(name: str) -> str:
    """The logical application a window or application name belongs to, or ""."""
    lowered = name.lower()
    for app, hints in _APP_HINTS.items():
        if any(hint in lowered for hint in hints):
            return app
    return ""


def text_for(app: str, rng: random.Random) -> str:
    """Something a user would type into `app`: an expression, a sentence, a shell command."""
    if app == "calculator":
        op = rng.choice("+-*/")
        return f"{rng.randint(1, 99)}{op}{rng.randint(1, 99)}"
    if app == "terminal":
        return rng.choice(_COMMANDS)
    words = rng.sample(_WORDS, rng.randint(2, 6))
    return " ".join(words).capitalize() + rng.choice((".", "", "!", "\n"))
