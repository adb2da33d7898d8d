"""Rule verifiers: a binary verdict on a world model's reply for one turn, with the reasons it failed.

They are the anchor of the RL reward and the `verified` column of the fidelity report. Unlike a judge
they are cheap, deterministic and hard to game; unlike the fidelity metrics they say yes or no. A reply
passes when all four hold:

1. strict extraction (extraction.py): one optional `<think>` block, then exactly one closed
   `<predicted_observation>` block, nothing else but whitespace;
2. the domain's format parses (formats.py, the one definition of format-valid that the fidelity metric
   `format_valid` also uses): terminal.py, tools.py (mcp, swe), trees.py (web, os, android), search.py;
3. content the noise floor says is deterministic agrees with the real observation (deterministic.py),
   with a conservative line rule where no noise floor was measured;
4. no commentary about the simulation and no self-evaluation inside the block (commentary.py).

`CHECKS` names every check a `Failure` can carry, with what it means.

    from training.rewards.verifiers import verify
    verdict = verify("terminal", reply, real_screen, template)
    reward = float(verdict.ok); why = verdict.failures

`python -m training.rewards.verifiers PREDICTIONS.jsonl` checks a file of replies (see __main__.py).
"""

from __future__ import annotations

from training.rewards.verifiers import (
    commentary,
    deterministic,
    extraction,
    formats,
    search,
    terminal,
    tools,
    trees,
)
from training.rewards.verifiers.formats import format_failures, format_valid
from training.rewards.verifiers.verdict import Failure, Verdict
from training.rewards.verifiers.verifier import verify

CHECKS: dict[str, str] = {
    **extraction.CHECKS,
    **formats.CHECKS,
    **terminal.CHECKS,
    **tools.CHECKS,
    **trees.CHECKS,
    **search.CHECKS,
    **deterministic.CHECKS,
    **commentary.CHECKS,
}

__all__ = ["CHECKS", "Failure", "Verdict", "format_failures", "format_valid", "verify"]
