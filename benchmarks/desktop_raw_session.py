"""Baseline for benchmarks/desktop_latency.py: a bare desktop session driven without our protocol.

Run with the system python (pyatspi is not on PyPI) inside the same kind of bubblewrap sandbox as a
desktop sandbox: it starts Xvfb, a session bus, the AT-SPI bus, openbox and one application, then
times `xdotool` actions each followed by one full pyatspi dump of the application's visible nodes
(role, name, states, extents, text), with no settle wait and no formatting. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

APPS = {
    "calculator": (["gnome-calculator"], "gnome-calculator"),
    "editor": (["mousepad", "--disable-server"], "mousepad"),
}


def start_session(workdir: str) -> None:
    for name in ("home", "run"):
        os.makedirs(os.path.join(workdir, name), mode=0o700, exist_ok=True)
    os.environ.update(
        {
            "HOME": f"{workdir}/home",
            "XDG_RUNTIME_DIR": f"{workdir}/run",
            "GSETTINGS_BACKEND": "memory",
            "GTK_MODULES": "gail:atk-bridge",
            "NO_AT_BRIDGE": "0",
            "XDG_SESSION_TYPE": "x11",
            "GSK_RENDERER": "cairo",  # as the desktop sandbox's guest runs GTK 4
        }
    )
    read, write = os.pipe()
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-nolisten", "tcp", "-screen", "0", "1280x800x24"],
        pass_fds=(write,),
        **quiet,
    )
    os.close(write)
    os.environ["DISPLAY"] = ":" + os.read(read, 16).decode().strip()
    address = f"--address=unix:path={workdir}/run/bus"
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", address, "--print-address=1"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().decode().strip()
    subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"], **quiet)
    subprocess.Popen(["openbox", "--sm-disable"], **quiet)


def dump_app(pyatspi, app, out: list) -> None:  # noqa: ANN001 - pyatspi objects
    for i in range(app.childCount):  # the application node itself is neither showing nor visible
        dump(pyatspi, app.getChildAtIndex(i), out)


def dump(pyatspi, acc, out: list) -> None:  # noqa: ANN001
    states = acc.getState()
    if not (states.contains(pyatspi.STATE_SHOWING) or states.contains(pyatspi.STATE_VISIBLE)):
        return
    ext = (
        acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        if "Component" in acc.get_interfaces()
        else None
    )
    text = ""
    if "Text" in acc.get_interfaces():
        text = acc.queryText().getText(0, 401)
    out.append(
        (acc.getRoleName(), acc.name, states.getStates(), ext and (ext.x, ext.y, ext.width, ext.height), text)
    )
    for i in range(acc.childCount):
        child = acc.getChildAtIndex(i)
        if child is not None:
            dump(pyatspi, child, out)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--app", choices=sorted(APPS), required=True)
    parser.add_argument("--n", type=int, default=10)
    args = parser.parse_args()
    start_session(args.workdir)
    argv, bus_name = APPS[args.app]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import pyatspi  # noqa: PLC0415 - after the session's bus address is set

    deadline = time.monotonic() + 60
    app = None
    while app is None and time.monotonic() < deadline:
        app = next((a for a in pyatspi.Registry.getDesktop(0) if a is not None and a.name == bus_name), None)
        if app is None or not app.childCount:
            app = None
            time.sleep(0.2)
    if app is None:
        raise SystemExit(f"{bus_name} did not appear on the accessibility bus within 60 s")
    time.sleep(2)  # let the first window finish drawing, as our reset's settle wait does
    action = ["xdotool", "type", "a"]
    if args.app == "calculator":
        nodes: list = []
        dump_app(pyatspi, app, nodes)
        one = next(n for n in nodes if n[0] == "push button" and n[1].startswith("1 "))
        frame = next(n for n in nodes if n[0] == "frame")
        wid = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", "^Calculator$"], capture_output=True, text=True
        ).stdout.split()[-1]
        geo = subprocess.run(["xdotool", "getwindowgeometry", "--shell", wid], capture_output=True, text=True)
        size = dict(line.split("=") for line in geo.stdout.split())
        shadow = ((int(size["WIDTH"]) - frame[3][2]) // 2, (int(size["HEIGHT"]) - frame[3][3]) // 2)
        x, y = one[3][0] + one[3][2] // 2 + shadow[0], one[3][1] + one[3][3] // 2 + shadow[1]
        action = ["xdotool", "mousemove", "--window", wid, str(x), str(y), "click", "1"]
    act_dump, dump_only, sizes = [], [], []
    for _ in range(args.n):
        start = time.perf_counter()
        subprocess.run(action, check=True)
        nodes = []
        dump_app(pyatspi, app, nodes)
        act_dump.append(time.perf_counter() - start)
        start = time.perf_counter()
        nodes = []
        dump_app(pyatspi, app, nodes)
        dump_only.append(time.perf_counter() - start)
        sizes.append(len(nodes))
    print(json.dumps({"act_and_dump_s": act_dump, "dump_s": dump_only, "nodes": sizes}), flush=True)
    return 0  # the sandbox's pid namespace ends with this process, and the session with it


if __name__ == "__main__":
    sys.exit(main())
