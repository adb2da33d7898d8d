"""Android actions as Appium calls, the same for every driver:

- a node `index` -> the node's XPath from the last observation (`find_element`), then the element's
  click / send_keys (setValue);
- a point, a long press, a swipe or a scroll -> W3C pointer actions with a touch pointer;
- text without a node, and Enter -> W3C key actions into the focused field;
- back -> the W3C `back` command; home -> `mobile: pressKey` (KEYCODE_HOME); open_app ->
  `mobile: activateApp`; wait -> a bounded sleep.

What a driver does not implement (the fake driver has no back, pressKey or activateApp) comes back
from the server as an error, which `ActionFailed` carries into the observation the agent sees.
"""

from __future__ import annotations

import time
from typing import Any

from appium.webdriver.common.appiumby import AppiumBy
from appium.webdriver.webdriver import WebDriver
from selenium.common.exceptions import (
    InvalidElementStateException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from sandboxes.android.config import AndroidConfig
from sandboxes.android.tree import Node, Screen
from schemas.records import Action

KEYCODE_HOME = 3
# Where a scroll's finger starts and ends, as fractions of the scrolled region along its axis.
SCROLL_FROM, SCROLL_TO = 0.75, 0.25


class ActionFailed(Exception):
    """The action was well formed but did not run; the message is what the agent is shown."""


def server_message(exc: WebDriverException) -> str:
    return (exc.msg or type(exc).__name__).strip().splitlines()[0]


class ActionRunner:
    def __init__(self, driver: WebDriver, screen: Screen, config: AndroidConfig) -> None:
        self.driver = driver
        self.screen = screen
        self.config = config

    def run(self, action: Action) -> None:
        """Perform one parsed action; ActionFailed with what the agent should read when it cannot."""
        kind, a = action.kind, action.arguments
        try:
            getattr(self, f"_{kind}")(a)
        except (NoSuchElementException, StaleElementReferenceException):
            raise ActionFailed(f"node [{a.get('index')}] is no longer on the screen") from None
        except InvalidElementStateException as exc:
            raise ActionFailed(f"{kind} on node [{a.get('index')}] refused: {server_message(exc)}") from None

    # -- the action kinds -------------------------------------------------------------------------

    def _click(self, a: dict[str, Any]) -> None:
        if "index" in a:
            self._element(a["index"]).click()
        else:
            self._tap(a["x"], a["y"], duration_ms=0)

    def _long_press(self, a: dict[str, Any]) -> None:
        x, y = self._node(a["index"]).center if "index" in a else (a["x"], a["y"])
        self._tap(x, y, duration_ms=self.config.long_press_ms)

    def _input_text(self, a: dict[str, Any]) -> None:
        if "index" in a:
            self._element(a["index"]).send_keys(a["text"])
        else:
            ActionChains(self.driver).send_keys(a["text"]).perform()

    def _keyboard_enter(self, a: dict[str, Any]) -> None:
        ActionChains(self.driver).send_keys(Keys.ENTER).perform()

    def _scroll(self, a: dict[str, Any]) -> None:
        x1, y1, x2, y2 = self._node(a["index"]).bounds if "index" in a else self._screen_bounds()
        cx, cy = (x1 + x2) // 2, (y1 + y2) // 2
        along_y = (y1 + int((y2 - y1) * SCROLL_FROM), y1 + int((y2 - y1) * SCROLL_TO))
        along_x = (x1 + int((x2 - x1) * SCROLL_FROM), x1 + int((x2 - x1) * SCROLL_TO))
        # "down" shows what is below: the finger moves up the screen, and so on.
        start, end = {
            "down": ((cx, along_y[0]), (cx, along_y[1])),
            "up": ((cx, along_y[1]), (cx, along_y[0])),
            "right": ((along_x[0], cy), (along_x[1], cy)),
            "left": ((along_x[1], cy), (along_x[0], cy)),
        }[a["direction"]]
        self.driver.swipe(*start, *end, duration=self.config.swipe_ms)

    def _swipe(self, a: dict[str, Any]) -> None:
        self.driver.swipe(a["x"], a["y"], a["to_x"], a["to_y"], duration=self.config.swipe_ms)

    def _navigate_back(self, a: dict[str, Any]) -> None:
        self._driver_command("navigate_back", self.driver.back)

    def _navigate_home(self, a: dict[str, Any]) -> None:
        self._driver_command("navigate_home", lambda: self.driver.press_keycode(KEYCODE_HOME))

    def _open_app(self, a: dict[str, Any]) -> None:
        name = a["app_name"]
        known = {label.lower(): package for label, package in self.config.apps.items()}
        package = known.get(name.lower()) or (name if "." in name and " " not in name else "")
        if not package:
            names = ", ".join(sorted(self.config.apps)) or "none configured; give a package name"
            raise ActionFailed(f"no app named {name!r}; known apps: {names}")
        self._driver_command("open_app", lambda: self.driver.activate_app(package))

    def _wait(self, a: dict[str, Any]) -> None:
        time.sleep(a["seconds"])

    # -- helpers ----------------------------------------------------------------------------------

    def _node(self, index: int) -> Node:
        nodes = self.screen.nodes
        if index >= len(nodes):
            shown = f"[0]..[{len(nodes) - 1}]" if nodes else "no nodes"
            raise ActionFailed(f"no node [{index}] on the screen; the last observation shows {shown}")
        return nodes[index]

    def _element(self, index: int) -> Any:
        return self.driver.find_element(AppiumBy.XPATH, self._node(index).xpath)

    def _tap(self, x: int, y: int, duration_ms: int) -> None:
        # Appium-Python-Client's tap: a W3C touch pointer down/pause/up at (x, y).
        self.driver.tap([(x, y)], duration_ms or None)

    def _screen_bounds(self) -> tuple[int, int, int, int]:
        try:
            size = self.driver.get_window_size()
            return 0, 0, int(size["width"]), int(size["height"])
        except WebDriverException:
            # A driver that cannot say (the fake driver on an app XML without a size): the extent of
            # the nodes on the screen.
            boxes = [node.bounds for node in self.screen.nodes] or [(0, 0, 0, 0)]
            return 0, 0, max(b[2] for b in boxes), max(b[3] for b in boxes)

    def _driver_command(self, kind: str, call: Any) -> None:
        try:
            call()
        except (NoSuchElementException, InvalidElementStateException):
            raise
        except WebDriverException as exc:
            if _unsupported(exc):
                raise ActionFailed(
                    f"{kind} is not supported by the {self.config.automation_name} driver: "
                    f"{server_message(exc)}"
                ) from None
            raise


def _unsupported(exc: WebDriverException) -> bool:
    message = (exc.msg or "").lower()
    return any(
        marker in message
        for marker in (
            "not yet been implemented",
            "not implemented",
            "unknown command",
            "unsupported",
            "not supported",
        )
    )
