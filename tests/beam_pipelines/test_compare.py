"""beam_pipelines.compare on real corpus builds: FnApiRunner against Prism, and planted differences."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beam_pipelines import compare
from beam_pipelines.build_corpus import main as build_corpus
from beam_pipelines.options import prism_binary

from .conftest import FIXTURE


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> tuple[Path, Path]:
    """The recorded fixture built twice: FnApiRunner (the default) and Prism (LOOPBACK workers)."""
    root = tmp_path_factory.mktemp("compare")
    common = ["--input", str(FIXTURE), "--split-ratios", "0.6,0.2,0.2"]
    assert build_corpus([*common, "--output", str(root / "fnapi")]) == 0
    prism = ["--runner=PrismRunner", f"--prism_location={prism_binary()}", "--environment_type=LOOPBACK"]
    assert build_corpus([*common, "--output", str(root / "prism"), *prism]) == 0
    return root / "fnapi", root / "prism"


def test_prism_build_equals_fnapi_build(builds):
    fnapi, prism = builds
    assert compare.compare_outputs(fnapi, prism) == []
    assert compare.main([str(fnapi), str(prism)]) == 0


def test_a_changed_record_a_missing_file_and_a_changed_row_are_reported(builds, tmp_path):
    fnapi, _ = builds
    changed = tmp_path / "changed"
    shutil.copytree(fnapi, changed)
    rl = sorted(changed.glob("rl/**/*.jsonl"))
    lines = [line for line in rl[0].read_text().splitlines() if line]
    record = json.loads(lines[0])
    record["prompt"] = "something else"
    rl[0].write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    removed = sorted(changed.glob("cpt/**/*.parquet"))[0]
    removed.unlink()
    sft = sorted(changed.glob("sft/**/*.parquet"))[0]
    table = pq.read_table(sft)
    tokens = table.column("input_ids").to_pylist()
    tokens[0] = [t + 1 for t in tokens[0]]
    pq.write_table(table.set_column(table.schema.get_field_index("input_ids"), "input_ids", [tokens]), sft)

    differences = compare.compare_outputs(fnapi, changed)
    text = "\n".join(differences)
    assert f"only in A: {removed.relative_to(changed)}" in differences
    assert f"{rl[0].relative_to(changed)}: 1 records only in A, 1 only in B" in text
    assert f"{sft.relative_to(changed)}: 1 rows only in A, 1 only in B" in text
    assert compare.main([str(fnapi), str(changed)]) == 1


def test_reordered_lines_and_rows_and_run_stamps_are_equal(builds, tmp_path):
    fnapi, _ = builds
    shuffled = tmp_path / "shuffled"
    shutil.copytree(fnapi, shuffled)
    rl = max(shuffled.glob("rl/**/*.jsonl"), key=lambda p: p.stat().st_size)
    lines = rl.read_text().splitlines()
    assert len(lines) > 1
    rl.write_text("\n".join(reversed(lines)) + "\n")
    sft = sorted(shuffled.glob("sft/**/*.parquet"))[0]
    table = pq.read_table(sft)
    pq.write_table(table.take(pa.array(list(reversed(range(table.num_rows))))), sft, row_group_size=1)
    manifest = json.loads((shuffled / "manifest.json").read_text())
    manifest["seconds"] = 12.5
    (shuffled / "manifest.json").write_text(json.dumps(manifest))
    assert compare.compare_outputs(fnapi, shuffled) == []


def test_a_missing_directory_is_a_clear_error(tmp_path, capsys):
    assert compare.main([str(tmp_path / "nope"), str(tmp_path)]) == 2
    assert "is not a directory" in capsys.readouterr().err
