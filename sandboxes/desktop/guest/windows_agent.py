"""Desktop guest agent for Windows: the JSON-lines protocol of `agent.py`, over UI Automation.

UNTESTED HERE. This project's hosts run Linux and reach no Windows machine, so this file has never
run; it is written from the pywinauto, pyautogui and UI Automation documentation and kept short so
that it can be checked by reading. Treat a first run on Windows as its test.

Setup on the Windows machine (Windows 10/11 with the OpenSSH server feature enabled):
    py -3.11 -m pip install pywinauto pyautogui pillow
and on the host: `SshTarget(..., shell="windows")`; the sandbox copies this file with `put_file`
and runs `python windows_agent.py --workdir DIR` in the interactive user's session (UI Automation
and input need a logged-in desktop; a service session has none).

Differences from the Linux agent, all on purpose or forced by Windows:
- The tree is the whole interactive desktop (every visible top-level window, the taskbar included):
  Windows has no private display per sandbox, so run one sandbox per Windows machine or VM.
- Roles are UI Automation control types in lower case with spaces ("button", "menu item", "edit").
- pyautogui code runs against the real pyautogui; its fail-safe (an exception when the pointer
  reaches a corner) is off, since an agent, not a person, moves the pointer. There is no per-action
  time limit (no SIGALRM): the host's reply timeout ends a stuck action by closing the session.
- On `reset`, `shutdown` or end of input the applications it started are killed with
  `taskkill /T /F`; packaged apps (Calculator) run under their own image name, killed by name.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

# Logical name -> (command, image name of the window's process when the command only launches it).
APPS = {
    "calculator": (["calc.exe"], "CalculatorApp.exe"),
    "editor": (["notepad.exe"], None),
    "terminal": (["cmd.exe"], None),
}
# UI Automation property ids (UIAutomationClient.h, "Automation Element Property Identifiers").
HAS_KEYBOARD_FOCUS, IS_OFFSCREEN, VALUE, VALUE_READ_ONLY = 30008, 30022, 30045, 30046
RANGE_VALUE, EXPAND_STATE, IS_SELECTED, TOGGLE_STATE = 30047, 30070, 30079, 30086
TEXT_TYPES = {"edit", "document", "text", "combo box", "spinner"}
WALK_LIMIT = 5000


def _role(control_type: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", control_type or "unknown").lower()


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def _prop(info: Any, prop_id: int) -> Any:
    try:
        return info.element.GetCurrentPropertyValue(prop_id)
    except Exception:  # noqa: BLE001 - a control without that pattern, or one that just went away
        return None


def _line(info: Any, depth: int) -> str:
    role = _role(info.control_type)
    value = _prop(info, VALUE) or _prop(info, RANGE_VALUE)
    states = [name for name, on in (
        ("focused", _prop(info, HAS_KEYBOARD_FOCUS)), ("selected", _prop(info, IS_SELECTED)),
        ("checked", _prop(info, TOGGLE_STATE) == 1), ("expanded", _prop(info, EXPAND_STATE) == 1),
        ("editable", role in TEXT_TYPES and _prop(info, VALUE_READ_ONLY) is False),
    ) if on]  # fmt: skip
    rect = info.rectangle
    line = f'{"  " * depth}{role} "{_quote(info.name or "")}"'
    if value not in (None, "") and str(value) != info.name:
        line += f' value="{_quote(str(value)[:400])}"'
    if states:
        line += f" states={','.join(states)}"
    return line + f" @({rect.left},{rect.top} {rect.width()}x{rect.height()})"


def tree_lines() -> list[str]:
    from pywinauto import Desktop  # noqa: PLC0415 - Windows only

    lines: list[str] = []
    stack = [(w.element_info, 0) for w in reversed(Desktop(backend="uia").windows(visible_only=True))]
    while stack and len(lines) < WALK_LIMIT:
        info, depth = stack.pop()
        if _prop(info, IS_OFFSCREEN):
            continue
        lines.append(_line(info, depth))
        stack += [(child, depth + 1) for child in reversed(info.children())]
    return lines


def focused_window() -> str:
    """`<program> — <title>` of the foreground window, or `none`."""
    import ctypes  # noqa: PLC0415

    from pywinauto.uia_element_info import UIAElementInfo  # noqa: PLC0415

    handle = ctypes.windll.user32.GetForegroundWindow()
    if not handle:
        return "none"
    info = UIAElementInfo(handle)
    kernel32 = ctypes.windll.kernel32
    process = kernel32.OpenProcess(0x1000, False, info.process_id)  # PROCESS_QUERY_LIMITED_INFORMATION
    path, size = ctypes.create_unicode_buffer(1024), ctypes.c_ulong(1024)
    if not (process and kernel32.QueryFullProcessImageNameW(process, 0, path, ctypes.byref(size))):
        path.value = "unknown"
    if process:
        kernel32.CloseHandle(process)
    return f"{os.path.basename(path.value)} — {info.name}"


class Session:
    def __init__(self, args: argparse.Namespace) -> None:
        import pyautogui  # noqa: PLC0415

        pyautogui.FAILSAFE = False
        self.gui, self.args = pyautogui, args
        self.home = os.path.join(os.path.abspath(args.workdir), "home")
        os.makedirs(self.home, exist_ok=True)
        self.started: list[tuple[subprocess.Popen, str | None]] = []

    def stop_apps(self) -> None:
        for proc, image in self.started:
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(proc.pid)], capture_output=True)
            if image:
                subprocess.run(["taskkill", "/F", "/IM", image], capture_output=True)
        self.started.clear()

    def reset(self, apps: list[str], files: dict[str, str]) -> str:
        self.stop_apps()
        for rel, text in files.items():
            path = os.path.normpath(os.path.join(self.home, rel))
            if not path.startswith(self.home + os.sep):
                return f"file path {rel!r} leaves the home directory"
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        env = {**os.environ, "USERPROFILE": self.home, "HOME": self.home}
        for name in apps:
            if name not in APPS:
                return f"unknown application {name!r}; known: {', '.join(sorted(APPS))}"
            argv, image = APPS[name]
            proc = subprocess.Popen(argv, cwd=self.home, env=env, creationflags=subprocess.CREATE_NEW_CONSOLE)
            self.started.append((proc, image))
        deadline = time.monotonic() + self.args.app_timeout
        while apps and focused_window() == "none" and time.monotonic() < deadline:
            time.sleep(0.2)
        return ""

    def act(self, action: dict[str, Any]) -> str:
        try:
            if action.get("kind") == "pyautogui":
                code = compile(action.get("code", ""), "<action>", "exec")
                exec(code, {"pyautogui": self.gui, "time": time})  # noqa: S102 - the agent's action, its own VM
            else:
                self.computer(action)
            return ""
        except Exception as exc:  # noqa: BLE001 - the agent's error is its to see
            return f"{type(exc).__name__}: {exc}"

    def computer(self, a: dict[str, Any]) -> None:
        g, kind, x, y = self.gui, a.get("action"), a.get("x"), a.get("y")
        if x is not None and kind != "move" and self._nothing_at(x, y):
            raise ValueError(f"nothing at ({x}, {y}): no window is there")
        calls = {
            "move": lambda: g.moveTo(x, y),
            "click": lambda: g.click(x, y, clicks=a.get("clicks", 1), button=a.get("button", "left")),
            "double_click": lambda: g.doubleClick(x, y),
            "right_click": lambda: g.rightClick(x, y),
            "drag": lambda: (
                g.moveTo(x, y),
                g.dragTo(a.get("to_x"), a.get("to_y"), button=a.get("button", "left")),
            ),
            "scroll": lambda: g.scroll(a.get("clicks", -3), x, y),
            "type": lambda: g.write(a.get("text", "")),
            "press": lambda: g.press(a.get("key", "")),
            "hotkey": lambda: g.hotkey(*a.get("keys", [])),
            "wait": lambda: time.sleep(float(a.get("seconds", 1.0))),
        }
        if kind not in calls:
            raise ValueError(f"unknown computer action {kind!r}")
        calls[kind]()

    @staticmethod
    def _nothing_at(x: int, y: int) -> bool:
        from pywinauto import Desktop  # noqa: PLC0415

        top = Desktop(backend="uia").top_from_point(int(x), int(y))
        return top is None or top.element_info.class_name in ("Progman", "WorkerW")  # the bare desktop

    def observe(self, max_nodes: int, screenshot: bool, error: str) -> dict[str, Any]:
        time.sleep(self.args.settle)  # UI Automation has no cheap "idle" signal; a short fixed pause
        lines, focused = tree_lines(), focused_window()
        shown = [
            f"{ln[: len(ln) - len(ln.lstrip())]}[{i}] {ln.lstrip()}" for i, ln in enumerate(lines[:max_nodes])
        ]
        if len(lines) > max_nodes:
            shown.append(f"[... {len(lines) - max_nodes} more nodes not shown]")
        head = ([f"Error: {error}"] if error else []) + [f"Focused: {focused}"]
        png = None
        if screenshot:
            buf = io.BytesIO()
            self.gui.screenshot().save(buf, format="PNG")
            png = base64.b64encode(buf.getvalue()).decode()
        return {"ok": True, "tree": "\n".join(head + shown), "nodes": len(lines),
                "truncated": len(lines) > max_nodes, "focused": focused, "screenshot_png_b64": png,
                "error": error}  # fmt: skip


def handle(session: Session, request: dict[str, Any]) -> dict[str, Any]:
    op, max_nodes = request.get("op"), request.get("max_nodes", session.args.max_nodes)
    shot = request.get("screenshot", session.args.screenshot)
    if not isinstance(max_nodes, int) or max_nodes < 1 or not isinstance(shot, bool):
        return {"ok": False, "error": "max_nodes must be a positive int and screenshot a bool"}
    if op == "reset":
        return session.observe(
            max_nodes, shot, session.reset(request.get("apps", []), request.get("files", {}))
        )
    if op == "act" and isinstance(request.get("action"), dict):
        return session.observe(max_nodes, shot, session.act(request["action"]))
    if op == "observe":
        return session.observe(max_nodes, shot, "")
    return {
        "ok": False,
        "error": f"bad request {op!r}; expected reset, act (with an action), observe or shutdown",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, help="private directory for the applications' files")
    parser.add_argument("--max-nodes", type=int, default=400)
    parser.add_argument("--screenshot", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--settle", type=float, default=0.3, help="pause after an action before reading the tree"
    )
    parser.add_argument(
        "--app-timeout", type=float, default=30.0, help="longest wait for a started app's window"
    )
    args = parser.parse_args()
    out = sys.stdout
    session = Session(args)
    try:
        size = session.gui.size()
        ready = {
            "pid": os.getpid(),
            "width": size[0],
            "height": size[1],
            "apps": sorted(APPS),
            "os": "windows",
        }
        out.write(json.dumps({"ok": True, "ready": ready}) + "\n")
        out.flush()
        for line in sys.stdin:
            try:
                request = json.loads(line)
                reply = (
                    {"ok": True, "error": ""} if request.get("op") == "shutdown" else handle(session, request)
                )
            except (ValueError, AttributeError) as exc:
                reply = {"ok": False, "error": f"bad request line: {exc}"}
            out.write(json.dumps(reply) + "\n")
            out.flush()
            if reply.get("ok") and request.get("op") == "shutdown":
                break
    finally:
        session.stop_apps()
    return 0


if __name__ == "__main__":
    sys.exit(main())
