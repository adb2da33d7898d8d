"""Latency summaries shared by the step-latency benchmarks."""

from __future__ import annotations

import statistics


def latency_ms(samples: list[float]) -> dict:
    """Median and p95 in milliseconds of samples in seconds, with their count."""
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1e3,
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1e3,
        "n": len(ordered),
    }
