"""Which values in a line are secrets: token patterns, the key/value forms terminals show, and a
pluggable detector (detect-secrets in the corpus stage), with the rules that keep ids, checksums,
private addresses, references and code out of the findings. `beam_pipelines.redaction` replaces
what these rules find.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

# A PEM private key: a whole block, or what a scrolled or cut screen shows of it. Applied to whole
# texts (it spans lines), only when "-----" occurs.
PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:\n[A-Za-z0-9+/=:, -]*(?=\n|$))*"
    r"|(?:^[A-Za-z0-9+/=]{16,}\n)+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    re.MULTILINE,
)
# Whole-token forms, each applied per line only when a cheap test passes (these run on every line of
# every observation). A run is only tried from its start (the negative lookbehinds), and possessive
# runs do not backtrack, so each costs one pass over the line.
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b")
_GITHUB_TOKEN = re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b")
# Not the user of a URL (credentials, below) nor git@ of an SSH remote (git@github.com:org/repo).
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])(?<!://)(?!git@)[A-Za-z0-9._%+-]++@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
# Not after "-", "+" or a word (package-2.4.61.1, v1.2.3.4), not before "-word" (5.4.0.1-generic).
_IPV4 = re.compile(r"(?<![\w.+-])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d|-\w)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:.])")
_AWS_GATE = re.compile(r"A[KSBC3][IAC]")
_DIGIT_DOT_DIGIT = re.compile(r"\d\.\d")
_TOKENS: tuple[tuple[str, Callable[[str], bool], re.Pattern[str]], ...] = (
    ("aws_access_key", lambda line: _AWS_GATE.search(line) is not None, _AWS_KEY_ID),
    ("github_token", lambda line: "gh" in line or "github_pat_" in line, _GITHUB_TOKEN),
    ("email", lambda line: "@" in line, _EMAIL),
    ("ipv4", lambda line: _DIGIT_DOT_DIGIT.search(line) is not None, _IPV4),
    ("ipv6", lambda line: line.count(":") >= 2, _IPV6),
)
_VERSION_BEFORE = re.compile(r"(?:version|release|ver\.?)[\s:=]*$", re.IGNORECASE)

# A key that names a secret: it ends with one of these words. Left boundaries only for the short
# ones, so DB_PASS and PGPASSWORD count and bypass does not; right boundary by the separator that
# must follow, so token_count and passwordFile do not count.
_SECRET_KEY = (
    r"(?:[\w.-]*?(?:pass(?:word|wd|phrase)|secret|token|credentials?|signature"
    r"|(?:api|access|private|secret|account|auth|signing|encryption|master|client|session|app|consumer)"
    r"[_.-]?key)"
    r"|(?:[\w.-]*[_.-])?(?:pass|pwd|auth))"
)
_VALUE = r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"'`,;&<>(){}\[\]]+))"
# `KEY=value` (env, printenv, export, .env, ini, connection strings, query strings),
# `key: value` (YAML, headers), `"key": "value"` (JSON). Any key matches here and `_NAMES_SECRET`
# checks it after: one possessive run per word is far cheaper than trying every secret-key ending
# at every position. The value is read in a lookahead, so `note: password=x` yields both pairs.
_KEY_VALUE = re.compile(rf"(?<![\w.-])(?P<key>[\w.-]++)[\"']?[ \t]*+(?P<sep>[:=])(?=[ \t]*+{_VALUE})")
# `--password VALUE` (the `--password=VALUE` form is a key/value).
_FLAG = re.compile(rf"(?<![\w-])--?(?P<key>{_SECRET_KEY})[ \t]+{_VALUE}", re.IGNORECASE)
_AUTH_HEADER = re.compile(
    r"(?<![\w-])(?:proxy-)?authori[sz]ation[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:bearer|basic|token|bot|api-?key|key|sso-key|negotiate|ntlm)[ \t]+)?(?P<bare>[^\s\"',;]+)",
    re.IGNORECASE,
)
# scheme://user:password@host, and scheme://TOKEN@host where the user name is a long token.
_URL_CREDENTIALS = re.compile(
    r"\b[a-z][a-z0-9+.-]*://(?:[^\s:/@?#\"'<>]*:(?P<bare>[^\s@/?#\"'<>]+)|(?P<token>[\w.~%-]{16,}))@",
    re.IGNORECASE,
)
# curl -u user:password, --user user:password
_USER_PASSWORD = re.compile(r"(?<![\w-])(?:-u|--user)[ \t]+[\"']?[^\s:\"']+:(?P<bare>[^\s\"']+)")
# ~/.netrc: `machine HOST login USER password SECRET`, words separated by blanks.
_NETRC = re.compile(
    r"^[ \t]*(?:machine|default)\b.*?[ \t]password[ \t]+(?P<bare>\S+)|^[ \t]*password[ \t]+(?P<alone>\S+)$"
)
# SQL: CREATE USER ... PASSWORD 'x', ALTER ROLE ... WITH PASSWORD 'x', IDENTIFIED BY 'x'.
_SQL_PASSWORD = re.compile(r"\b(?:password|identified[ \t]+by)[ \t]+'(?P<sq>[^'\n]+)'", re.IGNORECASE)
_MAY_HOLD_KEYED = re.compile(
    r"pass|pwd|secret|token|key|auth|credential|signature|identified|://|-u\b|--user"
)
# Lines worth handing to a detector such as detect-secrets (~50-100 us a line with all plugins),
# matched against the lower-cased line: a keyword its keyword/auth plugins look for, credentials in
# a URL, or a long token-like run.
_SUSPECT = re.compile(
    r"secret|passw|pwd\s*[=:]|token|api_?key|apikey|auth|bearer|credential|private|access_?key|accountkey"
    r"|://[^\s/@]+@|(?<![a-z0-9+=_-])[a-z0-9+=_-]{20}|[\"'][a-z0-9+/=_-]{16}"
)

# Values after a secret-naming key that are not secrets: literals, prompts, code, references to
# where the secret lives ($VAR, ${VAR}, %VAR%, {{ template }}, ~/file, obj.attr, a URL without
# credentials), comparisons (pwd==x), masks (****), small numbers (ports, counts), placeholders.
_NOT_SECRET_WORDS = frozenset(
    "true false null none nil yes no on off undefined empty required optional string str hidden redacted "
    "masked secret password passwd token key auth env file prompt stdin bearer basic await new self this "
    "function lambda input getpass".split()
)
_REFERENCE = re.compile(
    r"[$%{<=]|~/|\.\.?/|(?:/[a-z0-9_.-]+)+/?$|[*xX#.•_-]{3,}$|\d{1,7}$|[A-Za-z_]+(?:\.[A-Za-z_]+)+$"
    r"|[a-z][a-z0-9+.-]*://[^\s@]*$"
)
# Checksums and ids: hex (commit and container ids, digests, sha256:...), UUIDs, and the
# `sha512-<base64>` integrity strings of package lock files.
_CHECKSUM_OR_ID = re.compile(
    r"(?:(?:sha\d*|md5)[:-])?[0-9a-fA-F]+|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
    r"|(?:sha(?:1|256|384|512)|md5)-[A-Za-z0-9+/]+=*"
)

# Addresses that identify no one: private, loopback, link-local, documentation, shared (CGNAT),
# reserved and multicast ranges. Kept, because logs and configs full of them are realistic content.


@functools.lru_cache(maxsize=4096)
def _keep_ip(kind: str, text: str) -> bool:
    """Non-public and malformed addresses (times, C++ `a::b`, 2.4.61.271) are not personal data."""
    if kind == "ipv6" and not any(c.isdigit() for c in text):
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return True
    return not address.is_global or address.is_multicast


def plausible_secret(value: str) -> bool:
    """Whether a value found after a secret-naming key (or in an Authorization header or URL) is
    itself a secret rather than a literal, a reference to one, a mask or an id."""
    if len(value) < 3 or value.lower() in _NOT_SECRET_WORDS or value.startswith("<REDACTED"):
        return False
    return _REFERENCE.match(value) is None


def _classes(value: str) -> int:
    lower = upper = digit = other = 0
    for c in value:
        if c.islower():
            lower = 1
        elif c.isupper():
            upper = 1
        elif c.isdigit():
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


def replace_everywhere(value: str) -> bool:
    """Whether a value found in context is safe to replace wherever it appears in the trajectory.

    At least 6 characters of two classes or more (S3cret!, 8f2kQ...), or 16 of one class: such a
    string does not occur by chance in other output. A shorter or plainer value (letmein, postgres,
    123456) would also hit ordinary words and numbers elsewhere, so it is replaced only on its line.
    """
    return len(value) >= 6 and (_classes(value) >= 2 or len(value) >= 16) and not value.isdigit()


_NAMES_SECRET = re.compile(_SECRET_KEY, re.IGNORECASE)


def field_secret_kind(key: str, value: str) -> str | None:
    """The kind of secret a structured field holds whole (`{"api_key": "..."}` in a config), or None."""
    if key and "\n" not in value and _NAMES_SECRET.fullmatch(key) and plausible_secret(value):
        return _key_kind(key)
    return None


def _key_kind(key: str) -> str:
    key = key.lower()
    if "pass" in key or key.endswith("pwd"):
        return "password"
    return "token" if key.endswith("token") else "secret"


# --- finding ------------------------------------------------------------------------------------


class Finding(NamedTuple):
    kind: str
    value: str
    # The value must stand alone (not inside a longer word) where it is replaced: true for values
    # read from context; whole-token patterns matched whole tokens already.
    alone: bool
    # Replace wherever it appears in the trajectory, not only on the line it was found on.
    everywhere: bool


Detector = Callable[[str], Iterable[tuple[str, str]]]


def _keyed(line: str) -> Iterable[tuple[str, str]]:
    """(kind, value) for the key/value, header, URL and command-line forms terminals show."""
    for match in _KEY_VALUE.finditer(line):
        if _NAMES_SECRET.fullmatch(match["key"]) is None:
            continue
        bare = match["bare"]
        value = match["dq"] or match["sq"] or bare
        end = match.end("bare") if bare else match.end("dq" if match["dq"] else "sq") + 1
        # `key: word` is prose ("Error: Token: expired", "passwd: all tokens updated") unless the
        # pair is the whole line, as in YAML; a value that is not a plain word looks made up.
        if match["sep"] == ":" and bare and value.isalpha():
            if line[: match.start()].strip(" \t-") or line[end:].strip():
                continue
        # `token = get_token()`, `key = keys[0]`: code, not a value.
        if bare and line[end : end + 1] in ("(", "["):
            continue
        yield _key_kind(match["key"]), value
    for match in _FLAG.finditer(line):
        yield _key_kind(match["key"]), match["dq"] or match["sq"] or match["bare"]
    for match in _AUTH_HEADER.finditer(line):
        yield "auth_header", match["bare"]
    for match in _URL_CREDENTIALS.finditer(line):
        token = match["token"]
        if token is None:
            yield "url_credentials", match["bare"]
        elif _classes(token) >= 2 and any(c.isdigit() for c in token):
            yield "url_credentials", token
    for match in _USER_PASSWORD.finditer(line):
        yield "password", match["bare"]
    for match in _SQL_PASSWORD.finditer(line):
        yield "password", match["sq"]
    match = _NETRC.search(line)
    if match:
        yield "password", match["bare"] or match["alone"]


def _within(value: str, findings: dict[str, Finding]) -> bool:
    """Found already, whole or as part of a longer value (the JWT inside an Authorization header)."""
    return any(value in found for found in findings)


class SecretFinder:
    """The secrets in one (logical) line, as findings longest first. A pure function of the line,
    so it is memoised across trajectories (successive screens, and trajectories of one task, repeat
    most lines); the memo is cleared when it reaches `memo_lines` to bound memory.

    `detector` (optional) maps a suspect line to (kind, value) findings, e.g. detect-secrets. Its
    checksums and ids (hex, UUIDs, lock-file integrity strings) are dropped: out of context those are
    commit, container and content ids, which stay; a hex secret after a secret-naming key is found by
    the key/value rules.
    """

    def __init__(self, detector: Detector | None = None, memo_lines: int = 20_000) -> None:
        self._detector = detector
        self._memo: dict[str, tuple[Finding, ...]] = {}
        self._memo_lines = memo_lines

    def __call__(self, line: str) -> tuple[Finding, ...]:
        found = self._memo.get(line)
        if found is None:
            if len(self._memo) >= self._memo_lines:
                self._memo.clear()
            found = self._memo[line] = self._find(line)
        return found

    def _find(self, line: str) -> tuple[Finding, ...]:
        findings: dict[str, Finding] = {}
        for kind, may_hold, pattern in _TOKENS:
            if not may_hold(line):
                continue
            for match in pattern.finditer(line):
                value = match.group()
                if kind in ("ipv4", "ipv6") and (
                    _keep_ip(kind, value) or _VERSION_BEFORE.search(line, 0, match.start())
                ):
                    continue
                findings.setdefault(value, Finding(kind, value, False, True))
        lower = line.lower()
        if _MAY_HOLD_KEYED.search(lower):
            for kind, value in _keyed(line):
                if not _within(value, findings) and plausible_secret(value):
                    findings[value] = Finding(kind, value, True, replace_everywhere(value))
        if self._detector is not None and _SUSPECT.search(lower):
            for kind, value in sorted(set(self._detector(line))):
                if _within(value, findings) or value not in line or _CHECKSUM_OR_ID.fullmatch(value):
                    continue
                if plausible_secret(value):
                    findings[value] = Finding(kind, value, True, replace_everywhere(value))
        # Longest first, so a value that contains another is replaced whole.
        return tuple(sorted(findings.values(), key=lambda f: (-len(f.value), f)))


def kind_slug(secret_type: str) -> str:
    """detect-secrets' "AWS Access Key" -> "aws_access_key"."""
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")
