"""The one definition of a format-valid observation, per domain: the fidelity metric `format_valid`
(training/fidelity/metrics.py) and the verifiers' format check are both `format_failures`.

Each domain's rule reads the real observation to know which form is due (a prompt only where the real
command finished, a diff only where the real edit answered with one), so a runner's error text or a
first observation is held to the form it has, not to the domain's usual one.
"""

from __future__ import annotations

from collections.abc import Callable

from sandboxes.domains import find_domain
from training.rewards.verifiers.search import search_failures
from training.rewards.verifiers.terminal import terminal_failures
from training.rewards.verifiers.tools import mcp_failures, swe_failures
from training.rewards.verifiers.trees import android_failures, os_failures, web_failures
from training.rewards.verifiers.verdict import Failure

CHECKS = {"format.empty": "the observation is empty (or only whitespace)"}

# Each domain's rule, by the observation_format its record gives (sandboxes.domains).
RULES: dict[str, Callable[[str, str], list[Failure]]] = {
    "terminal_screen": terminal_failures,
    "mcp_result": mcp_failures,
    "swe_tool_result": swe_failures,
    "a11y_tree": web_failures,
    "desktop_a11y_tree": os_failures,
    "android_ui_tree": android_failures,
    "search_results": search_failures,
}


def format_failures(domain: str, content: str, reference: str) -> list[Failure]:
    """The format checks that `content` fails as an observation of `domain`, judged by the real
    `reference`; a domain without a rule of its own needs only a non-empty observation."""
    if not content.strip():
        return [Failure("format.empty", "the observation is empty")]
    spec = find_domain(domain)
    rule = RULES.get(spec.observation_format) if spec else None
    return rule(content, reference) if rule else []


def format_valid(domain: str, content: str, reference: str) -> bool:
    return not format_failures(domain, content, reference)
