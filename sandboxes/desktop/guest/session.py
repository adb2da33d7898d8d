"""The X session the agent owns: Xvfb (display number chosen by the server with -displayfd, no TCP,
an xauth cookie when xauth is installed), a private session D-Bus, the AT-SPI bus, openbox, then the
task's applications, all with a private HOME under the workdir; and its observation (the tree text,
the focused window, a screenshot)."""

from __future__ import annotations

import argparse
import base64
import io
import os
import shutil
import subprocess
import time
from typing import Any

from a11y import WALK_LIMIT, A11yReader, App, Node
from process_tree import kill_descendants, kill_group, kill_process, pid_alive
from tree_format import emit_lines, node_line, tree_text

APPS = {
    "calculator": ["gnome-calculator"],
    "editor": ["mousepad", "--disable-server"],
    # xterm is an Xt program without AT-SPI support: the tree shows its window only.
    "terminal": ["xterm", "-fa", "Monospace", "-fs", "11"],
}
# The client size (shadow included) an app's window takes on a quiet host, restored once it settles:
# under load gnome-calculator 43 sometimes maps 12 px taller and keeps that size, which moves every
# node below its history view (seen in 1 of 6 starts with 6 busy loops on 2 cores).
WINDOW_SIZE = {"calculator": (365, 496)}
SETTLE_S = 0.3  # how long an app's windows must keep their geometry before its tree is read


class ActionError(Exception):
    """What the agent sees when its action cannot be done (shown as `Error: ...`)."""


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
            # Caches (fontconfig's, with its lock files) outside the home that each reset empties:
            # they survive resets, and nothing writes into the home while it is being cleared.
            "XDG_CACHE_HOME": os.path.join(self.workdir, "cache"),
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
                kill_process(wm)
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
            # Without it the server resets whenever its last client disconnects: a short-lived client
            # at start-up (xdotool, a probe) then breaks the connections being opened ("Broken pipe").
            "-noreset",
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
            _remove(os.path.join(self.home, entry))
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
            self._wait_until_placed(proc.pid)
            if name in WINDOW_SIZE:
                self._resize(proc.pid, *WINDOW_SIZE[name])
        if apps:
            self._wait_for_focus(proc.pid)
        return ""

    def _wait_for_focus(self, pid: int) -> None:
        """Until the window manager has given the last app's window the keyboard. On a loaded host
        openbox focuses a new window a moment after it is placed, and keys typed in between are lost
        (a test typed "bounded" and read "ounded"). Bounded by the app timeout; an app that never
        gets the focus is reported by the observation's `Focused:` line, not here."""
        atom = self.xdisplay.intern_atom("_NET_ACTIVE_WINDOW")

        def focused() -> bool:
            active = self.root.get_full_property(atom, self.X.AnyPropertyType)
            wid = active.value[0] if active and active.value else 0
            nowhere = (self.X.NONE, self.X.PointerRoot, self.root)
            has_input = self.xdisplay.get_input_focus().focus not in nowhere
            return has_input and any(w["id"] == wid and w["pid"] == pid for w in self.x_windows())

        deadline = time.monotonic() + self.args.app_timeout
        while not focused() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _resize(self, pid: int, width: int, height: int) -> None:
        wrong = [w for w in self.x_windows() if w["pid"] == pid and (w["w"], w["h"]) != (width, height)]
        for win in wrong:
            argv = ["xdotool", "windowsize", "--sync", str(win["id"]), str(width), str(height)]
            subprocess.run(argv, stdout=self.log, stderr=self.log, check=False, timeout=30)
        if wrong:
            self._wait_until_placed(pid)

    def _wait_until_placed(self, pid: int) -> None:
        """Until the app's windows keep their place and size for SETTLE_S. On a loaded host an app
        (gnome-calculator) can show its first frame and then resize it, and a tree read in between
        puts every node elsewhere than a fresh desktop does. Bounded by the app timeout."""

        def placed() -> list[tuple[int, int, int, int]]:
            return sorted((w["x"], w["y"], w["w"], w["h"]) for w in self.x_windows() if w["pid"] == pid)

        deadline = time.monotonic() + self.args.app_timeout
        before = placed()
        while time.monotonic() < deadline:
            time.sleep(SETTLE_S)
            now = placed()
            if now == before:
                return
            before = now

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
            kill_group(proc)
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
            if not pid_alive(app.pid):
                continue  # a dead application's name lingers on the bus for a moment
            for frame in self.reader.frames(app):
                if "active" in frame.states and focused == "none":
                    focused = f"{app.name} — {frame.name}"
                offset = self._offset(app, frame, xwins, matched)
                emit_lines(frame, 0, offset, lines)
        for win in xwins:  # windows of programs without accessibility support (xterm)
            if win["id"] not in matched and len(lines) < WALK_LIMIT:
                note = "no accessibility tree: this program shows only its window"
                lines.append(
                    node_line(0, "frame", win["title"], note, [], (win["x"], win["y"], win["w"], win["h"]))
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
        return {
            "ok": True,
            "tree": tree_text(lines, snap["focused"], errors, max_nodes),
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
        kill_descendants()


def _remove(path: str) -> None:
    """Remove a file or tree that a process just stopped may still be touching: what is already
    gone is not an error."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=_ignore_missing)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _ignore_missing(function: Any, path: str, exc_info: Any) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]
