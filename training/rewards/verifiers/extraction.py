"""Strict extraction: the reply is one optional `<think>` block, then exactly one closed
`<predicted_observation>` block, with nothing but whitespace around them.

The public evaluator's reading (schemas.render.parse_prediction) is lenient: it drops every `<think>`
block, keeps the last tagged block and falls back to the whole reply. Fidelity scores replies that way,
to stay comparable with published numbers; a reward must not pay for a reply that only a lenient reader
understands, so this reader refuses each of those forms by name.
"""

from __future__ import annotations

import re

from schemas.render import CLOSE_TAG, OPEN_TAG, extract_prediction
from training.rewards.verifiers.verdict import Failure

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_LEADING_THINK = re.compile(r"\s*<think>.*?</think>", re.DOTALL)

CHECKS = {
    "extraction.no_block": f"the reply has no {OPEN_TAG} block",
    "extraction.unclosed": f"the {OPEN_TAG} block is not closed with {CLOSE_TAG}",
    "extraction.multiple_blocks": f"more than one {OPEN_TAG} block (or a stray tag)",
    "extraction.text_outside": "text other than whitespace before or after the blocks",
    "extraction.think_after_block": "a <think> block after (or inside) the observation block",
    "extraction.think_malformed": "a <think> block that is not closed, or more than one before the block",
}


def _think_failures(before: str) -> list[Failure]:
    """Think tags left before the block once the leading `<think>` block is taken away."""
    if THINK_OPEN not in before and THINK_CLOSE not in before:
        return []
    if THINK_CLOSE not in before:
        return [Failure("extraction.think_malformed", "a <think> block is never closed")]
    reason = "a second <think> block, or one that does not open the reply"
    return [Failure("extraction.think_malformed", reason)]


def extract_strict(reply: str) -> tuple[str | None, list[Failure]]:
    """(the block's observation, the extraction checks that failed). The observation is what the public
    evaluator reads from the reply's last closed block (one newline trimmed on each side), returned
    even when a check failed so later checks can still say what else is wrong; None with no closed block."""
    leading = _LEADING_THINK.match(reply)
    body = reply[leading.end() :] if leading else reply
    start, end = body.find(OPEN_TAG), body.find(CLOSE_TAG)
    content = extract_prediction(reply)
    if start < 0:
        failures = _think_failures(body)
        return content, [*failures, Failure("extraction.no_block", f"no {OPEN_TAG} tag in the reply")]
    if body.count(OPEN_TAG) > 1 or body.count(CLOSE_TAG) > 1:
        blocks = max(body.count(OPEN_TAG), body.count(CLOSE_TAG))
        reason = f"{blocks} observation tags where one block is allowed"
        return content, [Failure("extraction.multiple_blocks", reason)]
    if end < start:
        return content, [Failure("extraction.unclosed", f"{OPEN_TAG} is never followed by {CLOSE_TAG}")]
    before, block, after = body[:start], body[start + len(OPEN_TAG) : end], body[end + len(CLOSE_TAG) :]
    failures = _think_failures(before)
    if THINK_OPEN in block or THINK_OPEN in after or THINK_CLOSE in after:
        failures.append(Failure("extraction.think_after_block", "reasoning must come before the observation"))
    outside = re.sub(r"<think>.*?(?:</think>|\Z)|</?think>", "", before + "\n" + after, flags=re.DOTALL)
    if outside.strip():
        shown = " ".join(outside.split())[:60]
        failures.append(Failure("extraction.text_outside", f"text outside the blocks: {shown!r}"))
    return content, failures
