"""The web domain: real Chromium through Playwright, observed as a BrowserGym-style accessibility tree."""

from sandboxes.web.actions import ACTION_KINDS, ACTION_SPACE, parse_action
from sandboxes.web.config import DEFAULT_START_URL, SITES, WebConfig, default_allowed_origins, site_url
from sandboxes.web.domain import HOOKS, replay_sandbox
from sandboxes.web.sandbox import WebSandbox
from sandboxes.web.sites import start_sites_server

__all__ = [
    "ACTION_KINDS",
    "ACTION_SPACE",
    "DEFAULT_START_URL",
    "HOOKS",
    "SITES",
    "WebConfig",
    "WebSandbox",
    "default_allowed_origins",
    "parse_action",
    "replay_sandbox",
    "site_url",
    "start_sites_server",
]
