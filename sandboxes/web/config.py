"""Web sandbox configuration, and the host names under which the embedded sites are reached.

The embedded sites live on one loopback server whose port changes every run; the browser reaches
them as `http://<site>.agentworld.test/` (a Chromium host-resolver rule maps the names to the
port), so recorded URLs never mention the port and a replay in a fresh sandbox sees the same URLs.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

SITE_DOMAIN = "agentworld.test"
SITES = ("shop", "docs", "lab")
DEFAULT_START_URL = f"http://shop.{SITE_DOMAIN}/"
CHROMIUM = "/usr/bin/chromium"
DIALOG_POLICIES = ("accept", "dismiss")
DOWNLOAD_POLICIES = ("save", "refuse")
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-smooth-scrolling",  # a scroll action lands at once, not over an animation
)


def site_url(site: str, path: str = "/") -> str:
    """`site_url("shop", "/cart")` -> "http://shop.agentworld.test/cart"."""
    return f"http://{site}.{SITE_DOMAIN}{path}"


def default_allowed_origins() -> list[str]:
    return [site_url(site, "") for site in SITES]


def origin_of(url: str) -> str:
    """scheme://host[:port] of a URL, lower-cased, default ports dropped ("" for a URL without one)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return ""
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return ""
    default_port = {"http": 80, "https": 443}.get(scheme)
    host = parts.hostname.lower()
    return f"{scheme}://{host}" if port in (None, default_port) else f"{scheme}://{host}:{port}"


@dataclass
class WebConfig:
    """How a web sandbox runs. Everything but `sites_port` is recorded in each trajectory."""

    headless: bool = True
    screenshots: bool = False  # a PNG attachment per observation (large)
    viewport_width: int = 1280
    viewport_height: int = 720
    # The upper bound of the wait after an action for the page to settle (navigation, network and
    # DOM quiet); the observation reports whether the bound was hit.
    settle_timeout_ms: int = 3000
    # How long network and DOM must stay quiet to count as settled.
    quiet_ms: int = 40
    # How long an element action (click, fill, ...) may wait for its element to become actionable.
    action_timeout_ms: int = 1500
    # The bound on reading one observation (the largest docs page takes about 1 s on a quiet machine).
    observe_timeout_ms: int = 20_000
    max_tree_lines: int = 2000  # longer trees end with a truncation marker line
    # Pages with more elements than this are observed viewport first: only what lies in and near
    # the viewport (one screen above and below) is read, so scrolling changes what is shown.
    viewport_first_elements: int = 3000
    max_name_chars: int = 200  # longer accessible names are cut
    # Origins an episode may reach when its task does not list its own (task.metadata["allowed_origins"]).
    allowed_origins: list[str] = field(default_factory=default_allowed_origins)
    # Port of a running embedded-sites server; None: the sandbox starts its own.
    sites_port: int | None = None
    executable_path: str = CHROMIUM
    # How alert/confirm/prompt/beforeunload dialogs are answered: "accept" or "dismiss". A prompt
    # that is accepted gets `prompt_text`, or its own default text when that is None.
    dialog_policy: str = "accept"
    prompt_text: str | None = None
    # "save": downloads go to the sandbox's own folder and are announced; "refuse": they are
    # cancelled, and the observation says so.
    downloads: str = "save"
    # How long a step waits for a download to finish arriving; one still arriving is cancelled.
    download_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.settle_timeout_ms < 0 or self.quiet_ms < 0 or self.action_timeout_ms <= 0:
            raise ValueError("settle_timeout_ms and quiet_ms must be >= 0 and action_timeout_ms > 0")
        if self.download_timeout_ms <= 0:
            raise ValueError("download_timeout_ms must be > 0")
        if self.max_tree_lines < 1 or self.viewport_width < 1 or self.viewport_height < 1:
            raise ValueError("max_tree_lines and the viewport size must be positive")
        if self.dialog_policy not in DIALOG_POLICIES:
            raise ValueError(f"dialog_policy must be one of {DIALOG_POLICIES}, not {self.dialog_policy!r}")
        if self.downloads not in DOWNLOAD_POLICIES:
            raise ValueError(f"downloads must be one of {DOWNLOAD_POLICIES}, not {self.downloads!r}")

    def recorded(self) -> dict[str, Any]:
        """The config as a trajectory records it: without the run's server port."""
        config = dataclasses.asdict(self)
        config.pop("sites_port")
        return config

    @classmethod
    def from_recorded(cls, config: dict[str, Any]) -> WebConfig:
        """A config like a recorded one; unknown keys (from other versions) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)} - {"sites_port"}
        return cls(**{k: v for k, v in config.items() if k in names})
