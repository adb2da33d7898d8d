"""Pure text helpers for the corpus stages: normalisation, volatile-value masking, MinHash, redaction.

Nothing here imports Beam, so every rule is unit-testable on plain strings. The regular
expressions are compiled once at import; each helper makes one pass over its text where it can,
because these run on every observation of every trajectory.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterable

import numpy as np
import xxhash

from schemas.records import Trajectory

# --- normalisation ------------------------------------------------------------------------------

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC strings, charset designations,
# and the remaining two-byte escapes; the 8-bit CSI form too.
_CONTROL_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[()*+][0-9A-Za-z]"
    r"|\x1b[=>78@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


def is_screen(observation_format: str) -> bool:
    """A rendered screen (e.g. "terminal_screen"), where trailing blanks are padding, not content."""
    return observation_format.endswith("screen")


def strip_control_sequences(text: str) -> str:
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _CONTROL_SEQUENCE.sub("", text)


def normalise_text(text: str, *, screen: bool = False) -> str:
    """NFC, LF line endings, no terminal control sequences; on screens, no trailing blanks.

    Each rule is guarded by a cheap test, so already-clean text (the common case) is returned as is.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = strip_control_sequences(text)
    if screen and (" \n" in text or "\t\n" in text or text.endswith((" ", "\t"))):
        text = _TRAILING_SPACE.sub("", text)
    return text


# --- volatile values (dedup only) ---------------------------------------------------------------

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_VOLATILE = re.compile(
    r"(?P<UUID>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<TS>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}\b)?)"
    r"|(?P<TMP>/tmp/tmp\.\w+|\btmp[a-z0-9_]{8}\b)"
    rf"|(?P<DATE>\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b{_MONTH} +\d{{1,2}}\b"
    rf"|\b\d{{1,2}} {_MONTH} \d{{4}}\b|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b)"
    r"|(?P<TIME>\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b)"
    # PIDs: job-control "[1] 12345", "pid=123"/"PID 123", ps rows ("  123 pts/0 ..." and
    # "user 123 0.0 0.1 ...").
    r"|(?P<PID>(?<=\[\d\] )\d+|(?<=\[\d\d\] )\d+|(?<=pid=)\d+|(?<=pid )\d+|(?<=PID )\d+|(?<=pid: )\d+"
    r"|^ *\d+(?= +(?:pts/|tty|\?))|^[a-z_][\w-]* +\d+(?= +\d+\.\d +\d+\.\d))"
    r"|(?P<HEX>\b0x[0-9a-fA-F]{4,}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b)"
    r"|(?P<NUM>\b\d{5,}\b)",
    re.MULTILINE,
)


def _volatile_placeholder(match: re.Match[str]) -> str:
    # ps aux rows keep their user column: only the PID is volatile.
    text = match.group()
    if match.lastgroup == "PID" and not text.lstrip().isdigit():
        return text.split()[0] + " <PID>"
    return f"<{match.lastgroup}>"


_MAY_BE_VOLATILE = re.compile(r"\d|tmp")


def mask_volatile(text: str) -> str:
    """Timestamps, dates, times, PIDs, temp names, UUIDs, hex ids and long numbers as placeholders."""
    return _VOLATILE.sub(_volatile_placeholder, text) if _MAY_BE_VOLATILE.search(text) else text


def dedup_key_text(t: Trajectory, cache: dict[str, str] | None = None) -> str:
    """The trajectory's actions and observations with volatile values masked, for dedup only.

    Masked line by line through `cache` (line -> masked line; pass one in to share it across
    trajectories): successive screens repeat most of their lines, and a dictionary hit is far
    cheaper than another regex pass.
    """
    if cache is None:
        cache = {}
    parts = [t.initial_observation.text]
    for step in t.steps:
        parts.append(step.action.text)
        parts.append(step.observation.text)
    lines = "\x1e".join(parts).split("\n")
    for i, line in enumerate(lines):
        masked = cache.get(line)
        if masked is None:
            masked = cache[line] = mask_volatile(line)
        lines[i] = masked
    return "\n".join(lines)


def exact_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- MinHash ------------------------------------------------------------------------------------

_PRIME = (1 << 31) - 1


def shingle_hashes(text: str, k: int = 5) -> np.ndarray:
    """Stable 32-bit hashes of the word k-grams of each distinct line (a line of k words or fewer
    is one shingle). Per distinct line because successive screens repeat their lines: the set is
    the same as over the whole text but for k-grams spanning line breaks, at a fraction of the cost.
    xxhash, unlike `hash()`, is not salted per process, so every worker gets the same signature."""
    grams: set[str] = set()
    for line in set(text.split("\n")):
        words = line.split()
        if len(words) <= k:
            grams.add(" ".join(words))
        else:
            grams.update(" ".join(words[i : i + k]) for i in range(len(words) - k + 1))
    return np.fromiter((xxhash.xxh32_intdigest(g.encode()) for g in grams), dtype=np.uint64, count=len(grams))


class MinHasher:
    """num_perm universal hashes (a*x + b) mod p with p = 2^31-1, seeded, so signatures are
    reproducible. With a, b and x below p, a*x + b fits uint64 and the modulus wraps many times,
    which is what makes the permutations independent of x's order."""

    def __init__(self, num_perm: int = 64, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.num_perm = num_perm
        self._a = rng.integers(1, _PRIME, size=(num_perm, 1), dtype=np.uint64)
        self._b = rng.integers(0, _PRIME, size=(num_perm, 1), dtype=np.uint64)

    def signature(self, hashes: np.ndarray) -> bytes:
        """The signature as bytes: compact to ship through a shuffle, sliceable into bands."""
        x = hashes[np.newaxis, :] % np.uint64(_PRIME)
        values = (self._a * x + self._b) % np.uint64(_PRIME)
        return values.min(axis=1).astype(np.uint32).tobytes()


def estimated_jaccard(a: bytes, b: bytes) -> float:
    return float(np.mean(np.frombuffer(a, dtype=np.uint32) == np.frombuffer(b, dtype=np.uint32)))


def bands(signature: bytes, count: int) -> list[bytes]:
    width = len(signature) // count
    return [signature[i * width : (i + 1) * width] for i in range(count)]


# --- redaction ----------------------------------------------------------------------------------

# A PEM private key: a whole block, or what a scrolled or cut screen shows of it. Applied to whole
# texts (it spans lines), only when "-----" occurs.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:\n[A-Za-z0-9+/=:, -]*(?=\n|$))*"
    r"|(?:^[A-Za-z0-9+/=]{16,}\n)+-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    re.MULTILINE,
)
# Single-line patterns, applied per distinct line and only behind the cheap _MAY_HOLD gate.
_OWN_PATTERNS = re.compile(
    r"(?P<aws_access_key>\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b)"
    r"|(?P<github_token>\bgh[pousr]_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b)"
    r"|(?P<email>\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b)"
    r"|(?P<ipv4>(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d))"
    r"|(?P<ipv6>(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:.]))"
)
_MAY_HOLD = re.compile(r"@|\d\.\d|:[0-9A-Fa-f]{0,4}:|A[KSBC3][IAC]|gh[pousr]_|github_pat_")
# Lines worth handing to detect-secrets (~50-100 us a line with all plugins), matched against the
# lower-cased line: a keyword its keyword/auth plugins look for, credentials in a URL, or a long
# token-like run.
_SUSPECT = re.compile(
    r"secret|passw|pwd\s*[=:]|token|api_?key|apikey|auth|bearer|credential|private|access_?key|accountkey"
    r"|://[^\s/@]+@|[a-z0-9+=_-]{20,}|[\"'][a-z0-9+/=_-]{16,}"
)


# Addresses that identify no one outside the sandbox: private (RFC 1918, unique-local), link-local,
# loopback, unspecified. Kept, because logs and configs full of them are realistic content.
_LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7", "fe80::/10")
)


@functools.lru_cache(maxsize=4096)
def _keep_ip(kind: str, text: str) -> bool:
    """Local and malformed addresses (version strings, times, C++ `a::b`) are not personal data."""
    if kind == "ipv6" and not any(c.isdigit() for c in text):
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return True
    if address.is_loopback or address.is_unspecified:
        return True
    return any(address.version == net.version and address in net for net in _LOCAL_NETWORKS)


Detector = Callable[[str], Iterable[tuple[str, str]]]
# (kind, value, whether the value must stand alone): our patterns match whole tokens already;
# a detector's value ("hunter2") must not be replaced inside longer words.
Finding = tuple[str, str, bool]


class SecretFinder:
    """The secrets in one line, as findings longest first. A pure function of the line, so it is
    memoised across trajectories (successive screens, and trajectories of one task, repeat most
    lines); the memo is cleared when it reaches `memo_lines` to bound memory.

    `detector` (optional) maps a suspect line to (kind, value) findings, e.g. detect-secrets.
    """

    def __init__(self, detector: Detector | None = None, memo_lines: int = 100_000) -> None:
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
        if _MAY_HOLD.search(line):
            for match in _OWN_PATTERNS.finditer(line):
                kind, value = match.lastgroup or "secret", match.group()
                if not (kind in ("ipv4", "ipv6") and _keep_ip(kind, value)):
                    findings.setdefault(value, (kind, value, False))
        if self._detector is not None and _SUSPECT.search(line.lower()):
            for kind, value in sorted(set(self._detector(line))):
                if len(value) >= 4 and value in line:
                    findings.setdefault(value, (kind, value, True))
        # Longest first, so a value that contains another is replaced whole.
        return tuple(sorted(findings.values(), key=lambda f: (-len(f[1]), f)))


class Redactor:
    """Replaces secrets with placeholders `<REDACTED:kind:n>`, one per distinct value: the same
    value gets the same placeholder everywhere this redactor is used (one trajectory), numbered per
    kind in a deterministic order, so a redacted trajectory stays self-consistent.
    """

    def __init__(self, finder: SecretFinder | None = None) -> None:
        self._finder = finder or SecretFinder()
        self._placeholders: dict[str, str] = {}
        self._per_kind: dict[str, int] = {}
        self._lines: dict[str, str] = {}

    @property
    def counts(self) -> dict[str, int]:
        """Distinct values redacted, by kind."""
        return dict(self._per_kind)

    def redact(self, text: str) -> str:
        """`text` with secrets replaced; the very same object when it holds none."""
        if not text:
            return text
        original = text
        if "-----" in text:
            text = _PRIVATE_KEY.sub(lambda m: self._placeholder("private_key", m.group()), text)
        lines = text.split("\n")
        changed = False
        for i, line in enumerate(lines):
            done = self._lines.get(line)
            if done is None:
                redacted = self._redact_line(line)
                # "" marks a line without secrets (no redacted line is empty).
                done = self._lines[line] = "" if redacted == line else redacted
            if done:
                lines[i], changed = done, True
        if changed:
            return "\n".join(lines)
        return original if text == original else text

    def _redact_line(self, line: str) -> str:
        for kind, value, alone in self._finder(line):
            if value not in line:
                continue  # part of a longer value replaced already
            if alone:
                pattern = rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])"
                line = re.sub(pattern, lambda _, k=kind, v=value: self._placeholder(k, v), line)
            else:
                line = line.replace(value, self._placeholder(kind, value))
        return line

    def _placeholder(self, kind: str, value: str) -> str:
        found = self._placeholders.get(value)
        if found is None:
            n = self._per_kind.get(kind, 0) + 1
            self._per_kind[kind] = n
            found = self._placeholders[value] = f"<REDACTED:{kind}:{n}>"
        return found


def kind_slug(secret_type: str) -> str:
    """detect-secrets' "AWS Access Key" -> "aws_access_key"."""
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")
