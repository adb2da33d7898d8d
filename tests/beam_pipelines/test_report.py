from __future__ import annotations

import json

import apache_beam as beam

from beam_pipelines.dead_letter import count
from beam_pipelines.stages.report import render_markdown, stage_counters, write_report
from tests.beam_pipelines.conftest import pipeline


def _counted(x: int) -> int:
    count("write", "sft_tokens", x)
    count("read", "trajectories")
    return x


def test_report_from_the_metrics_of_a_finished_run(tmp_path):
    p = pipeline()
    _ = p | beam.Create([1, 2, 3]) | beam.Map(_counted)
    result = p.run()
    result.wait_until_finish()
    assert stage_counters(result) == {"read": {"trajectories": 3}, "write": {"sft_tokens": 6}}

    manifest = {
        "config": {"seq_len": 8},
        "totals": {"sft": {"train/terminal": {"files": 1, "documents": 3, "tokens": 6}}},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    report, markdown = write_report(str(tmp_path), result)
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert (tmp_path / "report.md").read_text() == markdown == render_markdown(report)
    assert list(report["stages"]) == ["read", "write"]  # pipeline order, not alphabetical by accident
    assert "| write | sft_tokens | 6 |" in markdown and "| sft | train/terminal | 1 | 3 | 6 |" in markdown


def test_the_markdown_names_the_origins_and_licences_of_the_trajectories():
    sources = {"captured": 3, "dataset.nebius/SWE-agent-trajectories": 5, "license.CC-BY-4.0": 5}
    report = {"stages": {"validate": {"valid": 8}, "sources": sources}, "outputs": {}}
    markdown = render_markdown(report)
    assert "## Sources" in markdown
    assert "| captured by our collectors | 3 |" in markdown
    assert "| dataset nebius/SWE-agent-trajectories | 5 |" in markdown
    assert "| licence CC-BY-4.0 | 5 |" in markdown
