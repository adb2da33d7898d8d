"""Where the SDK's programs and the AVDs are, and how a missing AVD is created or an existing one cloned.

Layout facts (Android SDK documentation): `<sdk>/emulator/emulator`, `<sdk>/platform-tools/adb`,
`<sdk>/cmdline-tools/latest/bin/avdmanager`; the SDK root comes from ANDROID_SDK_ROOT or ANDROID_HOME.
AVDs live in ANDROID_AVD_HOME, else `$ANDROID_USER_HOME/avd`, else `~/.android/avd`: each is a
`<name>.ini` pointing (`path=`) at a `<name>.avd/` directory whose `config.ini` holds the hardware.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sandboxes.android.fleet.device import FleetError

AVDMANAGER_TIMEOUT_S = 120.0
LOCK_SUFFIXES = (".lock",)  # a running emulator's locks must not travel with a copy


@dataclass(frozen=True)
class SdkPrograms:
    emulator: str
    adb: str
    avdmanager: str | None


def sdk_root(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("ANDROID_SDK_ROOT") or os.environ.get("ANDROID_HOME")


def find_programs(
    sdk: str | None = None,
    emulator: str | None = None,
    adb: str | None = None,
    avdmanager: str | None = None,
) -> SdkPrograms:
    """The emulator, adb and avdmanager to run: explicit paths first, then the SDK root's, then PATH."""
    root = sdk_root(sdk)

    def pick(explicit: str | None, relative: str, name: str) -> str | None:
        if explicit:
            return explicit if os.access(explicit, os.X_OK) else None
        if root and os.access(os.path.join(root, relative), os.X_OK):
            return os.path.join(root, relative)
        return shutil.which(name)

    found_emulator = pick(emulator, "emulator/emulator", "emulator")
    found_adb = pick(adb, "platform-tools/adb", "adb")
    missing = [name for name, path in (("emulator", found_emulator), ("adb", found_adb)) if path is None]
    if missing:
        where = f"the SDK at {root}" if root else "no SDK (ANDROID_SDK_ROOT and ANDROID_HOME are unset)"
        raise FleetError(
            f"Android SDK program(s) not found: {', '.join(missing)} (looked in {where} and on PATH). "
            "Install the SDK's emulator and platform-tools packages (sdkmanager 'emulator' 'platform-tools') "
            "and set ANDROID_SDK_ROOT, or pass --sdk DIR."
        )
    assert found_emulator is not None and found_adb is not None
    return SdkPrograms(
        emulator=found_emulator,
        adb=found_adb,
        avdmanager=pick(avdmanager, "cmdline-tools/latest/bin/avdmanager", "avdmanager"),
    )


def avd_home(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("ANDROID_AVD_HOME"):
        return Path(os.environ["ANDROID_AVD_HOME"])
    user_home = os.environ.get("ANDROID_USER_HOME") or os.path.join(Path.home(), ".android")
    return Path(user_home) / "avd"


def read_ini(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            values[key.strip()] = value.strip()
    return values


def write_ini(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))


def list_avds(home: Path) -> list[str]:
    return sorted(p.stem for p in home.glob("*.ini")) if home.is_dir() else []


def avd_dir(home: Path, name: str) -> Path:
    """The AVD's content directory, as its `<name>.ini` points to it."""
    ini = home / f"{name}.ini"
    if not ini.is_file():
        known = ", ".join(list_avds(home)) or "none"
        raise FleetError(
            f"AVD {name!r} not found in {home} (AVDs there: {known}). Create it with "
            f"`avdmanager create avd -n {name} -k 'system-images;android-34;google_apis;x86_64'`, "
            "or pass --avd with an existing one."
        )
    path = read_ini(ini).get("path")
    return Path(path) if path else home / f"{name}.avd"


def clone_avd(home: Path, source: str, name: str) -> Path:
    """Copy AVD `source` to a new AVD `name` (its directory, ini and display name); returns the new directory.

    For instances that must each keep their own writable data; instances that only need the same
    starting state share one AVD with `-read-only` instead, which costs no copy.
    """
    if (home / f"{name}.ini").exists():
        raise FleetError(f"AVD {name!r} already exists in {home}; choose another name or delete it first")
    src_dir = avd_dir(home, source)
    new_dir = home / f"{name}.avd"
    shutil.copytree(src_dir, new_dir, ignore=shutil.ignore_patterns(*(f"*{s}" for s in LOCK_SUFFIXES)))
    config_path = new_dir / "config.ini"
    if config_path.is_file():
        config = read_ini(config_path)
        config["AvdId"] = name
        config["avd.ini.displayname"] = name
        write_ini(config_path, config)
    ini = read_ini(home / f"{source}.ini")
    ini["path"] = str(new_dir)
    ini["path.rel"] = f"avd/{name}.avd"
    write_ini(home / f"{name}.ini", ini)
    return new_dir


def create_avd(avdmanager: str, name: str, package: str, device: str | None, home: Path) -> Path:
    """`avdmanager create avd` for a system image package, answering its custom-hardware question with no."""
    argv = [
        avdmanager,
        "create",
        "avd",
        "--name",
        name,
        "--package",
        package,
        "--path",
        str(home / f"{name}.avd"),
    ]
    if device:
        argv += ["--device", device]
    env = {**os.environ, "ANDROID_AVD_HOME": str(home)}
    try:
        done = subprocess.run(
            argv, input="no\n", capture_output=True, text=True, timeout=AVDMANAGER_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise FleetError(
            f"avdmanager did not finish creating {name!r} in {AVDMANAGER_TIMEOUT_S:.0f} s"
        ) from exc
    if done.returncode != 0:
        raise FleetError(
            f"avdmanager could not create AVD {name!r} from {package!r}: "
            f"{(done.stderr or done.stdout).strip()[-500:]} (install the image with sdkmanager {package!r})"
        )
    return avd_dir(home, name)
