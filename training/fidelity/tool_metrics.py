"""Metrics for tool results (pure): MCP results compared as JSON structure, SWE results on exit status,
output lines, diff lines and test counts. Forms as the sandboxes record them (see
training/observations/parsers.py). Volatility comes from the noise floor: `others` are other real
runs of the same turn, and what differs between them and the recording is only held to its form.

- mcp: `json_valid` (the prediction parses), `json_key_f1` (F1 of the leaf paths: which keys, at
  which places, hold values; a text content item holding JSON is compared as that JSON),
  `json_value_match` (share of the recording's stable leaves the prediction reproduces, type and
  value), `json_volatile_form` (share of its volatile leaves filled with a value of the same type and,
  for strings, the character-class form of some real run), `result_kind_match` (ok / tool error
  (`isError`) / protocol error (`error`) agree).
- swe: `exit_status_match` (the last line's `[exit status: N]` / `[timed out after N s]`, where the
  recording has one), `output_line_f1` (line F1 without that line; lines that differ between real
  runs compared by form), `diff_line_f1` (F1 of an edit diff's added and removed lines) and
  `test_counts_match` (the pytest or unittest summary counts, where the recording has a summary).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from training.fidelity.overlap import counter_f1, f1
from training.observations.parsers import is_diff, parse_json, result_kind, swe_status
from training.observations.shapes import shape_pattern

MCP_METRICS = ("json_valid", "json_key_f1", "json_value_match", "json_volatile_form", "result_kind_match")
SWE_METRICS = ("exit_status_match", "output_line_f1", "diff_line_f1", "test_counts_match")

Path = tuple[Any, ...]
MAX_DEPTH = 32
_EMBEDDED = "<json>"  # path step into a string that holds JSON (a text content item's payload)

_PYTEST_SUMMARY = re.compile(r"^=*\s*(?:\d+ [a-z]+(?:, )?)+ in \d+(?:\.\d+)?s\b|^=*\s*no tests ran in ")
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected)")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ")
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")
_PLURAL = {"error": "errors", "warning": "warnings"}


# --- MCP ----------------------------------------------------------------------------------------


def leaves(value: Any, path: Path = ()) -> dict[Path, Any]:
    """Every leaf of a JSON value by its path (keys and list indexes); empty maps and lists are leaves,
    and a string holding a JSON object or array is descended into. Below `MAX_DEPTH` levels a subtree
    is one leaf, its canonical JSON text (tool results are shallow; a model's output may not be)."""
    if len(path) >= MAX_DEPTH:
        return {path: _flat(value)}
    if isinstance(value, str) and value[:1] in ("{", "["):
        inner = parse_json(value)
        if isinstance(inner, (dict, list)):
            return leaves(inner, (*path, _EMBEDDED))
    if isinstance(value, dict) and value:
        return {p: v for k, item in value.items() for p, v in leaves(item, (*path, k)).items()}
    if isinstance(value, list) and value:
        return {p: v for i, item in enumerate(value) for p, v in leaves(item, (*path, i)).items()}
    return {path: value}


def _flat(value: Any) -> Any:
    if not isinstance(value, (dict, list)):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except RecursionError:
        return "<nested too deep>"


def _kind(value: Any) -> str:
    """A JSON value's type, numbers as one type (1 and 1.0 are the same JSON number)."""
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _same(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b


def volatile_paths(reference: Any, others: Sequence[str]) -> tuple[set[Path], dict[Path, list[Any]]]:
    """The recording's leaves whose value differs in (or is missing from) another real run of the same
    kind of result, with the values those runs had there. A run that answered another kind (a timeout
    where the recording has a result) says nothing about which values are volatile and is skipped."""
    ref = leaves(reference)
    volatile: set[Path] = set()
    values: dict[Path, list[Any]] = {}
    for text in others:
        other_value = parse_json(text)
        if result_kind(other_value) != result_kind(reference):
            continue
        other = leaves(other_value)
        for path, value in ref.items():
            if path not in other or not _same(other[path], value):
                volatile.add(path)
                if path in other:
                    values.setdefault(path, []).append(other[path])
    return volatile, values


def _same_form(predicted: Any, real_values: list[Any]) -> bool:
    if not any(_kind(predicted) == _kind(v) for v in real_values):
        return False
    if not isinstance(predicted, str):
        return True
    return any(isinstance(v, str) and re.fullmatch(shape_pattern(v), predicted) for v in real_values)


def mcp_scores(prediction: str, reference: str, others: Sequence[str] = ()) -> dict[str, float | None]:
    scores: dict[str, float | None] = dict.fromkeys(MCP_METRICS)
    real_value = parse_json(reference)
    if real_value is None and reference.strip() != "null":
        return scores  # the first observation or a runner's error text: no JSON to compare
    predicted_value = parse_json(prediction)
    valid = predicted_value is not None or prediction.strip() == "null"
    real, predicted = leaves(real_value), leaves(predicted_value) if valid else {}
    volatile, variants = volatile_paths(real_value, others)
    stable = [p for p in real if p not in volatile]
    common = len(real.keys() & predicted.keys())
    scores["json_valid"] = float(valid)
    scores["json_key_f1"] = f1(common, len(predicted), len(real)) if valid else 0.0
    if stable:
        scores["json_value_match"] = sum(
            p in predicted and _same(predicted[p], real[p]) for p in stable
        ) / len(stable)
    if volatile:
        scores["json_volatile_form"] = sum(
            p in predicted and _same_form(predicted[p], [real[p], *variants.get(p, [])]) for p in volatile
        ) / len(volatile)
    if result_kind(real_value) is not None:
        scores["result_kind_match"] = float(result_kind(predicted_value) == result_kind(real_value))
    return scores


# --- SWE ----------------------------------------------------------------------------------------


def _body_lines(text: str) -> list[str]:
    """The output lines without the status line, trailing blanks dropped, empty lines skipped."""
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    if lines and swe_status(lines[-1]) != (None, False):
        lines.pop()
    return lines


def _softened(lines: list[str], volatile_forms: set[str], stable: set[str]) -> Counter:
    """Lines as compared: a line that is not stable but has the form of a volatile real line counts as
    that form, so '4 passed in 0.05s' matches '4 passed in 0.03s' when real runs differed there."""
    out: Counter = Counter()
    for line in lines:
        if line not in stable and (shape := shape_pattern(line)) in volatile_forms:
            out[shape] += 1
        else:
            out[line] += 1
    return out


def _diff_lines(text: str) -> Counter:
    return Counter(
        line for line in text.split("\n") if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- "))
    )


def summary_counts(text: str) -> dict[str, int] | None:
    """The counts of the last pytest or unittest summary in `text`; None without a summary."""
    found: dict[str, int] | None = None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _PYTEST_SUMMARY.match(line.strip()):
            found = {}
            for n, outcome in _PYTEST_COUNT.findall(line):
                key = _PLURAL.get(outcome, outcome)
                found[key] = found.get(key, 0) + int(n)
        ran = _UNITTEST_RAN.match(line.strip())
        if ran:
            found = {"ran": int(ran.group(1))}
            for following in lines[i + 1 : i + 4]:
                result = _UNITTEST_RESULT.match(following.strip())
                if result:
                    found["ok"] = int(result.group(1) == "OK")
                    for part in (result.group(2) or "").split(","):
                        key, _, n = part.strip().partition("=")
                        if n.isdigit():
                            found[key] = int(n)
                    break
    return found


def swe_scores(prediction: str, reference: str, others: Sequence[str] = ()) -> dict[str, float | None]:
    scores: dict[str, float | None] = dict.fromkeys(SWE_METRICS)
    real_status = swe_status(reference)
    if real_status != (None, False):
        scores["exit_status_match"] = float(swe_status(prediction) == real_status)
    real_lines = _body_lines(reference)
    other_lines = [Counter(_body_lines(text)) for text in others]
    stable = {line for line in real_lines if all(line in lines for lines in other_lines)}
    forms = {shape_pattern(line) for line in real_lines if line not in stable}
    predicted = _softened(_body_lines(prediction), forms, stable)
    scores["output_line_f1"] = counter_f1(predicted, _softened(real_lines, forms, stable))
    if is_diff(reference):
        scores["diff_line_f1"] = counter_f1(_diff_lines(prediction), _diff_lines(reference))
    counts = summary_counts(reference)
    if counts is not None:
        scores["test_counts_match"] = float(summary_counts(prediction) == counts)
    return scores
