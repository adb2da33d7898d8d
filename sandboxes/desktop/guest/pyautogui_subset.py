"""The pyautogui subset AgentWorldBench's OS actions use, with pyautogui's names and argument order,
driving the session's display with xdotool. pyautogui is not a Debian package, so the agent runs
the action's code against this instead: `import pyautogui` in that code gets `PyAutoGui.module()`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import types
from typing import Any

from key_names import BUTTONS, KEYSYMS
from session import ActionError, Session


def keysym(key: str) -> str:
    name = KEYSYMS.get(key.lower() if len(key) > 1 else key)
    if name is None and len(key) == 1 and key.isprintable():
        name = key
    if name is None:
        raise ActionError(f"unknown key {key!r}; use pyautogui key names such as enter, ctrl, f5, a")
    return name


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
