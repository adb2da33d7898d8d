"""The domain-agnostic policies by name: `make_policy("scripted", ...)`, `make_policy("replay",
dataset=PATH)`, `make_policy("llm", ...)`. Each domain's explorer lives with its collector
(collectors/<domain>/explorer.py), since it reads that domain's observations.

The LLM policy is imported only when asked for, so the `openai` client stays optional.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collectors.policies.base import INVALID, Policy, invalid_action


def _scripted(**opts: Any) -> Policy:
    from collectors.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(**opts)


def _replay(dataset: str | None = None, recording: Any = None) -> Policy:
    """From a dataset path, or as a clone of an already loaded ReplayPolicy (`recording`)."""
    from collectors.policies.replay import ReplayPolicy

    if recording is not None:
        return recording.clone()
    if dataset is None:
        raise ValueError("the replay policy needs dataset=PATH (--replay-from)")
    return ReplayPolicy.from_dataset(dataset)


def _llm(**opts: Any) -> Policy:
    try:
        from collectors.policies.llm import LLMPolicy
    except ImportError as exc:
        raise ImportError(
            f"the llm policy needs the 'llm' extra (pip install 'agentworld-data[llm]'): {exc}"
        ) from exc
    return LLMPolicy(**opts)


POLICIES: dict[str, Callable[..., Policy]] = {
    "scripted": _scripted,
    "replay": _replay,
    "llm": _llm,
}


def make_policy(name: str, **opts: Any) -> Policy:
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {sorted(POLICIES)}") from None
    return factory(**opts)


__all__ = ["INVALID", "POLICIES", "Policy", "invalid_action", "make_policy"]
