"""The Appium servers a collector run uses: one per group of emulators, or a server the user runs.

A server the user already runs (`--appium-url`) is checked once (GET /status) and never stopped by
the collector; the sandbox sees it through the same small interface as an `AppiumServer` it shares
(url, alive, start, resources, close).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from sandboxes.base import SandboxError

STATUS_TIMEOUT_S = 10.0


class RemoteAppium:
    """An Appium server started by someone else, e.g. `appium server --port 4723` on a device host."""

    def __init__(self, url: str, timeout_s: float = STATUS_TIMEOUT_S) -> None:
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(
                f"--appium-url must be an http(s) URL such as http://127.0.0.1:4723/, got {url!r}"
            )
        self.url = url.rstrip("/") + "/"
        self.timeout_s = timeout_s
        self._ready = False

    @property
    def alive(self) -> bool:
        return self._ready

    def start(self) -> None:
        """Check once that the server answers `/status` as ready; SandboxError saying what to do if not."""
        if self._ready:
            return
        try:
            with urllib.request.urlopen(f"{self.url}status", timeout=self.timeout_s) as response:
                ready = json.loads(response.read()).get("value", {}).get("ready", True)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SandboxError(
                f"no Appium server answers at {self.url}status ({exc}); start it first"
            ) from exc
        if not ready:
            raise SandboxError(f"the Appium server at {self.url} says it is not ready")
        self._ready = True

    def resources(self) -> list[str]:
        return []  # not ours to account for or stop

    def close(self) -> None:
        self._ready = False
