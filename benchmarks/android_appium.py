"""Android step latency on a real Appium 3 server with the fake driver: `AndroidSandbox.step` against
the bare Appium-Python-Client calls that do the same work, in the same run, on the same server and
app XML, in alternating rounds (our 2-CPU machines are noisy).

- ours: `AndroidSandbox.step(click(index))`: the XPath find and click, the page source and its
  compaction to the android_ui_tree text, with and without the screenshot attachment (no typing in
  these steps, so the fake driver's field values are not asked for);
- bare: `find_element(XPATH, ...).click()` then `page_source` (then `get_screenshot_as_png()`);
- reset: ours (`reset`: a new session on the app XML and the first observation) against a bare
  `webdriver.Remote` session plus `page_source`, quitting the previous session in both.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from appium import webdriver
from appium.options.common.base import AppiumOptions
from appium.webdriver.common.appiumby import AppiumBy

from benchmarks.timing import latency_ms
from sandboxes.android import AndroidConfig, AndroidSandbox, AppiumServer, parse_action
from sandboxes.android import install as appium_install
from schemas.records import Task

# The fake-driver app of the tests: a notes screen with a header, a text field, buttons and a list.
APP_XML = """<app width="1080" height="1920">
  <android.widget.FrameLayout package="com.example.notes" class="android.widget.FrameLayout"
      bounds="[0,0][1080,1920]">
    <android.widget.TextView class="android.widget.TextView" text="Notes" bounds="[0,0][1080,160]"/>
    <MockInputField class="android.widget.EditText" resource-id="com.example.notes:id/title" text=""
        clickable="true" bounds="[40,200][1040,320]"/>
    <MockButton class="android.widget.Button" text="Save" resource-id="com.example.notes:id/save"
        clickable="true" bounds="[40,400][540,520]"/>
    <android.widget.ListView class="android.widget.ListView" scrollable="true" bounds="[0,560][1080,1920]">
{rows}
    </android.widget.ListView>
  </android.widget.FrameLayout>
</app>
"""
ROWS = 20
SAVE_INDEX = 2  # [2] android.widget.Button "Save"
SAVE_XPATH = "/*[1]/*[1]/*[1]/*[3]"  # the same node for the bare client (AppiumAUT/app/FrameLayout/Button)
ROUNDS = 8
STEPS_PER_ROUND = 10
RESETS_PER_ROUND = 3


def _app(directory: Path) -> str:
    rows = "\n".join(
        f'      <MockButton class="android.widget.TextView" text="Note {i}" clickable="true"'
        f' bounds="[0,{600 + i * 60}][1080,{660 + i * 60}]"/>'
        for i in range(ROWS)
    )
    path = directory / "notes.xml"
    path.write_text(APP_XML.format(rows=rows))
    return str(path)


def _bare_session(server: AppiumServer, app: str) -> webdriver.Remote:
    options = AppiumOptions().load_capabilities(
        {"platformName": "Fake", "appium:automationName": "Fake", "appium:app": app}
    )
    return webdriver.Remote(server.url, options=options)


def _ours_steps(sandbox: AndroidSandbox, n: int) -> list[float]:
    action = parse_action("click", {"index": SAVE_INDEX})
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        observation = sandbox.step(action).observation
        times.append(time.perf_counter() - t0)
        if observation.data["error"]:
            raise RuntimeError(f"our click failed: {observation.data['error']}")
    return times


def _bare_steps(driver: webdriver.Remote, n: int, screenshot: bool) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        driver.find_element(AppiumBy.XPATH, SAVE_XPATH).click()
        source = driver.page_source
        if screenshot:
            driver.get_screenshot_as_png()
        times.append(time.perf_counter() - t0)
        if "Save" not in source:
            raise RuntimeError("the bare page source lost the Save button")
    return times


def android_appium() -> dict:
    appium_install.install()
    with tempfile.TemporaryDirectory(prefix="android-bench-") as tmp:
        app = _app(Path(tmp))
        t0 = time.perf_counter()
        server = AppiumServer(log_path=Path(tmp) / "appium.log")
        server.start()
        server_start_s = time.perf_counter() - t0
        try:
            return _measure(server, app, server_start_s)
        finally:
            server.close()


def _measure(server: AppiumServer, app: str, server_start_s: float) -> dict:
    samples: dict[str, list[float]] = {k: [] for k in ("ours", "ours_shot", "bare", "bare_shot")}
    resets: dict[str, list[float]] = {"ours": [], "bare": []}
    plain = AndroidSandbox(AndroidConfig(automation_name="Fake", app=app, screenshots=False), server=server)
    shots = AndroidSandbox(AndroidConfig(automation_name="Fake", app=app, screenshots=True), server=server)
    plain.start()
    shots.start()
    task = Task(id="bench")
    observation = plain.reset(task)
    shots.reset(task)
    bare = _bare_session(server, app)
    try:
        _ours_steps(plain, 3)  # warm-up
        _bare_steps(bare, 3, screenshot=False)
        for _ in range(ROUNDS):
            samples["ours"] += _ours_steps(plain, STEPS_PER_ROUND)
            samples["bare"] += _bare_steps(bare, STEPS_PER_ROUND, screenshot=False)
            samples["ours_shot"] += _ours_steps(shots, STEPS_PER_ROUND)
            samples["bare_shot"] += _bare_steps(bare, STEPS_PER_ROUND, screenshot=True)
            for _ in range(RESETS_PER_ROUND):
                t0 = time.perf_counter()
                plain.reset(task)
                resets["ours"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                bare.quit()
                bare = _bare_session(server, app)
                _ = bare.page_source
                resets["bare"].append(time.perf_counter() - t0)
    finally:
        bare.quit()
        plain.close()
        shots.close()
    rows = {name: latency_ms(times) for name, times in samples.items()}
    reset_rows = {name: latency_ms(times) for name, times in resets.items()}
    return {
        "appium": appium_install.APPIUM_VERSION,
        "fake_driver": appium_install.FAKE_DRIVER,
        "tree_nodes": observation.data["nodes"],
        "server_start_s": round(server_start_s, 2),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "step": rows,
        "reset": reset_rows,
        "ratios": {
            "step_ours_over_bare": rows["ours"]["median_ms"] / rows["bare"]["median_ms"],
            "step_with_screenshot_ours_over_bare": rows["ours_shot"]["median_ms"]
            / rows["bare_shot"]["median_ms"],
            "reset_ours_over_bare": reset_rows["ours"]["median_ms"] / reset_rows["bare"]["median_ms"],
        },
    }


def markdown_lines(r: dict) -> list[str]:
    step, reset, ratios = r["step"], r["reset"], r["ratios"]

    def cell(row: dict) -> str:
        return f"{row['median_ms']:.1f} / {row['p95_ms']:.1f}"

    return [
        "| measurement | ours ms (median / p95) | bare client ms (median / p95) | ours/bare | n |",
        "|---|---|---|---|---|",
        f"| step: click by index + observation ({r['tree_nodes']} nodes) | {cell(step['ours'])} | "
        f"{cell(step['bare'])} | {ratios['step_ours_over_bare']:.2f}x | {step['ours']['n']} |",
        f"| step with screenshot | {cell(step['ours_shot'])} | {cell(step['bare_shot'])} | "
        f"{ratios['step_with_screenshot_ours_over_bare']:.2f}x | {step['ours_shot']['n']} |",
        f"| reset: new session on the app XML + first observation | {cell(reset['ours'])} | "
        f"{cell(reset['bare'])} | {ratios['reset_ours_over_bare']:.2f}x | {reset['ours']['n']} |",
        "",
        f"Appium {r['appium']} with {r['fake_driver']} on 127.0.0.1 (server start {r['server_start_s']} s, "
        f"once; load average after the run {r['load_average_after']}). Ours: `AndroidSandbox.step`, "
        "i.e. the XPath find and click and the page source compacted to the android_ui_tree text "
        "(no typing, so no field values asked for); bare: "
        "Appium-Python-Client `find_element(XPATH).click()` + `page_source` "
        "(+ `get_screenshot_as_png()`), the same session kind on the same server, in alternating rounds. "
        "The issue sets no target for this ratio.",
    ]
