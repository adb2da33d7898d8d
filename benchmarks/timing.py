"""What the benchmarks share: latency summaries, and a result shown when a benchmark runs as a script."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable


def latency_ms(samples: list[float]) -> dict:
    """Median and p95 in milliseconds of samples in seconds, with their count."""
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1e3,
        "n": len(ordered),
    }


def show(result: dict, markdown_lines: Callable[[dict], list[str]], indent: int = 2) -> None:
    """A benchmark run as a script: its result as JSON on stdout, then its Markdown table."""
    print(json.dumps(result, indent=indent))
    print("\n".join(markdown_lines(result)))
