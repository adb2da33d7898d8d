"""Redaction benchmark: what the redact stage costs per observation and what it replaces.

Input: the real terminal recordings of tests/beam_pipelines/fixtures/terminal_run, expanded into
VARIANTS consistent rewrites each (benchmarks/corpus_data.derive; its digit rewriting turns some
loopback addresses into public ones, which are then redacted). Each gets ordinary output with a
commit id, a UUID, a checksum and private addresses; one in PLANT_EVERY also an `export` of a
password, its `echo`, and an AWS credentials file. All in one process; CPU time of that process
(robust to other load on the machine):

- ours: `redact_all` (both passes over every field, own rules plus detect-secrets behind the
  prefilters, one memo shared across trajectories as in a worker);
- baseline: detect-secrets' plugins alone on every line of every observation, the cost of scanning
  without a prefilter or memo;
- ratio: ours / baseline CPU seconds (below 1: ours is faster), best of three runs each.

It also reports the share of characters replaced, by kind, and checks that no planted secret is
left and that the git SHAs, UUIDs and private addresses of the input are all still there.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
import uuid
from pathlib import Path

from beam_pipelines.redaction import Redactor
from beam_pipelines.stages.redact import SCAN_NAME, detect_secrets_plugins, redact_all, secret_finder
from benchmarks.corpus_data import derive, vocabulary
from schemas import Trajectory, read_trajectories

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"
VARIANTS = 25
PLANT_EVERY = 10
RUNS = 3
PASSWORD = "Vt9#qLm2!xRw7-Kp"
AWS_SECRET = "Lq8vN2xR5tY7wB3zC6mK9pD4fH1jS0gAeUiOoQrW"
KEPT = re.compile(
    r"\b[0-9a-f]{40}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b[0-9a-f]{64}\b|\b10(?:\.\d{1,3}){3}\b|\b192\.168(?:\.\d{1,3}){2}\b|2\.4\.61\.271"
)


def _ordinary(n: int) -> str:
    """Output a world model must see as it is: a commit id, a UUID, a checksum, private addresses."""
    sha = hashlib.sha1(str(n).encode()).hexdigest()
    return (
        f"\n$ git log -1 --format=%H\n{sha}\nrequest {uuid.uuid5(uuid.NAMESPACE_DNS, str(n))} done"
        f"\n{hashlib.sha256(sha.encode()).hexdigest()}  build.tar\ninet 10.0.{n % 250}.5 via 192.168.1.20"
        "\nServer: Apache/2.4.61.271"
    )


def _plant(t: Trajectory) -> None:
    t.steps[0].observation.text += f"\n$ export DB_PASSWORD='{PASSWORD}'\n$ echo $DB_PASSWORD\n{PASSWORD}"
    t.steps[
        -1
    ].observation.text += f"\n$ cat ~/.aws/credentials\n[default]\naws_secret_access_key = {AWS_SECRET}"


def trajectories() -> list[Trajectory]:
    real = sorted(read_trajectories(str(FIXTURE)), key=lambda t: t.trajectory_id)
    vocab = vocabulary(real)
    out = []
    for v in range(VARIANTS):
        for t in real:
            derived = derive(t, v + 1, vocab)  # a copy, even of the first variant
            derived.steps[-1].observation.text += _ordinary(len(out))
            if len(out) % PLANT_EVERY == 0:
                _plant(derived)
            out.append(derived)
    return out


def _ours(data: list[Trajectory], plugins: list) -> tuple[float, list[Trajectory], dict]:
    finder = secret_finder(plugins)
    started = time.process_time()
    out, chars, total = [], {}, 0
    for t in data:
        redactor = Redactor(finder)
        out.append(redact_all(t, redactor))
        total += redactor.characters
        for kind, n in redactor.chars.items():
            chars[kind] = chars.get(kind, 0) + n
    return time.process_time() - started, out, {"chars_total": total, "chars": chars}


def _baseline(data: list[Trajectory], plugins: list) -> float:
    started = time.process_time()
    for t in data:
        for obs in (t.initial_observation, *(s.observation for s in t.steps)):
            for line in obs.text.split("\n"):
                for plugin in plugins:
                    list(plugin.analyze_line(filename=SCAN_NAME, line=line))
    return time.process_time() - started


def _texts(t: Trajectory) -> str:
    return json.dumps([t.initial_observation.text, *(s.observation.text for s in t.steps)])


def redaction_benchmark() -> dict:
    data = trajectories()
    plugins = detect_secrets_plugins()
    observations = sum(1 + len(t.steps) for t in data)
    ours = min((_ours(data, plugins) for _ in range(RUNS)), key=lambda r: r[0])
    baseline = min(_baseline(data, plugins) for _ in range(RUNS))
    seconds, redacted, figures = ours
    before = "".join(map(_texts, data))
    after = "".join(map(_texts, redacted))
    kept_in, kept_out = set(KEPT.findall(before)), set(KEPT.findall(after))
    total = figures["chars_total"]
    return {
        "trajectories": len(data),
        "observations": observations,
        "planted_trajectories": (len(data) + PLANT_EVERY - 1) // PLANT_EVERY,
        "ours_seconds": seconds,
        "ours_us_per_observation": seconds / observations * 1e6,
        "baseline_seconds": baseline,
        "baseline_us_per_observation": baseline / observations * 1e6,
        "ours_over_baseline": seconds / baseline,
        "chars_total": total,
        "chars_by_kind": dict(sorted(figures["chars"].items())),
        "share_by_kind": {k: n / total for k, n in sorted(figures["chars"].items())},
        "share": sum(figures["chars"].values()) / total,
        "planted_left": sum(after.count(s) for s in (PASSWORD, AWS_SECRET)),
        "ids_and_private_addresses": {"in_input": len(kept_in), "missing_in_output": len(kept_in - kept_out)},
    }


def markdown_lines(r: dict) -> list[str]:
    """The body of benchmarks/results/redaction.md."""
    kept = r["ids_and_private_addresses"]
    lines = [
        f"{r['trajectories']:,} trajectories, {r['observations']:,} observations (real recordings rewritten, "
        f"see benchmarks/redaction.py); {r['planted_trajectories']} with planted secrets. One core.",
        "",
        "| run | CPU seconds | CPU us per observation |",
        "|---|---:|---:|",
        f"| ours: both passes over every field, own rules + detect-secrets behind the prefilters "
        f"| {r['ours_seconds']:.2f} | {r['ours_us_per_observation']:.0f} |",
        f"| baseline: detect-secrets' plugins on every observation line | {r['baseline_seconds']:.2f} "
        f"| {r['baseline_us_per_observation']:.0f} |",
        "",
        f"- ours / baseline: {r['ours_over_baseline']:.3f}",
        f"- characters replaced: {r['share']:.4%} of {r['chars_total']:,}",
        *(f"  - {kind}: {n:,} ({r['share_by_kind'][kind]:.4%})" for kind, n in r["chars_by_kind"].items()),
        f"- planted secret occurrences left: {r['planted_left']}",
        f"- git SHAs, UUIDs and private addresses in the input: {kept['in_input']}, "
        f"missing from the output: {kept['missing_in_output']}",
    ]
    return lines


if __name__ == "__main__":
    json.dump(redaction_benchmark(), sys.stdout, indent=2)  # `benchmarks.run redaction` writes results
