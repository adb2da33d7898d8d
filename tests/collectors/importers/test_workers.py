"""`--workers N`: rows shared out over processes give the trajectories, dead letters and counts of one
process; a killed or interrupted run with workers leaves no worker behind and a rerun resumes.

The in-process imports spawn real worker processes; the formats are the real ones (SWE-agent `.traj`
files from the shared public samples) or the toy format of `test_framework`, slowed in the test's own
process (worker 0) only, so that the spawned worker, started a second after the first row, finds rows
left to take; the reference import with one worker runs the format as it is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.importers import load_importer
from collectors.importers.base import ImportContext, SourceRow
from collectors.importers.run import ImportSummary, import_rows
from schemas import read_trajectories, to_row
from tests.collectors.importers.test_framework import EchoLog, context, rows
from tests.collectors.importers.test_openai_chat import mcp_row

REPO = Path(__file__).resolve().parents[3]
PUBLIC = REPO / ".." / "shared" / "public-samples"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
SLOWED_PID = "TEST_WORKERS_SLOWED_PID"  # the process whose conversions sleep: the test's own


@pytest.fixture(autouse=True)
def slow_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SLOWED_PID, str(os.getpid()))  # spawned workers inherit it, with their own pid


def slowed_here(seconds: float) -> None:
    if os.environ.get(SLOWED_PID) == str(os.getpid()):
        time.sleep(seconds)


class SlowedEchoLog(EchoLog):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def convert(self, row: SourceRow, context: ImportContext):
        slowed_here(self.seconds)
        return super().convert(row, context)


class SlowedTraj(type(load_importer("swe_agent_traj"))):
    """Worker 0 (the test's process) takes its first row slowly, past the others' start, then waits
    until a spawned worker has converted a row: on a loaded machine a spawned interpreter can take
    longer to start than the four rows take, and the import would then have one writer."""

    def __init__(self, mark: Path) -> None:
        self.mark, self.rows_here = mark, 0

    def convert(self, row: SourceRow, context: ImportContext):
        if os.environ.get(SLOWED_PID) != str(os.getpid()):
            self.mark.touch()
        elif self.rows_here == 0:
            self.rows_here = 1
            time.sleep(1.5)
        else:
            deadline = time.monotonic() + 120
            while not self.mark.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        return super().convert(row, context)


def trajectories(out: Path) -> dict[str, dict]:
    return {t.trajectory_id: to_row(t) for t in read_trajectories(str(out), validate=True)}


def dead_letters(summary: ImportSummary) -> list[dict]:
    lines = Path(summary.dead_letter_path).read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda d: (d["row_id"], d["reason"]))


def counts(summary: ImportSummary) -> tuple:
    """read, imported, already, steps, dead letters by kind, trajectories by domain."""
    totals = (summary.read, summary.imported, summary.already, summary.steps)
    return (*totals, dict(summary.dead), dict(summary.domains))


def writer_pids(out: Path) -> set[str]:
    """The processes that committed shards: manifest entries are named part-HOST-PID-RANDOM-SEQ."""
    return {path.name.split("-")[-3] for path in (out / "_manifest").glob("*.json")}


def test_public_traj_files_import_with_two_workers_as_with_one_and_a_broken_file_is_a_dead_letter(
    tmp_path: Path,
):
    assert PUBLIC.is_dir(), f"the shared public samples are missing: {PUBLIC}"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "cut-short.traj").write_text('{"trajectory": [{"action": "ls"')
    sources = [str(PUBLIC / "swe_agent_traj"), str(broken)]
    run = context()
    one = import_rows(load_importer("swe_agent_traj"), sources, str(tmp_path / "one"), run, progress=False)
    slowed = SlowedTraj(tmp_path / "spawned")
    two = import_rows(slowed, sources, str(tmp_path / "two"), run, progress=False, workers=2)

    assert len(writer_pids(tmp_path / "two")) == 2, "both workers should have converted files"
    assert counts(two) == counts(one) == (4, 3, 0, 44, {"bad_row": 1}, {"swe": 3})
    assert two.workers == 2 and "rows/s, 2 workers)" in two.format_text()
    imported = trajectories(tmp_path / "two")
    assert imported == trajectories(tmp_path / "one")
    by_file = {t["provenance"]["source"]["row_id"]: t for t in imported.values()}
    assert {name: len(t["steps"]) for name, t in by_file.items()} == {
        "ctf_web_i_got_id_demo.traj": 21,
        "marshmallow-1867__function_calling_replace.traj": 11,
        "pydicom-1458__gpt4_default.traj": 12,
    }
    pydicom = by_file["pydicom-1458__gpt4_default.traj"]
    assert pydicom["steps"][0]["observation"]["text"] == (
        "[File: /pydicom__pydicom/reproduce_bug.py (1 lines total)]\n1:\n"
    )
    ctf = by_file["ctf_web_i_got_id_demo.traj"]
    assert "FLAG{p3rl_6_iz_EVEN_BETTER!!1}" in ctf["steps"][-1]["action"]["text"]
    assert {t["outcome"]["status"] for t in imported.values()} == {"completed"}
    (dead,) = dead_letters(two)
    assert dead_letters(one) == [dead]
    assert (dead["row_id"], dead["kind"]) == ("cut-short.traj", "bad_row")
    assert dead["reason"].startswith("the file is not JSON")


def test_rows_are_shared_out_and_the_outputs_are_those_of_one_worker(tmp_path: Path):
    data = rows(240)
    for i in range(0, 240, 40):
        data[i + 1]["commands"] = []  # bad_row
        data[i + 2]["reward"] = 1.5  # invalid: refused when its shard is checked
    lines = [json.dumps(row) for row in data]
    lines[100] = "{not json"  # unreadable
    source = tmp_path / "log.jsonl"
    source.write_text("\n".join(lines) + "\n")
    run = context()
    one = import_rows(EchoLog(), [str(source)], str(tmp_path / "one"), run, progress=False, shard_rows=16)
    two = import_rows(
        SlowedEchoLog(0.05),
        [str(source)],
        str(tmp_path / "two"),
        run,
        progress=False,
        shard_rows=16,
        workers=2,
    )

    assert len(writer_pids(tmp_path / "two")) == 2, "both workers should have converted rows"
    expected = (240, 227, 0, 454, {"bad_row": 6, "invalid": 6, "unreadable": 1}, {"terminal": 227})
    assert counts(two) == counts(one) == expected
    assert trajectories(tmp_path / "two") == trajectories(tmp_path / "one")
    assert dead_letters(two) == dead_letters(one)
    assert [d["reason"] for d in dead_letters(two) if d["row_id"] == "r42"] == [
        "the converted trajectory is invalid: outcome.reward is not in [0, 1]"
    ]

    again = import_rows(EchoLog(), [str(source)], str(tmp_path / "two"), run, progress=False, workers=2)
    assert counts(again) == (240, 0, 227, 0, {"bad_row": 6, "invalid": 6, "unreadable": 1}, {})
    assert len(trajectories(tmp_path / "two")) == 227


def test_limit_counts_the_rows_of_every_worker(tmp_path: Path):
    pq.write_table(pa.Table.from_pylist(rows(40)), tmp_path / "train.parquet", row_group_size=8)
    out = tmp_path / "out"
    summary = import_rows(SlowedEchoLog(0.2), [str(tmp_path)], str(out), context(), limit=25, workers=2)
    assert len(writer_pids(out)) == 2, "both workers should have converted rows"
    assert (summary.read, summary.imported) == (25, 25)
    assert {t.provenance.source.row_id for t in read_trajectories(str(out))} == {f"r{i}" for i in range(25)}


def chats(path: Path, count: int) -> set[str]:
    """`count` MCP chats as JSON Lines, every 97th line not JSON; the line numbers of those."""
    bad = set()
    with path.open("w") as out:
        for i in range(count):
            if i % 97 == 50:
                out.write("{not json\n")
                bad.add(f"line {i + 1} ")
            else:
                out.write(json.dumps({**mcp_row(), "id": f"chat-{i}"}) + "\n")
    return bad


def start_import(source: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "collectors.importers", "openai_chat", "--input", str(source)]
    command += ["--out", str(out), "--shard-rows", "50", "--no-progress", "--workers", "2"]
    # SIGINT at its default, as a terminal starts a command: a test process that ignores it (an earlier
    # test on the same xdist worker can leave it so) would pass the ignoring on, and Ctrl-C do nothing.
    return subprocess.Popen(
        command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def wait_for_both_workers(out: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(writer_pids(out)) < 2 and proc.poll() is None:
        time.sleep(0.05)
    assert len(writer_pids(out)) == 2, "both workers should have committed shards before the signal"


def children(pid: int) -> list[int]:
    """The live worker processes of `pid` (not multiprocessing's resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == str(pid) and fields[0] != "Z" and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def finish(source: Path, out: Path, rows: int, bad: set[str], first: int) -> None:
    """A rerun with two workers: the rest imported, no duplicates, every bad line a dead letter."""
    done = subprocess.run(
        [sys.executable, "-m", "collectors.importers", "openai_chat", "--input", str(source)]
        + ["--out", str(out), "--no-progress", "--workers", "2"],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"already imported by an earlier run (skipped): {first:,}" in done.stdout
    assert f"dead letters: {len(bad)} (unreadable {len(bad)})" in done.stdout
    ids = [t.trajectory_id for t in read_trajectories(str(out))]
    assert len(ids) == len(set(ids)) == rows - len(bad)
    lines = (out / "dead_letter" / "import-openai_chat.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["reason"].split("is not JSON")[0] for line in lines) == sorted(bad)


def test_a_killed_import_takes_its_workers_along_and_a_rerun_resumes(tmp_path: Path):
    rows = 6_000
    source = tmp_path / "chats.jsonl"
    bad = chats(source, rows)
    out = tmp_path / "out"
    proc = start_import(source, out)
    wait_for_both_workers(out, proc)
    workers = children(proc.pid)
    assert len(workers) == 1, "one spawned worker beside the parent's own"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in workers):
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "the worker outlived its parent"
    first = len(list(read_trajectories(str(out), validate=True)))
    assert 100 <= first < rows - len(bad), "the kill should land mid-import"
    finish(source, out, rows, bad, first)


def test_ctrl_c_stops_every_worker_between_rows_and_keeps_what_they_converted(tmp_path: Path):
    rows = 6_000
    source = tmp_path / "chats.jsonl"
    bad = chats(source, rows)
    out = tmp_path / "out"
    proc = start_import(source, out)
    wait_for_both_workers(out, proc)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the parent and its workers
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert b"Traceback" not in stderr, stderr.decode()[-3000:]
    first = len(list(read_trajectories(str(out), validate=True)))
    assert 100 <= first < rows - len(bad), "the interrupt should land mid-import"
    # The bad lines the workers had met, from the part of each: the first (line 51) among them.
    kept = (out / "dead_letter" / "import-openai_chat.jsonl").read_text().splitlines()
    reasons = {json.loads(line)["reason"].split("is not JSON")[0] for line in kept}
    assert "line 51 " in reasons and reasons <= bad
    finish(source, out, rows, bad, first)
