"""One observation of an Appium session: the page source compacted to the `android_ui_tree` text,
the current package and activity, and a PNG screenshot.

UiAutomator2 reports the package and activity (`mobile: getCurrentPackage` / `getCurrentActivity`).
The fake driver reports neither: the package is the tree's own `package` attribute if the app XML
has one, else `unknown`. The fake driver's page source is the app XML as loaded and never changes;
what it does keep is each text field's value (setValue), so with the fake driver the editable
nodes show the value the driver reports for them, once the session has typed.
"""

from __future__ import annotations

import dataclasses

from appium.webdriver.common.appiumby import AppiumBy
from appium.webdriver.webdriver import WebDriver
from selenium.common.exceptions import WebDriverException

from sandboxes.android.config import AndroidConfig
from sandboxes.android.tree import PageSourceError, Screen, parse_screen, render
from schemas.records import Attachment, Observation

FORMAT = "android_ui_tree"


def observe(
    driver: WebDriver, config: AndroidConfig, error: str, typed: bool = True
) -> tuple[Observation, Screen]:
    """The observation after an action (`error` is the action's failure, "" when it ran).

    `typed`: whether the session has typed since it started; the fake driver's field values change
    only by typing, so before that they are the app XML's and need no asking."""
    try:
        screen = parse_screen(driver.page_source, config.max_nodes)
    except PageSourceError as exc:
        raise WebDriverException(f"the driver's page source is unreadable: {exc}") from exc
    if config.fake:
        screen = _with_field_values(driver, screen) if typed else screen
        package, activity = screen.package, ""
    else:
        package = _mobile(driver, "mobile: getCurrentPackage") or screen.package
        activity = _mobile(driver, "mobile: getCurrentActivity")
    package, activity = package or "unknown", activity or "unknown"
    attachments = []
    if config.screenshots:
        attachments.append(
            Attachment(name="screenshot.png", media_type="image/png", content=driver.get_screenshot_as_png())
        )
    data = {
        "package": package,
        "activity": activity,
        "nodes": len(screen.nodes),
        "truncated": screen.truncated,
        "error": error,
    }
    text = render(screen, package, activity, error)
    return Observation(format=FORMAT, text=text, data=data, attachments=attachments), screen


def _mobile(driver: WebDriver, command: str) -> str:
    try:
        value = driver.execute_script(command)
    except WebDriverException:
        return ""
    return value if isinstance(value, str) else ""


def _with_field_values(driver: WebDriver, screen: Screen) -> Screen:
    nodes = []
    for node in screen.nodes:
        if "editable" in node.flags:
            try:
                value = driver.find_element(AppiumBy.XPATH, node.xpath).text
            except WebDriverException:
                value = ""
            if value:
                node = dataclasses.replace(node, text=value)
        nodes.append(node)
    return dataclasses.replace(screen, nodes=nodes)
