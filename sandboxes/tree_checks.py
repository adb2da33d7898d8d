"""What the state verifiers of the UI-tree domains (android_state, desktop_state) share: a `node` or
`no_node` check names its node by a pattern, an object of the domain's fields whose regular
expressions must compile before any episode is scored."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from sandboxes.base import VerifierError


def check_node_pattern(
    pattern: Any, fields: Collection[str], regex_fields: tuple[str, ...], where: str
) -> None:
    """VerifierError, naming `where`, unless `pattern` is a non-empty object of `fields` whose
    `regex_fields` are regular expressions."""
    if not isinstance(pattern, dict) or not pattern or set(pattern) - set(fields):
        raise VerifierError(f"{where}: a node pattern uses only {sorted(fields)}")
    for key in regex_fields:
        try:
            re.compile(pattern.get(key, ""))
        except (re.error, TypeError) as exc:
            raise VerifierError(f"{where}: {key} is not a regular expression: {exc}") from exc
