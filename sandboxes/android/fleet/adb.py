"""The few adb commands the fleet needs, each with a time bound and no shell on the host side."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping

from sandboxes.android.fleet.device import FleetError

ANIMATION_SETTINGS = ("window_animation_scale", "transition_animation_scale", "animator_duration_scale")


class Adb:
    def __init__(self, program: str, env: Mapping[str, str], command_timeout_s: float = 10.0) -> None:
        self.program = program
        self.env = dict(env)
        self.command_timeout_s = command_timeout_s

    def run(self, args: list[str], timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        timeout = self.command_timeout_s if timeout_s is None else timeout_s
        try:
            return subprocess.run(
                [self.program, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise FleetError(f"`adb {' '.join(args)}` did not answer within {timeout:.1f} s") from exc

    def devices(self) -> dict[str, str]:
        """{serial: state} from `adb devices` (state is device, offline, unauthorized, ...)."""
        done = self.run(["devices"])
        if done.returncode != 0:
            raise FleetError(f"`adb devices` failed: {done.stderr.strip()}")
        states: dict[str, str] = {}
        for line in done.stdout.splitlines()[1:]:
            serial, _, state = line.partition("\t")
            if serial.strip() and state:
                states[serial.strip()] = state.strip()
        return states

    def wait_for_device(self, serial: str, timeout_s: float, still_alive: Callable[[], bool]) -> bool:
        """`adb -s SERIAL wait-for-device`: True when adb sees the device, False when timeout_s passes or
        still_alive() turns False first; FleetError when adb itself fails."""
        waiter = subprocess.Popen(
            [self.program, "-s", serial, "wait-for-device"], env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    code = waiter.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline or not still_alive():
                        return False
                    continue
                if code != 0:
                    raise FleetError(
                        f"`adb -s {serial} wait-for-device` failed ({code}): {waiter.stderr.read()}"
                    )
                return True
        finally:
            if waiter.poll() is None:
                waiter.kill()
            waiter.communicate()

    def shell(self, serial: str, *command: str) -> subprocess.CompletedProcess[str]:
        """`adb -s SERIAL shell ARG...`: the words go to the device's shell, never to a host shell."""
        return self.run(["-s", serial, "shell", *command])

    def boot_completed(self, serial: str) -> bool:
        done = self.shell(serial, "getprop", "sys.boot_completed")
        return done.returncode == 0 and done.stdout.strip() == "1"

    def disable_animations(self, serial: str) -> None:
        """Animations off, so that UI automation sees settled screens sooner (Espresso's setup advice).

        One `adb shell` for the three settings: adb joins the words and the device's shell runs the `;`
        separated commands, so a boot costs one round trip here, not three. No host shell is involved.
        """
        words: list[str] = []
        for setting in ANIMATION_SETTINGS:
            words += [*([";"] if words else []), "settings", "put", "global", setting, "0"]
        done = self.shell(serial, *words)
        if done.returncode != 0:
            raise FleetError(
                f"{serial}: turning animations off failed: {(done.stderr or done.stdout).strip()}"
            )

    def emu_kill(self, serial: str, timeout_s: float) -> None:
        """Ask the emulator to shut down through its console; failures are fine (the caller kills after)."""
        try:
            self.run(["-s", serial, "emu", "kill"], timeout_s=timeout_s)
        except FleetError:
            pass
