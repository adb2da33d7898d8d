#!/usr/bin/env python3
"""Desktop guest agent: owns one X session and answers JSON-lines requests on stdin/stdout.

Run as `/usr/bin/python3 agent.py --workdir DIR [--width W --height H ...]` on the target (a local
bubblewrap sandbox, an SSH host, a VM). Self-contained on purpose: it is copied to remote machines,
so it imports nothing from the repository. It needs Python 3.11, python3-gi with the Atspi typelib
(both come with python3-pyatspi; the tree is read straight over D-Bus), python3-xlib, xdotool, and
optionally PIL or scrot for screenshots. Every path comes from argv.

Session: Xvfb (display number chosen by the server with -displayfd, no TCP, an xauth cookie when
xauth is installed), a private session D-Bus, the AT-SPI bus, openbox, then the task's applications,
all with a private HOME under the workdir. The agent is a child subreaper, so whatever the session
starts stays its descendant; when stdin closes, on `shutdown` or on SIGTERM it kills them all.

Protocol (one JSON object per line): first `{"ok": true, "ready": {...}}`, then per request
{"op": "reset", "apps": [...], "files": {path: text}} | {"op": "act", "action": {...}} |
{"op": "observe", "settle": bool} | {"op": "shutdown"}, each with optional "max_nodes" and "screenshot",
answered by
{"ok": true, "tree", "nodes", "truncated", "focused", "screenshot_png_b64", "error"}. An action that
fails the way an agent would see it is still ok with `error` set; ok: false means protocol misuse.

pyautogui is not a Debian package, so the agent runs pyautogui code against its own small
`pyautogui` module (see `PyAutoGui`) that drives the session's display with xdotool: the subset
AgentWorldBench's OS actions use, with pyautogui's names and argument order.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import types
from typing import Any

APPS = {
    "calculator": ["gnome-calculator"],
    "editor": ["mousepad", "--disable-server"],
    # xterm is an Xt program without AT-SPI support: the tree shows its window only.
    "terminal": ["xterm", "-fa", "Monospace", "-fs", "11"],
}
# pyautogui key names (lower case) -> X keysyms; a single printable character maps to itself.
KEYSYMS = {
    "enter": "Return", "return": "Return", "\n": "Return", "esc": "Escape", "escape": "Escape",
    "tab": "Tab", "\t": "Tab", "backspace": "BackSpace", "delete": "Delete", "del": "Delete",
    "space": "space", " ": "space", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "home": "Home", "end": "End", "pageup": "Prior", "pgup": "Prior", "pagedown": "Next",
    "pgdn": "Next", "insert": "Insert", "ctrl": "Control_L", "ctrlleft": "Control_L",
    "ctrlright": "Control_R", "control": "Control_L", "shift": "Shift_L", "shiftleft": "Shift_L",
    "shiftright": "Shift_R", "alt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R", "option": "Alt_L",
    "win": "Super_L", "winleft": "Super_L", "winright": "Super_R", "super": "Super_L", "command": "Super_L",
    "capslock": "Caps_Lock", "printscreen": "Print", "prtsc": "Print", "apps": "Menu", "menu": "Menu",
    "+": "plus", "-": "minus", "=": "equal", "*": "asterisk", "/": "slash", "\\": "backslash",
    ".": "period", ",": "comma", ";": "semicolon", ":": "colon", "'": "apostrophe", '"': "quotedbl",
    "[": "bracketleft", "]": "bracketright", "{": "braceleft", "}": "braceright", "(": "parenleft",
    ")": "parenright", "<": "less", ">": "greater", "?": "question", "!": "exclam", "@": "at",
    "#": "numbersign", "$": "dollar", "%": "percent", "^": "asciicircum", "&": "ampersand",
    "_": "underscore", "|": "bar", "~": "asciitilde", "`": "grave",
    **{f"f{n}": f"F{n}" for n in range(1, 25)},
}  # fmt: skip
BUTTONS = {"left": 1, "middle": 2, "right": 3}
STATES = ("active", "focused", "selected", "checked", "pressed", "expanded", "editable", "indeterminate")
LAYOUT_ROLES = ("panel", "filler")  # unnamed, textless ones only group others: not listed
TEXT_ROLES = frozenset(
    (
        "text",
        "entry",
        "password text",
        "paragraph",
        "terminal",
        "document text",
        "document frame",
        "editbar",
        "combo box",
    )
)
VALUE_ROLES = frozenset(("slider", "scroll bar", "progress bar", "spin button", "level bar", "dial"))
VALUE_CHARS = 400
WALK_LIMIT = 5000  # nodes visited per walk, whatever max_nodes shows
INVALID_COORD = -(2**30)
ROOT_PATH = "/org/a11y/atspi/accessible/root"
NULL_PATH = "/org/a11y/atspi/null"
ACCESSIBLE = "org.a11y.atspi.Accessible"
COMPONENT = "org.a11y.atspi.Component"
TEXT = "org.a11y.atspi.Text"
REGISTRY = "org.a11y.atspi.Registry"


class ActionError(Exception):
    """What the agent sees when its action cannot be done (shown as `Error: ...`)."""


def keysym(key: str) -> str:
    name = KEYSYMS.get(key.lower() if len(key) > 1 else key)
    if name is None and len(key) == 1 and key.isprintable():
        name = key
    if name is None:
        raise ActionError(f"unknown key {key!r}; use pyautogui key names such as enter, ctrl, f5, a")
    return name


Ref = tuple[str, str]  # an accessible: (bus name, object path)
VISIBLE = frozenset(("showing", "visible"))
SHOWING = frozenset(("showing",))


@dataclasses.dataclass
class App:
    bus: str
    name: str
    pid: int
    toolkit_version: str


@dataclasses.dataclass
class Node:
    ref: tuple[str, str]
    role: str
    name: str
    states: frozenset[str]
    box: tuple[int, int, int, int] = (0, 0, 0, 0)
    listed: bool = False
    value: str = ""
    children: list[Node] = dataclasses.field(default_factory=list)


class A11yReader:
    """Reads AT-SPI trees straight from the accessibility bus. Every property of every node is a
    D-Bus round trip, so the reader takes each application's cached nodes in one call
    (org.a11y.atspi.Cache.GetItems) and then asks for boxes, children and texts one tree level at a
    time, all calls of a level in flight together: a tree costs about its depth in round trips."""

    CALL_TIMEOUT_MS = 2000

    def __init__(self, session_bus: str, timeout: float) -> None:
        from gi.repository import Gio, GLib  # noqa: PLC0415 - python3-gi comes with pyatspi

        self.Gio, self.GLib = Gio, GLib
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        session = Gio.DBusConnection.new_for_address_sync(session_bus, flags, None, None)
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = session.call_sync(
                    "org.a11y.Bus",
                    "/org/a11y/bus",
                    "org.a11y.Bus",
                    "GetAddress",
                    None,
                    None,
                    0,
                    self.CALL_TIMEOUT_MS,
                    None,
                )
                break
            except GLib.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.bus = Gio.DBusConnection.new_for_address_sync(reply.unpack()[0], flags, None, None)
        # GTK 3's bridge serves its node cache (Cache.GetItems) only once some client listens for
        # events, as libatspi's own cache does: register as such a listener.
        listen = GLib.Variant("(s)", ("object:children-changed",))
        self._batch(
            [("org.a11y.atspi.Registry", "/org/a11y/atspi/registry", REGISTRY, "RegisterEvent", listen)]
        )
        self.roles, self.state_names = _atspi_names()

    def _batch(self, calls: list[tuple[str, str, str, str, Any]]) -> list[Any]:
        """Send every call, then wait for all replies; an error reply comes back as None."""
        results: list[Any] = [None] * len(calls)
        pending = [len(calls)]

        def done(conn: Any, result: Any, index: int) -> None:
            try:
                results[index] = conn.call_finish(result).unpack()
            except self.GLib.Error:
                pass
            pending[0] -= 1

        for i, (dest, path, iface, method, args) in enumerate(calls):
            self.bus.call(dest, path, iface, method, args, None, 0, self.CALL_TIMEOUT_MS, None, done, i)
        context = self.GLib.MainContext.default()
        while pending[0]:
            context.iteration(True)  # each call times out on its own, so this ends
        return results

    def _get(self, dest: str, path: str, iface: str, prop: str) -> tuple:
        return (
            dest,
            path,
            "org.freedesktop.DBus.Properties",
            "Get",
            self.GLib.Variant("(ss)", (iface, prop)),
        )

    def applications(self) -> list[App]:
        registry = self._batch([("org.a11y.atspi.Registry", ROOT_PATH, ACCESSIBLE, "GetChildren", None)])[0]
        buses = [bus for bus, _ in (registry[0] if registry else [])]
        calls = []
        for bus in buses:
            pid_args = self.GLib.Variant("(s)", (bus,))
            calls.append(
                (
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "GetConnectionUnixProcessID",
                    pid_args,
                )
            )
            calls.append(self._get(bus, ROOT_PATH, ACCESSIBLE, "Name"))
            calls.append(self._get(bus, ROOT_PATH, "org.a11y.atspi.Application", "Version"))
        replies = self._batch(calls)
        apps = []
        for i, bus in enumerate(buses):
            pid, name, version = replies[3 * i : 3 * i + 3]
            if pid is not None:
                apps.append(App(bus, name[0] if name else "", pid[0], version[0] if version else ""))
        return apps

    def frames(self, app: App) -> list[Node]:
        """The application's shown top-level windows, each with its shown descendants. The walk
        goes by states alone (children from the cache where it lists all of a node's children in
        order, else asked for level by level); then one batch asks every visible node's box."""
        info, known = self._cached(app)
        order: list[tuple[Ref | None, Ref]] = []
        seen: set[Ref] = set()
        level: list[tuple[Ref | None, Ref]] = [
            (None, r) for r in self._children_of([(app.bus, ROOT_PATH)], known)[0]
        ]
        # GTK 4 sets only VISIBLE below its windows; other toolkits mark what is on screen SHOWING.
        wanted = VISIBLE if app.toolkit_version.startswith("4.") else SHOWING
        while level and len(order) < WALK_LIMIT:
            self._fill_info([ref for _, ref in level if ref not in info], info)
            level = [(p, r) for p, r in level if r in info and r not in seen and wanted & info[r][2]]
            seen.update(r for _, r in level)
            order += level
            parents = [ref for _, ref in level if info[ref][4]]
            kids = self._children_of(parents, known)
            level = [(parent, kid) for parent, refs in zip(parents, kids, strict=True) for kid in refs]
        with_box = [ref for _, ref in order if info[ref][3]]
        # GTK 4 on X11 knows only window coordinates (and warns on every request for screen ones).
        coords = self.GLib.Variant("(u)", (1 if app.toolkit_version.startswith("4.") else 0,))
        replies = self._batch([(*ref, COMPONENT, "GetExtents", coords) for ref in with_box])
        boxes = {ref: tuple(reply[0]) for ref, reply in zip(with_box, replies, strict=True) if reply}
        placed: dict[Ref, Node] = {}
        tops: list[Node] = []
        for parent, ref in order:
            if parent is not None and parent not in placed:
                continue  # inside a node that is not on screen
            role, name, states, _, _ = info[ref]
            box = boxes.get(ref, (0, 0, 0, 0))
            listed, descend = _shown(states, box)
            if descend:
                placed[ref] = node = Node(ref, role, name, states, box, listed)
                (placed[parent].children if parent is not None else tops).append(node)
        self._fill_values(tops)
        return [top for top in tops if top.listed]

    def _cached(self, app: App) -> tuple[dict[Ref, tuple], dict[Ref, list[Ref]]]:
        """The application's cache in one call: each node's (role, name, states, has a box, child
        count), and the ordered children of the nodes whose children are all in it."""
        cache = (app.bus, "/org/a11y/atspi/cache", "org.a11y.atspi.Cache", "GetItems", None)
        reply = self._batch([cache])[0]
        info: dict[Ref, tuple] = {}
        by_parent: dict[Ref, list[tuple[int, Ref]]] = {}
        for item in reply[0] if reply else []:
            ref, _, parent, index, count, ifaces, name, role, _, states = item
            info[tuple(ref)] = self._info(role, name, states, ifaces, count)
            by_parent.setdefault(tuple(parent), []).append((index, tuple(ref)))
        known = {}
        for parent, kids in by_parent.items():
            if parent in info and len(kids) == info[parent][4] and all(index >= 0 for index, _ in kids):
                known[parent] = [ref for _, ref in sorted(kids)]
        return info, known

    def _children_of(self, refs: list[Ref], known: dict[Ref, list[Ref]]) -> list[list[Ref]]:
        unknown = [ref for ref in refs if ref not in known]
        asked = dict(zip(unknown, self._children(unknown), strict=True))
        return [known[ref] if ref in known else asked[ref] for ref in refs]

    def _info(self, role: int, name: str, states: list[int], ifaces: list[str], count: int) -> tuple:
        bits = states[0] | (states[1] << 32) if len(states) == 2 else 0
        names = frozenset(n for i, n in enumerate(self.state_names) if bits >> i & 1)
        return (self.roles.get(role, str(role)), name, names, COMPONENT in ifaces, count)

    def _fill_info(self, refs: list[tuple[str, str]], info: dict) -> None:
        """Nodes the application's cache did not hold (made after its last update)."""
        calls = []
        for ref in refs:
            calls += [
                (*ref, ACCESSIBLE, "GetRole", None),
                self._get(*ref, ACCESSIBLE, "Name"),
                (*ref, ACCESSIBLE, "GetState", None),
                (*ref, ACCESSIBLE, "GetInterfaces", None),
                self._get(*ref, ACCESSIBLE, "ChildCount"),
            ]
        replies = self._batch(calls)
        for i, ref in enumerate(refs):
            role, name, states, ifaces, count = replies[5 * i : 5 * i + 5]
            if None not in (role, name, states, ifaces, count):
                info[ref] = self._info(role[0], name[0], states[0], ifaces[0], count[0])

    def _children(self, refs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
        replies = self._batch([(*ref, ACCESSIBLE, "GetChildren", None) for ref in refs])
        return [[tuple(c) for c in reply[0] if c[1] != NULL_PATH] if reply else [] for reply in replies]

    def _fill_values(self, tops: list[Node]) -> None:
        """Text of text-holding roles and the value of ranges, for listed nodes."""
        wanted: list[Node] = []
        stack = list(tops)
        while stack:
            node = stack.pop()
            stack += node.children
            if node.listed and (node.role in TEXT_ROLES or node.role in VALUE_ROLES):
                wanted.append(node)
        calls = []
        for node in wanted:
            if node.role in TEXT_ROLES:
                calls.append((*node.ref, TEXT, "GetText", self.GLib.Variant("(ii)", (0, VALUE_CHARS + 1))))
            else:
                calls.append(self._get(*node.ref, "org.a11y.atspi.Value", "CurrentValue"))
        for node, reply in zip(wanted, self._batch(calls), strict=True):
            if reply is not None:
                node.value = _clean_value(reply[0], node.name)


class Session:
    """The X session: display, buses, window manager, applications."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = os.path.abspath(args.workdir)
        self.home = os.path.join(self.workdir, "home")
        self.runtime = os.path.join(self.workdir, "run")
        for path in (self.home, self.runtime):
            os.makedirs(path, mode=0o700, exist_ok=True)
        self.log = open(os.path.join(self.workdir, "session.log"), "ab")  # noqa: SIM115 - lives with the session
        self.apps: dict[str, subprocess.Popen[bytes]] = {}
        self.reported: set[str] = set()
        self.display = self._start_xvfb()
        self.env = {
            "HOME": self.home,
            "XDG_RUNTIME_DIR": self.runtime,
            "DISPLAY": self.display,
            "XAUTHORITY": self.xauthority,
            "XDG_SESSION_TYPE": "x11",
            "GTK_MODULES": "gail:atk-bridge",
            "NO_AT_BRIDGE": "0",
            "GSETTINGS_BACKEND": "memory",
            # No GPU: GTK 4's default GL renderer would run on llvmpipe, several times the CPU of cairo.
            "GSK_RENDERER": "cairo",
            "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
        }
        address = f"--address=unix:path={self.runtime}/bus"
        bus = self._spawn(
            ["dbus-daemon", "--session", "--nofork", address, "--print-address=1"], stdout=subprocess.PIPE
        )
        assert bus.stdout is not None
        self.env["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().decode().strip()
        if not self.env["DBUS_SESSION_BUS_ADDRESS"]:
            raise RuntimeError("dbus-daemon did not print its address")
        os.environ.update(self.env)
        self._spawn([args.atspi_launcher, "--launch-immediately"])
        from Xlib import X, display  # noqa: PLC0415 - python3-xlib is only needed in the guest

        self.X = X
        self.xdisplay = display.Display(self.display)
        self.root = self.xdisplay.screen().root
        self._start_window_manager()
        self.reader = A11yReader(self.env["DBUS_SESSION_BUS_ADDRESS"], args.app_timeout)

    def _start_window_manager(self) -> None:
        """openbox, given a second start if it has not taken the screen within a few seconds (seen
        once in many starts on a heavily loaded host, with nothing in its log)."""
        tries = 2
        for attempt in range(1, tries + 1):
            wm = self._spawn(["openbox", "--sm-disable"])
            try:
                self._wait(self._wm_running, self.args.app_timeout / tries, "openbox did not start")
                return
            except ActionError:
                code = wm.poll()
                _kill_process(wm)
                if attempt == tries:
                    state = "still running" if code is None else f"exited with status {code}"
                    raise ActionError(f"openbox did not take the screen ({state})") from None

    def _start_xvfb(self) -> str:
        """Start the X server; with xauth, behind a fresh cookie, so that other users of a shared
        host cannot open the display (Xvfb takes every cookie in its -auth file, whatever display
        the entry names, so the entry for the display it picks is added once it has picked)."""
        cookie, auth = os.urandom(16).hex(), []
        self.xauthority = os.path.join(self.runtime, "Xauthority")
        if shutil.which("xauth"):
            self._xauth(":0", cookie)
            auth = ["-auth", self.xauthority]
        read, write = os.pipe()
        screen = f"{self.args.width}x{self.args.height}x24"
        argv = [
            "Xvfb",
            "-displayfd",
            str(write),
            "-nolisten",
            "tcp",
            *auth,
            "-screen",
            "0",
            screen,
            "-nocursor",
        ]
        self._spawn(argv, pass_fds=(write,))
        os.close(write)
        number = b""
        while not number.endswith(b"\n"):  # the host's start timeout bounds this wait
            chunk = os.read(read, 16)
            if not chunk:
                break
            number += chunk
        os.close(read)
        if not number.strip():
            raise RuntimeError("Xvfb did not start (see session.log in the workdir)")
        display = ":" + number.decode().strip()
        if auth:
            self._xauth(display, cookie)
        return display

    def _xauth(self, display: str, cookie: str) -> None:
        argv = ["xauth", "-q", "-f", self.xauthority, "add", display, "MIT-MAGIC-COOKIE-1", cookie]
        subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, check=True, timeout=30
        )

    def _spawn(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        kw.setdefault("stdout", subprocess.DEVNULL)
        env = {**os.environ, **getattr(self, "env", {})}
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=self.log, env=env, **kw)

    @staticmethod
    def _wait(ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise ActionError(what)
            time.sleep(0.05)

    def _wm_running(self) -> bool:
        atom = self.xdisplay.intern_atom("_NET_SUPPORTING_WM_CHECK")
        return self.root.get_full_property(atom, self.X.AnyPropertyType) is not None

    # -- applications ---------------------------------------------------------------------------

    def reset(self, apps: list[Any], files: dict[str, str]) -> str:
        self.stop_apps()
        for entry in os.listdir(self.home):
            path = os.path.join(self.home, entry)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        for rel, text in files.items():
            if not isinstance(text, str):
                raise ActionError(f"file {rel!r}: its content must be text")
            path = os.path.normpath(os.path.join(self.home, rel))
            if not path.startswith(self.home + os.sep):
                raise ActionError(f"file {rel!r} is outside the home directory")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        self.reported.clear()
        subprocess.run(
            ["xdotool", "mousemove", str(self.args.width - 1), str(self.args.height - 1)], check=False
        )
        for entry in apps:  # one at a time, so the window manager places them the same way each time
            name, extra = (entry, []) if isinstance(entry, str) else (None, None)
            if isinstance(entry, dict):
                name, extra = entry.get("name"), entry.get("args", [])
            if name not in APPS:
                raise ActionError(f"unknown application {entry!r}; available: {', '.join(APPS)}")
            if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
                raise ActionError(f"application {name}: args must be a list of strings")
            if name in self.apps:
                raise ActionError(f"application {name} is listed twice; each runs once")
            self.apps[name] = proc = self._spawn([*APPS[name], *extra], cwd=self.home, start_new_session=True)
            self._wait(
                lambda p=proc: p.poll() is not None or self._has_window(p.pid),
                self.args.app_timeout,
                f"application {name} showed no window within {self.args.app_timeout:g}s",
            )
        return ""

    def _has_window(self, pid: int) -> bool:
        if any(w["pid"] == pid for w in self.x_windows()):
            return pid == self._pid_of("terminal") or any(
                a.pid == pid and self.reader.frames(a) for a in self.reader.applications()
            )
        return False

    def _pid_of(self, name: str) -> int:
        proc = self.apps.get(name)
        return proc.pid if proc else -1

    def stop_apps(self) -> None:
        for proc in self.apps.values():
            _kill_group(proc)
        self.apps.clear()

    def app_errors(self) -> list[str]:
        found = []
        for name, proc in self.apps.items():
            code = proc.poll()
            if code is not None and name not in self.reported:
                self.reported.add(name)
                how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
                found.append(f"application {name} ({APPS[name][0]}) {how}; its windows are gone")
        return found

    # -- X windows ------------------------------------------------------------------------------

    def x_windows(self) -> list[dict[str, Any]]:
        """Managed top-level windows: pid, title and the client area in root coordinates."""
        d, X = self.xdisplay, self.X
        clients = self.root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        found = []
        for wid in clients.value if clients else []:
            try:
                win = d.create_resource_object("window", wid)
                pid = win.get_full_property(d.intern_atom("_NET_WM_PID"), X.AnyPropertyType)
                name = win.get_full_property(d.intern_atom("_NET_WM_NAME"), 0)
                title = name.value.decode("utf-8", "replace") if name else (win.get_wm_name() or "")
                geo = win.get_geometry()
                pos = win.translate_coords(self.root, 0, 0)
                if win.get_attributes().map_state != X.IsViewable:
                    continue
            except Exception:  # noqa: BLE001 - a window may vanish between the list and the query
                continue
            found.append(
                {
                    "id": wid,
                    "pid": pid.value[0] if pid else -1,
                    "title": str(title),
                    "x": -pos.x,
                    "y": -pos.y,
                    "w": geo.width,
                    "h": geo.height,
                }
            )
        return found

    def window_at(self, x: int, y: int) -> bool:
        """Whether a viewable window (not the root) covers the point."""
        for child in self.root.query_tree().children:
            try:
                geo, attrs = child.get_geometry(), child.get_attributes()
            except Exception:  # noqa: BLE001
                continue
            if attrs.map_state == self.X.IsViewable and geo.width > 1 and geo.height > 1:
                if geo.x <= x < geo.x + geo.width and geo.y <= y < geo.y + geo.height:
                    return True
        return False

    # -- accessibility tree ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The tree as text lines (all shown nodes, up to WALK_LIMIT) and the focused window."""
        lines: list[str] = []
        focused = "none"
        xwins = self.x_windows()
        matched: set[int] = set()
        for app in self.reader.applications():
            if not _pid_alive(app.pid):
                continue  # a dead application's name lingers on the bus for a moment
            for frame in self.reader.frames(app):
                if "active" in frame.states and focused == "none":
                    focused = f"{app.name} — {frame.name}"
                offset = self._offset(app, frame, xwins, matched)
                _emit(frame, 0, offset, lines)
        for win in xwins:  # windows of programs without accessibility support (xterm)
            if win["id"] not in matched and len(lines) < WALK_LIMIT:
                note = "no accessibility tree: this program shows only its window"
                lines.append(
                    _node(0, "frame", win["title"], note, [], (win["x"], win["y"], win["w"], win["h"]))
                )
        if focused == "none":
            focused = self._x_focused(xwins)
        return {"lines": lines, "focused": focused}

    def _x_focused(self, xwins: list[dict[str, Any]]) -> str:
        """The window manager's active window, for programs without accessibility (xterm)."""
        atom = self.xdisplay.intern_atom("_NET_ACTIVE_WINDOW")
        active = self.root.get_full_property(atom, self.X.AnyPropertyType)
        win = next((w for w in xwins if active and active.value and w["id"] == active.value[0]), None)
        if win is None:
            return "none"
        # The task's name for it ("terminal"): AT-SPI, which names the others, does not know it.
        owner = next((name for name, proc in self.apps.items() if proc.pid == win["pid"]), "unknown")
        return f"{owner} — {win['title']}"

    def _offset(self, app: App, frame: Node, xwins: list, matched: set) -> tuple[int, int]:
        """Shift from the toolkit's coordinates to the screen's. GTK 4 on X11 reports coordinates
        relative to its window (which includes its client-side shadow); GTK 3 reports screen ones."""
        mine = [w for w in xwins if w["pid"] == app.pid and w["id"] not in matched]
        win = next((w for w in mine if w["title"] == frame.name), mine[0] if mine else None)
        if win is None:
            return (0, 0)
        matched.add(win["id"])
        if not app.toolkit_version.startswith("4."):
            return (0, 0)
        x, y, w, h = frame.box
        return (win["x"] + (win["w"] - w) // 2 - x, win["y"] + (win["h"] - h) // 2 - y)

    def observe(self, max_nodes: int, screenshot: bool, error: str, settle: bool = True) -> dict[str, Any]:
        errors = [e for e in [error, *self.app_errors()] if e]
        snap = self.settle() if settle else self.snapshot()
        lines = snap["lines"]
        shown = lines[:max_nodes]
        numbered = [
            f"{line[: len(line) - len(line.lstrip())]}[{i}] {line.lstrip()}" for i, line in enumerate(shown)
        ]
        if len(lines) > max_nodes:
            numbered.append(f"[... {len(lines) - max_nodes} more nodes not shown]")
        head = ([f"Error: {'; '.join(errors)}"] if errors else []) + [f"Focused: {snap['focused']}"]
        return {
            "ok": True,
            "tree": "\n".join(head + numbered),
            "nodes": len(lines),
            "truncated": len(lines) > max_nodes,
            "focused": snap["focused"],
            "screenshot_png_b64": self.screenshot() if screenshot else None,
            "error": "; ".join(errors),
        }

    def settle(self) -> dict[str, Any]:
        """Snapshots until two in a row agree, for at most `settle_timeout` seconds."""
        deadline = time.monotonic() + self.args.settle_timeout
        time.sleep(self.args.settle_interval)
        previous = self.snapshot()
        while time.monotonic() < deadline:
            time.sleep(self.args.settle_interval)
            current = self.snapshot()
            if current == previous:
                return current
            previous = current
        return previous

    def screenshot(self) -> str | None:
        try:
            from PIL import ImageGrab  # noqa: PLC0415 - optional: scrot is the fallback

            buffer = io.BytesIO()
            ImageGrab.grab(xdisplay=self.display).save(buffer, "PNG")
            return base64.b64encode(buffer.getvalue()).decode()
        except Exception:  # noqa: BLE001 - PIL missing or built without X support: try scrot
            path = os.path.join(self.workdir, "screenshot.png")
            if (
                shutil.which("scrot")
                and subprocess.run(["scrot", "-o", path], env=os.environ).returncode == 0
            ):
                with open(path, "rb") as f:
                    return base64.b64encode(f.read()).decode()
            return None

    def close(self) -> None:
        self.stop_apps()
        _kill_descendants()


def _node(depth: int, role: str, name: str, value: str, states: list[str], box: tuple) -> str:
    line = f'{"  " * depth}{role} "{_quote(name)}"'
    if value:
        line += f' value="{_quote(value)}"'
    if states:
        line += f" states={','.join(states)}"
    return line + f" @({box[0]},{box[1]} {box[2]}x{box[3]})"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def _emit(node: Node, depth: int, offset: tuple[int, int], lines: list[str]) -> None:
    """Depth-first lines of the listed nodes; unnamed layout nodes give their depth to their children."""
    if len(lines) >= WALK_LIMIT:
        return
    states = [st for st in STATES if st in node.states]
    if node.listed and not (node.role in LAYOUT_ROLES and not node.name and not node.value and not states):
        x, y, w, h = node.box
        lines.append(
            _node(depth, node.role, node.name, node.value, states, (x + offset[0], y + offset[1], w, h))
        )
        depth += 1
    for child in node.children:
        _emit(child, depth, offset, lines)


def _shown(states: frozenset[str], box: tuple) -> tuple[bool, bool]:
    """(listed, descended into) for a node. GTK 4 sets only VISIBLE below the window, so a visible
    node with a real, non-empty box is listed too; a SHOWING node without a box (a GTK 3 notebook
    page) is not listed but its children are."""
    showing = "showing" in states
    if not (showing or "visible" in states):
        return False, False
    x, y, w, h = box
    real = w > 0 and h > 0 and x > INVALID_COORD and y > INVALID_COORD
    return real, real or showing


def _clean_value(value: Any, name: str) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    text = text.replace("\ufffc", "")  # object replacement characters of embedded children
    if len(text) > VALUE_CHARS:
        text = text[:VALUE_CHARS] + "…"
    return "" if text == name else text


def _atspi_names() -> tuple[dict[int, str], list[str]]:
    """Role and state names as libatspi spells them ("push button", "focused")."""
    import gi  # noqa: PLC0415

    gi.require_version("Atspi", "2.0")
    from gi.repository import Atspi  # noqa: PLC0415

    roles = {int(r): Atspi.role_get_name(r) for r in Atspi.Role.__enum_values__.values()}
    states = [
        Atspi.StateType(i).value_nick.replace("-", "_") for i in range(int(Atspi.StateType.LAST_DEFINED))
    ]
    return roles, states


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_process(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _kill_descendants() -> None:
    """TERM (Xvfb removes its socket and lock file), then KILL, everything below this process."""
    me = os.getpid()
    for sig, pause in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0.0)):
        todo, seen = [me], []
        while todo:
            for child in _children(todo.pop()):
                seen.append(child)
                todo.append(child)
        for pid in seen:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + pause
        while any(_pid_alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in seen:  # reap: they are our children or, as subreaper, re-parented to us
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


class PyAutoGui:
    """The pyautogui subset AgentWorldBench's OS actions use, on the session's display via xdotool.
    Points must lie on a window: a click on the empty desktop is reported, not silently lost."""

    FAILSAFE = False
    PAUSE = 0.0
    MAX_SLEEP = 30.0

    def __init__(self, session: Session) -> None:
        self._session = session

    def _xdo(self, *args: str) -> None:
        done = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ActionError(f"xdotool {args[0]} failed: {done.stderr.strip()}")

    def _point(self, x: Any, y: Any, must_hit: bool = True) -> tuple[int, int]:
        if isinstance(x, tuple | list) and y is None:
            x, y = x
        if x is None or y is None:
            return self.position()
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
            raise ActionError(f"coordinates must be numbers, got x={x!r}, y={y!r}")
        px, py = int(x), int(y)
        width, height = self.size()
        if not (0 <= px < width and 0 <= py < height):
            raise ActionError(f"point ({px}, {py}) is outside the {width}x{height} screen")
        if must_hit and not self._session.window_at(px, py):
            raise ActionError(f"nothing at ({px}, {py}): no window there, only the empty desktop")
        return px, py

    def _button(self, button: str) -> str:
        if button not in BUTTONS:
            raise ActionError(f"unknown mouse button {button!r}; use left, middle or right")
        return str(BUTTONS[button])

    def size(self) -> tuple[int, int]:
        return self._session.args.width, self._session.args.height

    def position(self) -> tuple[int, int]:
        where = self._session.root.query_pointer()
        return where.root_x, where.root_y

    def moveTo(self, x: Any = None, y: Any = None, duration: float = 0.0, **_: Any) -> None:  # noqa: N802
        px, py = self._point(x, y, must_hit=False)
        self._xdo("mousemove", str(px), str(py))

    def moveRel(self, xOffset: int = 0, yOffset: int = 0, duration: float = 0.0, **_: Any) -> None:  # noqa: N802, N803
        cx, cy = self.position()
        self.moveTo(cx + xOffset, cy + yOffset)

    move = moveRel

    def click(
        self,
        x: Any = None,
        y: Any = None,
        clicks: int = 1,
        interval: float = 0.0,
        button: str = "left",
        duration: float = 0.0,
        **_: Any,
    ) -> None:
        px, py = self._point(x, y)
        count = max(1, int(clicks))
        self._xdo(
            "mousemove",
            str(px),
            str(py),
            "click",
            "--repeat",
            str(count),
            "--delay",
            str(int(max(interval, 0.05) * 1000)),
            self._button(button),
        )

    def doubleClick(
        self, x: Any = None, y: Any = None, interval: float = 0.0, button: str = "left", **_: Any
    ) -> None:  # noqa: N802
        self.click(x, y, clicks=2, interval=interval, button=button)

    def tripleClick(
        self, x: Any = None, y: Any = None, interval: float = 0.0, button: str = "left", **_: Any
    ) -> None:  # noqa: N802
        self.click(x, y, clicks=3, interval=interval, button=button)

    def rightClick(self, x: Any = None, y: Any = None, **_: Any) -> None:  # noqa: N802
        self.click(x, y, button="right")

    def middleClick(self, x: Any = None, y: Any = None, **_: Any) -> None:  # noqa: N802
        self.click(x, y, button="middle")

    def mouseDown(self, x: Any = None, y: Any = None, button: str = "left", **_: Any) -> None:  # noqa: N802
        px, py = self._point(x, y)
        self._xdo("mousemove", str(px), str(py), "mousedown", self._button(button))

    def mouseUp(self, x: Any = None, y: Any = None, button: str = "left", **_: Any) -> None:  # noqa: N802
        px, py = self._point(x, y, must_hit=False)
        self._xdo("mousemove", str(px), str(py), "mouseup", self._button(button))

    def dragTo(
        self, x: Any = None, y: Any = None, duration: float = 0.0, button: str = "left", **_: Any
    ) -> None:  # noqa: N802
        sx, sy = self.position()
        if not self._session.window_at(sx, sy):
            raise ActionError(f"nothing at ({sx}, {sy}) to drag: no window there, only the empty desktop")
        tx, ty = self._point(x, y, must_hit=False)
        steps = ["mousedown", self._button(button), "sleep", "0.1"]
        for i in range(1, 6):  # intermediate motion: toolkits start a drag only after the pointer moves
            steps += [
                "mousemove",
                str(sx + (tx - sx) * i // 5),
                str(sy + (ty - sy) * i // 5),
                "sleep",
                "0.03",
            ]
        self._xdo(*steps, "mouseup", self._button(button))

    def dragRel(
        self, xOffset: int = 0, yOffset: int = 0, duration: float = 0.0, button: str = "left", **_: Any
    ) -> None:  # noqa: N802, N803
        cx, cy = self.position()
        self.dragTo(cx + xOffset, cy + yOffset, button=button)

    drag = dragRel

    def scroll(self, clicks: int, x: Any = None, y: Any = None, **_: Any) -> None:
        """Positive `clicks` scroll up, as in pyautogui."""
        px, py = self._point(x, y)
        if int(clicks):
            self._xdo(
                "mousemove",
                str(px),
                str(py),
                "click",
                "--repeat",
                str(abs(int(clicks))),
                "--delay",
                "30",
                "4" if clicks > 0 else "5",
            )

    def write(self, message: Any, interval: float = 0.0, **_: Any) -> None:
        if isinstance(message, list):
            for key in message:
                self.press(key)
            return
        if not isinstance(message, str):
            raise ActionError(f"write() needs a string, got {type(message).__name__}")
        delay = str(int(max(interval, 0.012) * 1000))
        for i, part in enumerate(message.split("\n")):
            if i:  # xdotool types a newline as a character that editors drop: press Return
                self._xdo("key", "Return")
            if part:
                self._xdo("type", "--delay", delay, "--", part)

    typewrite = write

    def press(self, keys: Any, presses: int = 1, interval: float = 0.0, **_: Any) -> None:
        names = [keysym(k) for k in ([keys] if isinstance(keys, str) else list(keys))]
        for _ in range(max(1, int(presses))):
            self._xdo("key", "--delay", str(int(max(interval, 0.012) * 1000)), *names)

    def hotkey(self, *keys: str, **_: Any) -> None:
        if not keys:
            raise ActionError("hotkey() needs at least one key")
        self._xdo("key", "+".join(keysym(k) for k in keys))

    def keyDown(self, key: str, **_: Any) -> None:  # noqa: N802
        self._xdo("keydown", keysym(key))

    def keyUp(self, key: str, **_: Any) -> None:  # noqa: N802
        self._xdo("keyup", keysym(key))

    def sleep(self, seconds: float) -> None:
        time.sleep(min(max(float(seconds), 0.0), self.MAX_SLEEP))

    def module(self) -> types.ModuleType:
        """A `pyautogui` module object for exec'd code; unsupported names fail with the list."""
        mod = types.ModuleType("pyautogui")
        public = [n for n in dir(self) if not n.startswith("_") and n != "module"]
        for name in public:
            setattr(mod, name, getattr(self, name))

        def missing(name: str) -> Any:
            raise AttributeError(f"pyautogui.{name} is not available here; available: {', '.join(public)}")

        mod.__getattr__ = missing  # type: ignore[method-assign]
        return mod


def run_action(gui: PyAutoGui, action: dict[str, Any], timeout: float) -> str:
    """Do one action; the error text the agent should see, or ''."""

    def expired(*_: Any) -> None:
        raise TimeoutError(f"the action ran longer than {timeout:g}s and was stopped")

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        if action.get("kind") == "pyautogui":
            code = action.get("code")
            if not isinstance(code, str):
                return "pyautogui action needs a string 'code'"
            # `import pyautogui` in the code, as AgentWorldBench writes it, gets this module too.
            sys.modules["pyautogui"] = gui.module()
            namespace = {
                "pyautogui": sys.modules["pyautogui"],
                "time": types.SimpleNamespace(sleep=gui.sleep),
            }
            exec(compile(code, "<action>", "exec"), namespace)  # noqa: S102 - the agent's own action, in its sandbox
        else:
            computer(gui, action)
        return ""
    except ActionError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - any error in the agent's code is its to see
        return f"{type(exc).__name__}: {exc}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def computer(gui: PyAutoGui, a: dict[str, Any]) -> None:
    """A structured computer action (already validated by the host) as pyautogui calls."""
    kind = a.get("action")
    point = (a.get("x"), a.get("y"))
    if kind == "move":
        gui.moveTo(*point)
    elif kind == "click":
        gui.click(*point, clicks=a.get("clicks", 1), button=a.get("button", "left"))
    elif kind == "double_click":
        gui.doubleClick(*point)
    elif kind == "right_click":
        gui.rightClick(*point)
    elif kind == "drag":
        gui.moveTo(*point)
        gui.dragTo(a.get("to_x"), a.get("to_y"), button=a.get("button", "left"))
    elif kind == "scroll":
        gui.scroll(a.get("clicks", -3), *point)
    elif kind == "type":
        gui.write(a.get("text", ""))
    elif kind == "press":
        gui.press(a.get("key", ""))
    elif kind == "hotkey":
        gui.hotkey(*a.get("keys", []))
    elif kind == "wait":
        gui.sleep(a.get("seconds", 1.0))
    else:
        raise ActionError(f"unknown computer action {kind!r}")


def _handle(session: Session, gui: PyAutoGui, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
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
    return {"ok": False, "error": f"unknown op {op!r}; expected reset, act, observe or shutdown"}


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


def _set_subreaper() -> None:
    pr_set_child_subreaper = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: children started in their own sessions are still killed by group


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
    _set_subreaper()
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
            _kill_descendants()
    return 0


if __name__ == "__main__":
    sys.exit(main())
