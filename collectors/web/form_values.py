"""Values the web explorer types into form fields: plausible ones chosen by what the field is
(its accessible name and role), and sometimes invalid ones, so recordings show validation errors.

The field kind is guessed from words in the name ("E-mail address" -> email); the search terms
come from the words on the page itself, so a search tends to find something.
"""

from __future__ import annotations

import random
import re

# (kind, words in a field's lower-cased accessible name that mark it), first match wins.
_KIND_WORDS: list[tuple[str, tuple[str, ...]]] = [
    ("email", ("email", "e-mail", "mail")),
    ("password", ("password", "passphrase", "pin")),
    ("quantity", ("quantity", "qty", "amount", "count", "number of", "how many")),
    ("phone", ("phone", "tel", "mobile")),
    ("postcode", ("zip", "postal", "postcode")),
    ("date", ("date", "birthday", "day")),
    ("url", ("url", "website", "homepage", "link")),
    ("search", ("search", "query", "find", "filter", "keyword")),
    ("city", ("city", "town")),
    ("address", ("address", "street")),
    ("username", ("username", "user name", "login", "handle")),
    ("name", ("name",)),
    ("message", ("message", "comment", "note", "review", "description", "feedback", "question")),
]

_PLAUSIBLE: dict[str, list[str]] = {
    "email": ["alice@example.com", "bob.martin@example.org", "c.nguyen@example.net", "dana+shop@example.com"],
    "password": ["correct-horse-42", "S3cure!pass", "hunter2hunter2", "blue-Canyon-77"],
    "quantity": ["1", "2", "3", "5", "10"],
    "phone": ["+1 555 0100", "+44 20 7946 0018", "555-0142"],
    "postcode": ["94107", "SW1A 1AA", "10115", "75001"],
    "date": ["2026-05-14", "2025-12-01", "2026-01-31"],
    "url": ["https://example.com", "https://example.org/about"],
    "search": ["python", "tutorial", "garden", "lamp", "list", "string"],
    "city": ["Lisbon", "Toronto", "Osaka", "Nairobi"],
    "address": ["12 Harbour Road", "4 Rue des Lilas", "221B Baker Street"],
    "username": ["alice", "bmartin", "cnguyen", "demo"],
    "name": ["Alice Jensen", "Bob Martin", "Chi Nguyen", "Dana Okafor", "Emil Novak"],
    "message": [
        "Does this come in blue?",
        "Great service, thanks!",
        "Please deliver after 5 pm.",
        "The second item arrived damaged.",
    ],
    "text": ["hello", "test", "sample text", "something else"],
}

_INVALID: dict[str, list[str]] = {
    "email": ["alice@", "not-an-email", "@example.com", "alice example.com"],
    "password": ["1", "pw", ""],
    "quantity": ["-1", "0", "abc", "999999", "2.5"],
    "phone": ["phone", "12"],
    "postcode": ["??", "1234567890123"],
    "date": ["31/02/2026", "yesterday", "2026-13-40"],
    "url": ["not a url", "htp:/broken"],
    "search": ["", "zzzxqv", "%%%", "a" * 120],
    "city": ["", "1234"],
    "address": [""],
    "username": ["", "a b c", "x" * 80],
    "name": ["", "1234", "<b>Bob</b>"],
    "message": ["", "x" * 500],
    "text": ["", "x" * 200],
}

_WORD = re.compile(r"[A-Za-z][A-Za-z-]{2,19}")
_STOPWORDS = {"the", "and", "for", "with", "from", "this", "that", "your", "you", "are", "add", "cart"}


def field_kind(name: str, role: str) -> str:
    """What a field asks for, guessed from its accessible name and role."""
    lowered = name.lower()
    for kind, words in _KIND_WORDS:
        if any(word in lowered for word in words):
            return kind
    if role == "searchbox":
        return "search"
    if role == "spinbutton":
        return "quantity"
    return "text"


def page_words(names: list[str]) -> list[str]:
    """Distinct words from the page's element names: search terms that can match something."""
    seen: dict[str, None] = {}
    for name in names:
        for word in _WORD.findall(name):
            lowered = word.lower()
            if lowered not in _STOPWORDS:
                seen.setdefault(lowered, None)
    return list(seen)


def field_value(
    name: str, role: str, rng: random.Random, invalid_probability: float, words: list[str] = ()
) -> tuple[str, bool]:
    """(value, is_invalid) for a field: mostly plausible for its kind, sometimes invalid."""
    kind = field_kind(name, role)
    if rng.random() < invalid_probability:
        return rng.choice(_INVALID[kind]), True
    if kind == "search" and words and rng.random() < 0.7:
        return " ".join(rng.sample(list(words), k=min(len(words), rng.choice((1, 1, 2))))), False
    return rng.choice(_PLAUSIBLE[kind]), False
