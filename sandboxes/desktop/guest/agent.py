#!/usr/bin/env python3
"""Desktop guest agent: owns one X session and answers JSON-lines requests on stdin/stdout.

Run as `/usr/bin/python3 agent.py --workdir DIR [--width W --height H ...]` on the target (a local
bubblewrap sandbox, an SSH host, a VM). Self-contained on purpose: it is copied to remote machines
with the modules beside it, so they import nothing from the repository, only each other as top-level
modules (their directory is on sys.path when agent.py runs as a script): session.py (the X session
and its observation), a11y.py (the tree read over D-Bus), tree_format.py (the text form),
pyautogui_subset.py (the actions, driven with xdotool), key_names.py and process_tree.py. It needs
Python 3.11, python3-gi with the Atspi typelib (both come with python3-pyatspi; the tree is read
straight over D-Bus), python3-xlib, xdotool, and optionally PIL or scrot for screenshots. Every
path comes from argv.

The agent is a child subreaper, so whatever the session starts stays its descendant; when stdin
closes, on `shutdown` or on SIGTERM it kills them all.

Protocol (one JSON object per line): first `{"ok": true, "ready": {...}}`, then per request
{"op": "reset", "apps": [...], "files": {path: text}} | {"op": "act", "action": {...}} |
{"op": "observe", "settle": bool} | {"op": "shutdown"}, each with optional "max_nodes" and "screenshot",
answered by
{"ok": true, "tree", "nodes", "truncated", "focused", "screenshot_png_b64", "error"}. An action that
fails the way an agent would see it is still ok with `error` set; ok: false means protocol misuse.
A task's verifier reads files of the home directory with {"op": "read_files", "paths": [...],
"max_bytes": N}, answered {"ok": true, "files": {path: {"exists": bool, "text": str, "size": int}}}
(text decoded as UTF-8 with replacement, its first max_bytes bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

from process_tree import kill_descendants, set_subreaper
from pyautogui_subset import PyAutoGui, run_action
from session import APPS, ActionError, Session


def _handle(session: Session, gui: PyAutoGui, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "read_files":
        return _read_files(session.home, request)
    max_nodes = request.get("max_nodes", session.args.max_nodes)
    shot = request.get("screenshot", session.args.screenshot)
    if not isinstance(max_nodes, int) or max_nodes < 1 or not isinstance(shot, bool):
        return {"ok": False, "error": "max_nodes must be a positive int and screenshot a bool"}
    if op == "reset":
        apps, files = request.get("apps", []), request.get("files", {})
        if not isinstance(apps, list) or not isinstance(files, dict):
            return {"ok": False, "error": "reset needs 'apps' (a list) and 'files' (an object)"}
        try:
            error = session.reset(apps, files)
        except ActionError as exc:
            error = str(exc)
        return session.observe(max_nodes, shot, error)
    if op == "act":
        action = request.get("action")
        if not isinstance(action, dict):
            return {"ok": False, "error": "act needs an 'action' object"}
        return session.observe(max_nodes, shot, run_action(gui, action, session.args.action_timeout))
    if op == "observe":
        settle = request.get("settle", True)
        if not isinstance(settle, bool):
            return {"ok": False, "error": "settle must be a bool"}
        return session.observe(max_nodes, shot, "", settle)
    return {"ok": False, "error": f"unknown op {op!r}; expected reset, act, observe, read_files or shutdown"}


def _read_files(home: str, request: dict[str, Any]) -> dict[str, Any]:
    paths, max_bytes = request.get("paths"), request.get("max_bytes", 65536)
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        return {"ok": False, "error": "read_files needs 'paths' (a list of strings)"}
    if not isinstance(max_bytes, int) or max_bytes < 0:
        return {"ok": False, "error": "max_bytes must be a non-negative int"}
    files = {}
    for rel in paths:
        path = os.path.normpath(os.path.join(home, rel))
        if not path.startswith(home + os.sep):
            return {"ok": False, "error": f"file {rel!r} is outside the home directory"}
        try:
            with open(path, "rb") as f:
                head = f.read(max_bytes)
                size = os.fstat(f.fileno()).st_size
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            files[rel] = {"exists": False, "text": "", "size": 0}
            continue
        except OSError as exc:  # unreadable: the verifier says so instead of guessing
            return {"ok": False, "error": f"file {rel!r} cannot be read: {exc}"}
        files[rel] = {"exists": True, "text": head.decode("utf-8", "replace"), "size": size}
    return {"ok": True, "files": files}


def _log_tail(workdir: str, chars: int = 2000) -> str:
    """The end of the session's log (what Xvfb, the buses and openbox said), for a failed start."""
    try:
        with open(os.path.join(workdir, "session.log"), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            tail = f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return f"; session.log ends: {tail}" if tail else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, help="private directory for HOME, buses and logs")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--max-nodes", type=int, default=400)
    parser.add_argument("--screenshot", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--settle-timeout", type=float, default=3.0, help="longest wait for a still tree")
    parser.add_argument("--settle-interval", type=float, default=0.05, help="pause between tree snapshots")
    parser.add_argument("--app-timeout", type=float, default=30.0, help="longest wait for an app's window")
    parser.add_argument("--action-timeout", type=float, default=60.0, help="longest run of one action")
    parser.add_argument("--atspi-launcher", default="/usr/libexec/at-spi-bus-launcher")
    args = parser.parse_args(argv)
    # Protocol lines go to a private copy of stdout; anything a library prints lands on stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    set_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    session = None
    try:
        session = Session(args)
        gui = PyAutoGui(session)
        ready = {
            "display": session.display,
            "width": args.width,
            "height": args.height,
            "apps": sorted(APPS),
            "pid": os.getpid(),
            "dbus": session.env["DBUS_SESSION_BUS_ADDRESS"],
        }
        out.write(json.dumps({"ok": True, "ready": ready}) + "\n")
        for line in sys.stdin:
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request must be a JSON object")
            except ValueError as exc:
                out.write(json.dumps({"ok": False, "error": f"bad request line: {exc}"}) + "\n")
                continue
            if request.get("op") == "shutdown":
                out.write(json.dumps({"ok": True, "error": ""}) + "\n")
                break
            try:
                reply = _handle(session, gui, request)
            except Exception as exc:  # noqa: BLE001 - one bad request must not end the session
                reply = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}
            out.write(json.dumps(reply) + "\n")
    except Exception as exc:  # noqa: BLE001 - report why the session could not start or went wrong
        error = f"desktop session failed: {type(exc).__name__}: {exc}{_log_tail(args.workdir)}"
        out.write(json.dumps({"ok": False, "error": error}) + "\n")
        return 1
    finally:
        if session is not None:
            session.close()
        else:
            kill_descendants()
    return 0


if __name__ == "__main__":
    sys.exit(main())
