"""What the Android explorer types and opens, per app (logical names as the tasks give them)."""

from __future__ import annotations

import random

# Logical app name -> the package of the stock app on an AOSP / Google APIs emulator image. `open_app`
# takes the app's name as a user says it (AndroidWorld's form); the sandbox resolves it to a package.
PACKAGES = {
    "settings": "com.android.settings",
    "contacts": "com.android.contacts",
    "clock": "com.google.android.deskclock",
    "calculator": "com.google.android.calculator",
    "files": "com.google.android.documentsui",
    "chrome": "com.android.chrome",
    "camera": "com.android.camera2",
    "messages": "com.google.android.apps.messaging",
}
# Names as open_app is given them (what a user would say).
APP_NAMES = {
    "settings": "Settings",
    "contacts": "Contacts",
    "clock": "Clock",
    "calculator": "Calculator",
    "files": "Files",
    "chrome": "Chrome",
    "camera": "Camera",
    "messages": "Messages",
}
# Apps that no stock image has: open_app with one of them is one of the deliberate errors.
MISSING_APPS = ("Telegramm", "My Banking", "Notes Pro", "Spotifyy")

_FIRST = ("Alice", "Bob", "Carol", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas")
_LAST = ("Martin", "Okafor", "Novak", "Silva", "Tanaka", "Weber", "Kowalski", "Haddad")
_SEARCH = ("wifi", "bluetooth", "battery", "display", "sound", "storage", "language", "location")
_WORDS = ("meeting", "lunch", "call", "gym", "notes", "today", "tomorrow", "ok", "thanks", "see you")
_LABELS = ("Wake up", "Meeting", "Gym", "Medicine", "Bus", "Standup")


def package_app(package: str) -> str:
    """The logical app a package belongs to, or ""."""
    return next((app for app, name in PACKAGES.items() if name == package), "")


def text_for(app: str, hint: str, rng: random.Random) -> str:
    """Something a user would type into a field of `app` whose text, description or id is `hint`."""
    lowered = hint.lower()
    if "phone" in lowered or "number" in lowered or app == "calculator":
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(3, 10)))
    if "mail" in lowered:
        return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}@example.com"
    if "search" in lowered or app == "settings":
        return rng.choice(_SEARCH)
    if "name" in lowered or app == "contacts":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if "label" in lowered or app == "clock":
        return rng.choice(_LABELS)
    if "url" in lowered or "address" in lowered or app == "chrome":
        return rng.choice(("example.com", "wikipedia.org", "weather today"))
    return " ".join(rng.sample(_WORDS, rng.randint(1, 4)))
