"""The shared import loop, with a small format of the test's own: resume, dead letters, limits, kills.

The driver, reader, writer and validation are the real ones; only the row -> episode mapping is the
test's (each real format has its own tests next to this file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.reading import InputError
from collectors.importers.run import import_rows
from schemas import read_trajectories
from schemas.records import Action, Environment, Observation, Outcome, Policy, Task


class EchoLog(Importer):
    """{"id": ..., "commands": [[command, output], ...]}: terminal sessions as a toy format."""

    name = "echo_log"
    dataset = "example/echo-log"
    license = "CC0-1.0"
    summary = "toy terminal logs"
    id_field = "id"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        commands = require(row.data, "commands", list)
        if not commands:
            raise BadRow("no commands")
        turns = [
            Turn(
                action=Action(kind="command", arguments={"command": c}, text=c),
                observation=Observation(format="terminal_screen", text=f"$ {c}\n{out}"),
            )
            for c, out in commands
        ]
        return Episode(
            outcome=Outcome(status="completed", reward=row.data.get("reward")),
            domain="terminal",
            task=Task(id=f"echo-{row.row_id}"),
            initial=Observation(format="terminal_screen", text="$ "),
            turns=turns,
            environment=Environment(name="terminal", backend="imported"),
            policy=Policy(name="imported"),
        )


def context() -> ImportContext:
    return ImportContext(
        dataset="example/echo-log", version="v1", license="CC0-1.0", collector_version="test", host="h"
    )


def rows(n: int) -> list[dict]:
    return [{"id": f"r{i}", "commands": [["echo hi", "hi"], [f"echo {i}", str(i)]]} for i in range(n)]


def test_jsonl_imports_with_provenance_and_a_rerun_resumes(tmp_path: Path):
    source = tmp_path / "log.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows(5)) + "\n")
    out = str(tmp_path / "out")
    first = import_rows(EchoLog(), [str(source)], out, context(), progress=False)
    assert (first.read, first.imported, first.already, sum(first.dead.values())) == (5, 5, 0, 0)
    imported = {t.provenance.source.row_id: t for t in read_trajectories(out, validate=True)}
    assert sorted(imported) == [f"r{i}" for i in range(5)]
    t = imported["r3"]
    assert [s.action.text for s in t.steps] == ["echo hi", "echo 3"]
    assert t.steps[-1].observation.text == "$ echo 3\n3" and t.steps[-1].done
    assert (t.provenance.source.dataset, t.provenance.source.license) == ("example/echo-log", "CC0-1.0")
    assert t.provenance.source.uri == str(source)

    source.write_text("\n".join(json.dumps(r) for r in rows(7)) + "\n")
    second = import_rows(EchoLog(), [str(source)], out, context(), progress=False)
    assert (second.imported, second.already) == (2, 5)
    assert len(list(read_trajectories(out))) == 7


def test_bad_rows_go_to_the_dead_letter_file_and_the_run_goes_on(tmp_path: Path):
    source = tmp_path / "log.jsonl"
    lines = [json.dumps(r) for r in rows(3)]
    lines[1:1] = [
        "{not json",
        json.dumps({"id": "empty", "commands": []}),
        json.dumps({"id": "no-commands"}),
        json.dumps({"id": "wrong", "commands": [["only one"]]}),  # unpacking fails: unexpected
        json.dumps({"id": "too-good", "commands": [["a", "b"]], "reward": 2.0}),  # fails validation
        json.dumps({"id": "odd-type", "commands": [[7, "b"]]}),  # an int as the action text
    ]
    source.write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "out")
    summary = import_rows(EchoLog(), [str(source)], out, context(), progress=False)
    assert summary.imported == 3
    assert dict(summary.dead) == {"unreadable": 1, "bad_row": 2, "unexpected": 1, "invalid": 2}
    dead = [json.loads(line) for line in Path(summary.dead_letter_path).read_text().splitlines()]
    reasons = {d["row_id"]: d["reason"] for d in dead}
    assert reasons["empty"] == "no commands"
    assert reasons["no-commands"] == "missing field 'commands'"
    assert "not enough values to unpack" in reasons["wrong"]
    assert "outcome.reward" in reasons["too-good"]
    assert "steps[0].action.text" in reasons["odd-type"]
    assert any(r.startswith("line 2 is not JSON") for r in reasons.values())
    assert "dead letters: 6" in summary.format_text()

    source.write_text("\n".join(json.dumps(r) for r in rows(3)) + "\n")  # the bad rows fixed
    again = import_rows(EchoLog(), [str(source)], out, context(), progress=False)
    assert (again.imported, again.already, sum(again.dead.values())) == (0, 3, 0)
    assert not Path(summary.dead_letter_path).exists()  # no stale reasons left behind


def test_a_shard_is_checked_at_once_and_only_its_invalid_rows_are_refused(tmp_path: Path):
    source = tmp_path / "log.jsonl"
    data = rows(5)
    data[3]["reward"] = 1.5
    source.write_text("\n".join(json.dumps(r) for r in data) + "\n")
    out = str(tmp_path / "out")
    summary = import_rows(EchoLog(), [str(source)], out, context(), progress=False, shard_rows=2)
    assert (summary.imported, dict(summary.dead), summary.steps) == (4, {"invalid": 1}, 8)
    (dead,) = [json.loads(line) for line in Path(summary.dead_letter_path).read_text().splitlines()]
    assert dead["row_id"] == "r3" and dead["reason"].endswith("outcome.reward is not in [0, 1]")
    assert sorted(t.provenance.source.row_id for t in read_trajectories(out, validate=True)) == [
        "r0", "r1", "r2", "r4",
    ]  # fmt: skip


def test_parquet_streams_a_batch_at_a_time_and_limit_stops_early(tmp_path: Path):
    table = pa.Table.from_pylist(rows(40))
    pq.write_table(table, tmp_path / "train-00000-of-00001.parquet", row_group_size=8)
    out = str(tmp_path / "out")
    summary = import_rows(EchoLog(), [str(tmp_path)], out, context(), progress=False, limit=25)
    assert (summary.read, summary.imported) == (25, 25)
    assert {t.provenance.source.row_id for t in read_trajectories(out)} == {f"r{i}" for i in range(25)}


def test_a_json_array_streams_item_by_item_and_a_broken_tail_is_one_dead_letter(tmp_path: Path):
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(rows(6)))
    broken = tmp_path / "broken.json"
    others = [{**row, "id": f"b{row['id']}"} for row in rows(3)]
    broken.write_text(json.dumps(others)[:-30])  # cut inside the third row
    out = str(tmp_path / "out")
    summary = import_rows(EchoLog(), [str(whole), str(broken)], out, context(), progress=False)
    assert (summary.imported, dict(summary.dead)) == (8, {"unreadable": 1})
    (dead,) = [json.loads(line) for line in Path(summary.dead_letter_path).read_text().splitlines()]
    assert dead["uri"] == str(broken) and "breaks off" in dead["reason"]


def test_a_saved_datasets_folder_and_json_lines_named_json_are_read(tmp_path: Path):
    import datasets

    datasets.Dataset.from_list(rows(5)).save_to_disk(str(tmp_path / "saved"))  # .arrow files
    (tmp_path / "lines.json").write_text(
        "".join(json.dumps({**r, "id": f"j{i}"}) + "\n" for i, r in enumerate(rows(2)))
    )
    out = str(tmp_path / "out")
    summary = import_rows(EchoLog(), [str(tmp_path / "saved"), str(tmp_path / "lines.json")], out, context())
    assert (summary.imported, sum(summary.dead.values())) == (7, 0)
    assert {t.provenance.source.row_id for t in read_trajectories(out)} == {
        *(f"r{i}" for i in range(5)),
        "j0",
        "j1",
    }


def test_inputs_that_name_no_data_are_refused(tmp_path: Path):
    with pytest.raises(InputError, match="does not exist"):
        list(EchoLog().read(str(tmp_path / "missing.jsonl")))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="holds no"):
        list(EchoLog().read(str(tmp_path)))


def test_a_failing_source_keeps_what_was_committed(tmp_path: Path):
    class Failing(EchoLog):
        def read(self, source: str):
            yield from list(super().read(source))
            raise OSError("the bucket went away")

    source = tmp_path / "log.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows(4)) + "\n")
    out = str(tmp_path / "out")
    with pytest.raises(OSError, match="bucket"):
        import_rows(Failing(), [str(source)], out, context(), progress=False)
    assert len(list(read_trajectories(out, validate=True))) == 4  # the writer committed on the way out
    again = import_rows(EchoLog(), [str(source)], out, context(), progress=False)
    assert (again.imported, again.already) == (0, 4)
