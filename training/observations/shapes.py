"""The character-class form of text: what a volatile value (a time, an id) must keep when it changes.

Shared by the templates (template.py: volatile spans of the noise floor's templates), the noise floor
and the domains' structured metrics (training/fidelity: volatile JSON values, volatile output lines).
"""

from __future__ import annotations

import re

# A token is a word, a whitespace run or one other character: the unit real runs are diffed in.
_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _token_shape(token: str) -> str:
    """The regex of a token's form: digits stay digits, letters letters, mixed words any word."""
    if token.isspace():
        return r"\s+"
    if token.isdigit():
        return r"\d+"
    if token.isalpha():
        return r"[^\W\d_]+"
    if re.match(r"\w", token):
        return r"\w+"
    return re.escape(token)


def shape_pattern(text: str) -> str:
    """The character-class form of one real value of a volatile span, as a regex."""
    return "".join(_token_shape(t) for t in tokens(text))
