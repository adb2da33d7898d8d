"""Per-turn fidelity metrics (pure): how close a predicted observation is to the real one.

Volatile content is handled through a `Template` made by the noise floor (noise_floor.py): the real
observation cut into stable spans, which a prediction must reproduce exactly, and volatile spans
(timestamps, PIDs, temp names seen to differ between real runs), which it must only fill with text of
the same character-class form and of a bounded length. Without a noise floor every span is stable.

The content scored is what the public evaluator reads from a reply (`schemas.render.parse_prediction`);
whether the reply used the `<predicted_observation>` format is its own column (`tagged`), and
`format_valid` needs both the tags and the domain's rule verifier.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from rapidfuzz.distance import Levenshtein

from training.fidelity.android import android_valid, is_android_text
from training.fidelity.desktop import desktop_valid, is_desktop_text
from training.fidelity.domain_metrics import DOMAIN_METRICS, domain_scores
from training.fidelity.observations import (
    is_diff,
    is_numbered_listing,
    is_tree_node,
    parse_json,
    parse_results,
    parse_web,
    swe_status,
)
from training.fidelity.shapes import shape_pattern
from training.fidelity.tool_metrics import result_kind

# user@host:dir$ / root@box:/# / plain "$ " "# " "> " "% " prompts, as the last screen line.
_PROMPT_RE = re.compile(r"^(?:\(\S+\)\s*)?(?:\S+@\S+[:\s]\S*\s?)?[$#%>]\s*$")


@dataclass
class Span:
    text: str  # the recorded real text
    volatile: bool = False
    variants: list[str] = field(default_factory=list)  # the other real runs' text for this span

    def max_chars(self) -> int:
        """The most a prediction may put in this span: twice the longest real value, plus a little. A span
        is volatile because real runs differed there, not licence to hold any text: unbounded, one
        inserted line would let a prediction hide whole screens of invented output in it."""
        return 2 * max(len(v) for v in [self.text, *self.variants]) + 8

    def form(self) -> str:
        """One alternative per distinct real form, so a prediction needs the form of some real run."""
        shapes = sorted({shape_pattern(v) for v in [self.text, *self.variants]})
        return "(?:" + "|".join(shapes) + ")"


@dataclass
class Template:
    spans: list[Span]
    # The other real runs' whole texts the spans were found with (empty without a noise floor): the
    # structured metrics find volatile values in them (JSON values, output lines).
    others: list[str] = field(default_factory=list)

    @classmethod
    def stable(cls, text: str) -> Template:
        return cls([Span(text)])

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @property
    def volatile_spans(self) -> list[Span]:
        return [s for s in self.spans if s.volatile]

    @property
    def volatile_share(self) -> float:
        """Share of the real text's characters inside volatile spans (0 for an empty text)."""
        total = len(self.text)
        return sum(len(s.text) for s in self.volatile_spans) / total if total else 0.0


@dataclass
class TurnScore:
    exact: bool  # the whole text equals the real one
    stable_exact: bool  # every stable span reproduced exactly (volatile spans may hold anything)
    # Share of volatile spans filled with a form some real run had; None when there are none, or when
    # the stable content did not match (then the volatile spans cannot be located in the prediction).
    volatile_form: float | None
    edit_similarity: float  # 1 - normalised Levenshtein distance
    line_precision: float
    line_recall: float
    line_f1: float
    tagged: bool  # the reply held a <predicted_observation> block (the public format)
    format_valid: bool  # tagged, and the content passes the domain's rule verifier
    # The domain's own metrics (domain_metrics.py: tree lines, result lists), flattened into as_dict.
    domain_metrics: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict:
        row = asdict(self)
        own = row.pop("domain_metrics")
        return {**row, **own}


def _match_volatile(template: Template, prediction: str) -> list[str] | None:
    """The prediction's text in each volatile span when its stable spans all match, else None."""
    spans = template.spans
    if not template.volatile_spans:
        return [] if prediction == template.text else None
    multiline = any("\n" in s.text or any("\n" in v for v in s.variants) for s in spans if s.volatile)
    if not multiline:
        # Stable text holds every newline, so lines correspond one to one: matching line by line keeps
        # each regex small and its backtracking bounded by one line.
        return _match_by_line(spans, prediction)
    pattern = "".join(f"(.{{0,{s.max_chars()}}}?)" if s.volatile else re.escape(s.text) for s in spans)
    found = re.fullmatch(pattern, prediction, re.DOTALL)
    return list(found.groups()) if found else None


def _match_by_line(spans: Sequence[Span], prediction: str) -> list[str] | None:
    lines: list[list[Span]] = [[]]
    for span in spans:
        if span.volatile:
            lines[-1].append(span)
            continue
        parts = span.text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append(Span(part))
    predicted = prediction.split("\n")
    if len(predicted) != len(lines):
        return None
    captured: list[str] = []
    for line_spans, text in zip(lines, predicted, strict=True):
        pattern = "".join(
            f"([^\n]{{0,{s.max_chars()}}}?)" if s.volatile else re.escape(s.text) for s in line_spans
        )
        found = re.fullmatch(pattern, text)
        if found is None:
            return None
        captured.extend(found.groups())
    return captured


def line_prf(prediction: str, reference: str) -> tuple[float, float, float]:
    """Multiset overlap of lines (trailing spaces ignored): precision, recall, F1."""
    pred = Counter(line.rstrip() for line in prediction.split("\n"))
    ref = Counter(line.rstrip() for line in reference.split("\n"))
    common = sum((pred & ref).values())
    p = common / max(1, sum(pred.values()))
    r = common / max(1, sum(ref.values()))
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def looks_like_prompt(line: str) -> bool:
    return bool(_PROMPT_RE.match(line.strip()))


def _last_line(text: str) -> str:
    lines = [line for line in text.split("\n") if line.strip()]
    return lines[-1] if lines else ""


def _terminal_valid(prediction: str, reference: str) -> bool:
    # A prompt is due where the real screen ended on one; otherwise an interactive program holds
    # the screen and any non-empty screen is well formed.
    if looks_like_prompt(_last_line(reference)):
        return looks_like_prompt(_last_line(prediction))
    return bool(prediction.strip())


def _json_valid(prediction: str, reference: str) -> bool:
    try:
        json.loads(reference)
    except (ValueError, RecursionError):
        return bool(prediction.strip())  # a text tool result (an error message): any text
    try:
        json.loads(prediction)
    except (ValueError, RecursionError):
        return False
    return True


def _tree_valid(prediction: str, reference: str) -> bool:
    """XML trees must parse with the real root tag; indented trees must nest one level at a time."""
    if reference.lstrip().startswith("<"):
        try:
            return ET.fromstring(prediction).tag == ET.fromstring(reference).tag
        except ET.ParseError:
            return False
    lines = [line for line in prediction.split("\n") if line.strip()]
    if not lines:
        return False
    depths = [len(line) - len(line.lstrip(" ")) for line in lines]
    # The real tree's indentation step, else the prediction's own.
    real = [len(line) - len(line.lstrip(" ")) for line in reference.split("\n") if line.strip()]
    unit = min((d for d in real if d), default=0) or min((d for d in depths if d), default=1)
    if depths[0] != 0 or any(d % unit for d in depths):
        return False
    return all(b - a <= unit for a, b in zip(depths, depths[1:], strict=False))


def _web_valid(prediction: str, reference: str) -> bool:
    """The web sandbox's form: URL and Title header lines where the real page had them, then a tree
    whose lines are nodes (or the truncation marker), starting at depth 0 and nesting one tab at a time."""
    real, predicted = parse_web(reference), parse_web(prediction)
    if real.has_header and not (
        predicted.url and any(line.startswith("Title:") for line in prediction.split("\n"))
    ):
        return False
    if not predicted.tree:
        return not real.tree and bool(prediction.strip())
    depths = [len(line) - len(line.lstrip("\t")) for line in predicted.tree]
    if depths[0] != 0 or any(b - a > 1 for a, b in zip(depths, depths[1:], strict=False)):
        return False
    return all(is_tree_node(line.lstrip("\t")) or line.startswith("[... ") for line in predicted.tree)


def _search_valid(prediction: str, reference: str) -> bool:
    """Where the real turn listed results, numbered results with URLs, ranked one after another."""
    if not parse_results(reference):
        return bool(prediction.strip())
    results = parse_results(prediction)
    ranks = [r.rank for r in results]
    return (
        bool(results)
        and ranks == list(range(ranks[0], ranks[0] + len(ranks)))
        and all(r.url.startswith(("http://", "https://")) for r in results)
    )


def _mcp_valid(prediction: str, reference: str) -> bool:
    """Where the real turn was an MCP result, a JSON object of a result's form: `content` (a list) and
    `isError` (a boolean), or an `error` with a code and a message. Elsewhere (the first observation,
    a runner's error text), the JSON rule."""
    if result_kind(parse_json(reference)) is None:
        return _json_valid(prediction, reference)
    value = parse_json(prediction)
    kind = result_kind(value)
    if kind == "protocol_error":
        return {"code", "message"} <= set(value["error"])
    return (
        kind is not None and isinstance(value.get("content"), list) and isinstance(value.get("isError"), bool)
    )


def _swe_valid(prediction: str, reference: str) -> bool:
    """A bash result ends with its status line, an edit's diff is a diff, a file read numbers its
    lines, where the real turn did; anything else must not be empty."""
    if not prediction.strip():
        return False
    if swe_status(reference) != (None, False):
        return swe_status(prediction) != (None, False)
    if is_diff(reference):
        return is_diff(prediction)
    if is_numbered_listing(reference):
        return is_numbered_listing(prediction)
    return True


def _os_valid(prediction: str, reference: str) -> bool:
    """The desktop form (desktop.py) where the real turn had it; elsewhere the space-indented tree rule."""
    if is_desktop_text(reference):
        return desktop_valid(prediction, reference)
    return _tree_valid(prediction, reference)


def _android_valid(prediction: str, reference: str) -> bool:
    """The Android form (android.py) where the real turn had it; elsewhere the tree rule (XML or indented)."""
    if is_android_text(reference):
        return android_valid(prediction, reference)
    return _tree_valid(prediction, reference)


_VERIFIERS = {
    "terminal": _terminal_valid,
    "mcp": _mcp_valid,
    "swe": _swe_valid,
    "web": _web_valid,
    "os": _os_valid,
    "android": _android_valid,
    "search": _search_valid,
}


def format_valid(domain: str, content: str, reference: str) -> bool:
    """The domain's rule verifier on the content alone (the tags are checked by the caller)."""
    verifier = _VERIFIERS.get(domain)
    return verifier(content, reference) if verifier else bool(content.strip())


def score_turn(domain: str, content: str, template: Template, tagged: bool = True) -> TurnScore:
    """Score one predicted observation's `content` against the real one's template; `tagged` says
    whether the reply carried it in the public format (real observations and baselines always do)."""
    reference = template.text
    captured = _match_volatile(template, content)
    volatile = template.volatile_spans
    if not volatile or captured is None:
        form = None
    else:
        ok = sum(bool(re.fullmatch(s.form(), c)) for s, c in zip(volatile, captured, strict=True))
        form = ok / len(volatile)
    p, r, f1 = line_prf(content, reference)
    return TurnScore(
        exact=content == reference,
        stable_exact=captured is not None,
        volatile_form=form,
        edit_similarity=Levenshtein.normalized_similarity(content, reference),
        line_precision=p,
        line_recall=r,
        line_f1=f1,
        tagged=tagged,
        format_valid=tagged and format_valid(domain, content, reference),
        domain_metrics=domain_scores(domain, content, reference, template.others),
    )


def score_against(domain: str, content: str, templates: Sequence[Template], tagged: bool = True) -> dict:
    """The mean score over several templates of the same real turn (the noise floor's leave-one-out
    templates), so a prediction is judged exactly as each held-out real run is. Metrics that do not
    depend on the volatile spans come out the same for every template."""
    scores = [score_turn(domain, content, t, tagged).as_dict() for t in templates]
    out: dict = {}
    for name, first in scores[0].items():
        values = [s[name] for s in scores if s[name] is not None]
        if isinstance(first, bool) and all(v == first for v in values):
            out[name] = first
        else:
            out[name] = sum(float(v) for v in values) / len(values) if values else None
    return out


METRICS = (
    "exact",
    "stable_exact",
    "volatile_form",
    "edit_similarity",
    "line_precision",
    "line_recall",
    "line_f1",
    "tagged",
    "format_valid",
)


def mean_scores(rows: Iterable[dict]) -> dict[str, float | int | None]:
    """Means of every metric over rows of TurnScore dicts (None values skipped), plus `turns`; a
    domain's own metrics where rows carry them."""
    rows = list(rows)
    out: dict[str, float | int | None] = {"turns": len(rows)}
    own = [m for ms in DOMAIN_METRICS.values() for m in ms if any(m in r for r in rows)]
    for name in (*METRICS, *own):
        values = [float(r[name]) for r in rows if r.get(name) is not None]
        out[name] = sum(values) / len(values) if values else None
    return out


def aggregate(rows: Iterable[dict]) -> dict:
    """Rows carry `domain`, `turn_idx` and the metrics: means per domain, overall and by turn index."""
    rows = list(rows)
    by_domain: dict[str, list[dict]] = defaultdict(list)
    by_turn: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain"]].append(row)
        by_turn[int(row["turn_idx"])].append(row)
    return {
        "overall": mean_scores(rows),
        "by_domain": {d: mean_scores(rs) for d, rs in sorted(by_domain.items())},
        "by_turn": {str(k): mean_scores(rs) for k, rs in sorted(by_turn.items())},
    }
