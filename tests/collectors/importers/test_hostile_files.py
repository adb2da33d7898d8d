"""Hostile and damaged input files: each one is a dead letter with its reason, the rows before it stay
imported and the run goes on with the next file, in bounded memory and time.

Every test writes the file itself and runs the real import loop (`import_rows`) or the real CLI on it.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.importers import reading
from collectors.importers.reading import MAX_DEPTH, Unreadable
from collectors.importers.run import import_rows
from collectors.importers.swe_agent_traj import IMPORTER as SWE_AGENT_TRAJ
from schemas import read_trajectories
from tests.collectors.importers.test_cli import ENV, REPO, cli
from tests.collectors.importers.test_framework import EchoLog, context, rows
from tests.collectors.importers.test_openai_chat import mcp_row


def dead_letters(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def imported_ids(out: Path) -> set[str]:
    return {t.provenance.source.row_id for t in read_trajectories(str(out), validate=True)}


def nested(depth: int) -> str:
    """A JSON value `depth` arrays/objects deep."""
    return '{"k":[' * (depth // 2) + "[]" * (depth % 2) + "]}" * (depth // 2)


def test_a_truncated_jsonl_gz_keeps_the_rows_before_the_cut_and_the_next_file_is_read(tmp_path: Path):
    folder = tmp_path / "in"
    folder.mkdir()
    noise = random.Random(7)
    lines = [
        json.dumps({**mcp_row(), "id": f"a-{i}", "note": noise.randbytes(300).hex()}) + "\n"
        for i in range(400)
    ]
    whole = gzip.compress("".join(lines).encode())
    (folder / "a.jsonl.gz").write_bytes(whole[: len(whole) // 2])  # cut in the middle of the stream
    (folder / "b.jsonl").write_text(
        "".join(json.dumps({**mcp_row(), "id": f"b-{i}"}) + "\n" for i in range(3))
    )
    out = tmp_path / "out"

    done = cli("openai_chat", "--input", str(folder), "--out", str(out), "--no-progress")

    assert done.returncode == 0, done.stderr
    ids = imported_ids(out)
    before_cut = sorted(int(i[2:]) for i in ids if i.startswith("a-"))
    assert 100 < len(before_cut) < 400 and before_cut == list(range(len(before_cut)))  # a prefix
    assert {"b-0", "b-1", "b-2"} <= ids  # the next file was read
    (dead,) = dead_letters(str(out / "dead_letter" / "import-openai_chat.jsonl"))
    assert dead["uri"].endswith("a.jsonl.gz") and dead["kind"] == "unreadable"
    assert "the compressed stream is truncated" in dead["reason"]
    assert f"reading stops in line {len(before_cut) + 1}" in dead["reason"]
    assert "dead letters: 1 (unreadable 1)" in done.stdout


def test_invalid_utf8_in_jsonl_gz_and_plain_jsonl_is_one_dead_row_each(tmp_path: Path):
    good = [json.dumps(r).encode() for r in rows(3)]
    bad = b'{"id": "latin1", "commands": [["echo caf\xe9", "caf\xe9"]]}'
    data = b"\n".join([good[0], good[1], bad, good[2]]) + b"\n"
    (tmp_path / "zipped.jsonl.gz").write_bytes(gzip.compress(data))
    (tmp_path / "plain.jsonl").write_bytes(data.replace(b'"id": "r', b'"id": "p'))
    out = tmp_path / "out"

    summary = import_rows(EchoLog(), [str(tmp_path)], str(out), context(), progress=False)

    assert (summary.imported, dict(summary.dead)) == (6, {"unreadable": 2})
    assert imported_ids(out) == {"r0", "r1", "r2", "p0", "p1", "p2"}
    dead = dead_letters(summary.dead_letter_path)
    assert sorted(Path(d["uri"]).name for d in dead) == ["plain.jsonl", "zipped.jsonl.gz"]
    for letter in dead:
        assert letter["reason"].startswith("line 3 is not UTF-8 text: 'utf-8' codec can't decode byte 0xe9")
        assert "caf\\xe9" in letter["row"]  # the bad bytes shown, escaped


def test_json_nested_100000_deep_in_jsonl_is_a_dead_row_not_a_recursion_error(tmp_path: Path):
    source = tmp_path / "log.jsonl"
    lines = [json.dumps(r) for r in rows(2)]
    lines.insert(1, '{"id": "deep", "commands": ' + "[" * 100_000 + "]" * 100_000 + "}")
    # The limit is exact: the row object plus MAX_DEPTH - 1 levels imports, one level more does not.
    lines.append('{"id": "at-limit", "commands": [["a", "b"]], "x": ' + nested(MAX_DEPTH - 1) + "}")
    lines.append('{"id": "past-limit", "commands": [["a", "b"]], "x": ' + nested(MAX_DEPTH) + "}")
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"

    summary = import_rows(EchoLog(), [str(source)], str(out), context(), progress=False)

    assert imported_ids(out) == {"r0", "r1", "at-limit"}
    reasons = [d["reason"] for d in dead_letters(summary.dead_letter_path)]
    assert reasons == [
        f"line 2 nests deeper than {MAX_DEPTH} arrays/objects (the limit)",
        f"line 5 nests deeper than {MAX_DEPTH} arrays/objects (the limit)",
    ]


def test_a_json_file_of_lines_nested_100000_deep_is_a_dead_row_not_a_crash(tmp_path: Path):
    # A .json file that is not an array went to `datasets`, whose reader died of a segmentation fault
    # on this (the whole run with it); it is read as JSON Lines now, with the depth limit.
    source = tmp_path / "log.json"
    deep = '{"id": "deep", "commands": ' + "[" * 100_000 + "]" * 100_000 + "}"
    source.write_text(json.dumps(rows(1)[0]) + "\n" + deep + "\n")
    summary = import_rows(EchoLog(), [str(source)], str(tmp_path / "out"), context(), progress=False)
    assert (summary.imported, dict(summary.dead)) == (1, {"unreadable": 1})
    (dead,) = dead_letters(summary.dead_letter_path)
    assert dead["reason"] == f"line 2 nests deeper than {MAX_DEPTH} arrays/objects (the limit)"

    (tmp_path / "config.json").write_text(json.dumps({"a": [1, 2], "b": {"c": 3}}, indent=2))
    summary = import_rows(
        EchoLog(), [str(tmp_path / "config.json")], str(tmp_path / "o2"), context(), progress=False
    )
    (dead,) = dead_letters(summary.dead_letter_path)  # one letter, not one per line of the object
    assert dead["reason"].startswith("the file holds one JSON object over many lines, not rows")


def test_a_json_array_nested_100000_deep_is_dead_letters_in_bounded_memory(tmp_path: Path):
    # 1.2 MB: three items 100,000 levels deep. ijson.items built prefixes for every level and grew
    # to 16.7 GB on this; the import runs under an address-space cap so a regression fails, not swaps.
    item = '{"k":[' * 50_000 + "0" + "]}" * 50_000
    source = tmp_path / "tasks.json"
    source.write_text("[" + ",".join([item] * 3) + "]")
    assert source.stat().st_size > 1_100_000
    out = tmp_path / "out"
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
        "from collectors.importers.__main__ import main\n"
        "code = main(sys.argv[1:])\n"
        # VmHWM, not ru_maxrss: that one keeps the RSS of the forked pytest process from before exec.
        "print('peak_rss_kb', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
        "sys.exit(code)\n"
    )
    argv = ["mind2web", "--input", str(source), "--out", str(out), "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr[-3000:]
    peak_mb = int(done.stdout.split("peak_rss_kb")[1].split()[0]) / 1024
    assert peak_mb < 512, f"peak RSS {peak_mb:.0f} MB"  # 181 MB when written, imports included
    dead = dead_letters(str(out / "dead_letter" / "import-mind2web.jsonl"))
    assert [d["reason"] for d in dead] == [
        f"the item nests deeper than {MAX_DEPTH} arrays/objects (the limit)"
    ] * 3
    assert "imported 0 of 3 rows" in done.stdout


def test_an_oversize_row_is_skipped_as_it_streams_and_the_rows_after_it_are_read(tmp_path: Path):
    # The limit is 128 MiB; the readers take it as an argument, so a small one shows the behaviour.
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": 1}\n"' + "x" * 5000 + '"\n{"a": 2}\n' + "y" * 3000)
    read = list(reading.json_lines(str(lines), max_bytes=1000))
    assert read[0] == {"a": 1} and read[2] == {"a": 2}
    assert read[1] == Unreadable("line 2 is 5,002 bytes, over the 1,000-byte limit", "")
    assert read[3] == Unreadable("line 4 is 3,000 bytes, over the 1,000-byte limit", "")

    array = tmp_path / "rows.json"
    array.write_text('[{"a": 1}, "' + "x" * 300_000 + '", {"a": 2}]')
    first, refused = reading.json_array(str(array), max_bytes=100_000)
    assert first == {"a": 1}
    assert refused.reason == (
        "item 2 of the array is over the 100,000-byte limit; the rest of the file is not read"
    )

    (tmp_path / "big.traj").write_text('{"trajectory": []}' + " " * 2000)
    ((uri, content),) = reading.file_records(str(tmp_path / "big.traj"), (".traj",), max_bytes=1000)
    assert content == Unreadable("the file is over the 1,000-byte limit", "")


def test_unpaired_surrogate_escapes_are_a_dead_row(tmp_path: Path):
    source = tmp_path / "log.jsonl"
    good = [json.dumps(r) for r in rows(2)]
    source.write_text(good[0] + '\n{"id": "s", "commands": [["echo \\ud800", "x"]]}\n' + good[1] + "\n")
    summary = import_rows(EchoLog(), [str(source)], str(tmp_path / "out"), context(), progress=False)
    assert (summary.imported, dict(summary.dead)) == (2, {"unreadable": 1})
    (dead,) = dead_letters(summary.dead_letter_path)
    assert dead["reason"].startswith("line 2 holds an unpaired UTF-16 surrogate escape")


def test_a_corrupt_parquet_file_is_one_dead_letter_and_the_next_file_is_read(tmp_path: Path):
    pq.write_table(pa.Table.from_pylist(rows(4)), tmp_path / "a.parquet")
    whole = (tmp_path / "a.parquet").read_bytes()
    (tmp_path / "a.parquet").write_bytes(whole[: len(whole) // 2])  # footer gone
    pq.write_table(
        pa.Table.from_pylist([{**r, "id": f"b{r['id']}"} for r in rows(2)]), tmp_path / "b.parquet"
    )
    out = tmp_path / "out"

    summary = import_rows(EchoLog(), [str(tmp_path)], str(out), context(), progress=False)

    assert imported_ids(out) == {"br0", "br1"}
    (dead,) = dead_letters(summary.dead_letter_path)
    assert dead["uri"].endswith("a.parquet")
    assert dead["reason"].startswith("reading the file failed after 0 rows, the rest is not read: ")


def test_a_traj_file_nested_100000_deep_is_a_dead_letter(tmp_path: Path):
    (tmp_path / "deep.traj").write_text('{"trajectory": ' + "[" * 100_000 + "]" * 100_000 + "}")
    summary = import_rows(SWE_AGENT_TRAJ, [str(tmp_path)], str(tmp_path / "out"), context(), progress=False)
    assert (summary.imported, dict(summary.dead)) == (0, {"bad_row": 1})
    (dead,) = dead_letters(summary.dead_letter_path)
    assert dead["reason"] == f"the file nests deeper than {MAX_DEPTH} arrays/objects (the limit)"
