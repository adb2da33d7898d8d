"""The tool domains' forms: MCP results as JSON, SWE tool output with its status line, diff or listing.

MCP (sandboxes/mcp/README.md): where the real turn was a result, a JSON object of a result's form,
`content` (a list) and `isError` (a boolean), or an `error` with a code and a message. Where it was
other JSON, JSON; where it was text (the first observation, a runner's error), any text.
SWE: a bash result ends with `[exit status: N]` (or `[timed out after N s]`), an edit answers with a
unified diff, a read numbers its lines as `cat -n` does, wherever the real turn did.
"""

from __future__ import annotations

from training.observations.parsers import is_diff, is_numbered_listing, parse_json, result_kind, swe_status
from training.rewards.verifiers.verdict import Failure

CHECKS = {
    "mcp.json": "the real result was JSON and the prediction is not JSON",
    "mcp.result_shape": "JSON that is not an MCP result: content list and isError, or error code and message",
    "swe.exit_status": "the real bash output ended with its status line and the prediction does not",
    "swe.diff": "the real edit answered with a unified diff and the prediction is no diff",
    "swe.listing": "the real read numbered its lines and the prediction does not",
}


def _is_json(text: str) -> bool:
    return parse_json(text) is not None or text.strip() == "null"


def mcp_failures(prediction: str, reference: str) -> list[Failure]:
    if result_kind(parse_json(reference)) is None:
        if _is_json(reference) and not _is_json(prediction):
            return [Failure("mcp.json", "the prediction does not parse as JSON")]
        return []
    if not _is_json(prediction):
        return [Failure("mcp.json", "the prediction does not parse as JSON")]
    value = parse_json(prediction)
    kind = result_kind(value)
    if kind == "protocol_error":
        if {"code", "message"} <= set(value["error"]):
            return []
        return [Failure("mcp.result_shape", "a protocol error needs both `code` and `message`")]
    if kind is not None and isinstance(value.get("content"), list) and isinstance(value.get("isError"), bool):
        return []
    return [Failure("mcp.result_shape", "a result needs a `content` list and a boolean `isError`")]


def swe_failures(prediction: str, reference: str) -> list[Failure]:
    if swe_status(reference) != (None, False) and swe_status(prediction) == (None, False):
        return [Failure("swe.exit_status", "no `[exit status: N]` (or timed-out) line at the end")]
    if is_diff(reference) and not is_diff(prediction):
        return [Failure("swe.diff", "the edit's answer does not start as a unified diff")]
    if is_numbered_listing(reference) and not is_numbered_listing(prediction):
        return [Failure("swe.listing", "the file is not shown with `cat -n` line numbers")]
    return []
