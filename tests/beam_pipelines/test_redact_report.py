"""The report's redaction figures, from the redact stage's counters of a finished run."""

from __future__ import annotations

import apache_beam as beam

from beam_pipelines.stages.redact import RedactSecrets
from beam_pipelines.stages.report import build_report, render_markdown, stage_counters
from tests.beam_pipelines.conftest import pipeline, variant

PASSWORD = "Vt9#qLm2!xRw7-Kp"


def _plant(t) -> None:
    t.steps[0].observation.text += f"\n$ export DB_PASSWORD='{PASSWORD}'\n$ echo $DB_PASSWORD\n{PASSWORD}"
    t.steps[1].observation.text += "\nfrom 34.117.59.81 via 10.0.0.5"


def test_characters_redacted_by_kind_and_their_share(recorded):
    p = pipeline()
    _ = p | beam.Create([*recorded, variant(recorded[0], "planted", _plant)]) | RedactSecrets()
    result = p.run()
    result.wait_until_finish()
    report = build_report(stage_counters(result), {})
    redaction = report["redaction"]

    def chars(t) -> int:
        texts = [t.task.instruction, t.initial_observation.text, t.outcome.error, t.environment.image]
        texts += [*t.task.setup, *(s for step in t.steps for s in (step.action.text, step.observation.text))]
        texts += [str(v) for v in t.environment.config.values() if isinstance(v, str)]
        texts += [a for step in t.steps for a in step.action.arguments.values() if isinstance(a, str)]
        return sum(map(len, texts))

    planted = variant(recorded[0], "planted", _plant)
    assert redaction["chars_total"] >= sum(chars(t) for t in [*recorded, planted])
    assert redaction["by_kind"] == {
        "ipv4": {"values": 1, "chars": 12, "share": 12 / redaction["chars_total"]},
        "password": {
            "values": 1,
            "chars": 2 * len(PASSWORD),
            "share": 2 * len(PASSWORD) / redaction["chars_total"],
        },
    }
    assert redaction["chars_redacted"] == 12 + 2 * len(PASSWORD)
    assert redaction["share"] == redaction["chars_redacted"] / redaction["chars_total"]
    markdown = render_markdown(report)
    assert "## Redaction" in markdown
    assert f"| password | 1 | {2 * len(PASSWORD)} |" in markdown and "| ipv4 | 1 | 12 |" in markdown


def test_a_run_without_the_redact_stage_has_empty_figures():
    report = build_report({"read": {"trajectories": 3}}, {})
    assert report["redaction"] == {"chars_total": 0, "chars_redacted": 0, "share": 0.0, "by_kind": {}}
    assert "## Redaction" not in render_markdown(report)
