"""The search domain: `web_search` and `web_extractor` over an embedded tantivy index of real offline
documents (served over loopback HTTP) or over HTTP search backends (SearXNG, any JSON API), and
`answer`, the agent's final answer, which a task's "answer" verifier checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sandboxes.domains import SandboxHooks
from sandboxes.search.actions import (
    ACTION_KINDS,
    ACTION_SCHEMA,
    ACTION_SPACE,
    ANSWER,
    WEB_EXTRACTOR,
    WEB_SEARCH,
    extract_action,
    parse_action,
    search_action,
)
from sandboxes.search.build import BuildParams, build_index, default_index_dir, ensure_index
from sandboxes.search.config import (
    HttpLimits,
    JsonApiBackend,
    SearchConfig,
    SearxngBackend,
    TantivyBackend,
    config_from_dict,
    config_to_dict,
    make_backend,
)
from sandboxes.search.sandbox import INITIAL_TEXT, SearchSandbox
from schemas.records import Environment


def replay_sandbox(environment: Environment) -> SearchSandbox:
    """A fresh sandbox like the recorded one. A tantivy index that is not on this machine is rebuilt
    from the recorded build parameters into the cache (same sources, limit and seed: same corpus)."""
    config = config_from_dict(environment.config)
    backend = config.backend
    if isinstance(backend, TantivyBackend) and not (Path(backend.index_dir) / "manifest.json").exists():
        if not backend.build:
            raise FileNotFoundError(
                f"search index {backend.index_dir} is missing and its build is not recorded"
            )
        params = BuildParams(**backend.build)
        target = default_index_dir(params)
        ensure_index(target, params)
        config = dataclasses.replace(
            config, backend=TantivyBackend(index_dir=str(target), build=backend.build)
        )
    return SearchSandbox(config)


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text=INITIAL_TEXT,
)

__all__ = [
    "ACTION_KINDS",
    "ACTION_SCHEMA",
    "ANSWER",
    "HOOKS",
    "WEB_EXTRACTOR",
    "WEB_SEARCH",
    "BuildParams",
    "HttpLimits",
    "JsonApiBackend",
    "SearchConfig",
    "SearchSandbox",
    "SearxngBackend",
    "TantivyBackend",
    "build_index",
    "config_from_dict",
    "config_to_dict",
    "default_index_dir",
    "ensure_index",
    "extract_action",
    "make_backend",
    "parse_action",
    "replay_sandbox",
    "search_action",
]
