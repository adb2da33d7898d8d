"""SWE tool logic without a sandbox: action parsing and text, the tools' JSON Schemas, read/edit
on a real directory, and the bounded process runner."""

from __future__ import annotations

import difflib
import os
import random
import re
import sysconfig
import time
from pathlib import Path

import jsonschema
import pytest

from sandboxes.base import InvalidActionError
from sandboxes.swe import TOOLS, bash_action, edit_action, parse_action, read_action
from sandboxes.swe.files import ToolError, Workspace
from sandboxes.swe.process import render, run_bounded
from sandboxes.swe.text import bound, unified_diff


def numbered(lines: list[str], first: int) -> str:
    """The reference: what `cat -n` prints for these lines."""
    return "".join(f"{n:6}\t{line}\n" for n, line in enumerate(lines, first))


def test_action_text_is_a_python_call_in_schema_order() -> None:
    assert read_action("src/a.py", start_line=3).text == "read(path='src/a.py', start_line=3)"
    assert bash_action("python -m pytest -q").text == "bash(command='python -m pytest -q')"
    action = parse_action("edit", {"new_str": "y", "old_str": "x", "path": "a.py", "command": "str_replace"})
    assert action.text == "edit(command='str_replace', path='a.py', old_str='x', new_str='y')"
    assert edit_action("insert", "a.py", insert_line=0, new_str="it's\n").text == (
        "edit(command='insert', path='a.py', new_str=\"it's\\n\", insert_line=0)"
    )


def test_null_optional_arguments_are_dropped() -> None:
    action = parse_action("bash", {"command": "ls", "timeout_s": None})
    assert action.arguments == {"command": "ls"}


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        ("write", {"path": "a"}, "unknown SWE tool"),
        ("read", [], "must be an object"),
        ("read", {}, "missing required argument(s) ['path']"),
        ("read", {"path": 3}, "path must be a string"),
        ("read", {"path": ""}, "path must not be empty"),
        ("read", {"path": "a", "start_line": 0}, "start_line must be >= 1"),
        ("read", {"path": "a", "start_line": True}, "must be an integer"),
        ("read", {"path": "a", "start_line": 5, "end_line": 2}, "before start_line"),
        ("read", {"path": "a", "lines": 2}, "unknown argument(s) ['lines']"),
        ("edit", {"command": "delete", "path": "a"}, "command must be one of"),
        ("edit", {"command": "str_replace", "path": "a"}, "missing required argument(s) ['old_str']"),
        ("edit", {"command": "str_replace", "path": "a", "old_str": ""}, "old_str must not be empty"),
        ("edit", {"command": "create", "path": "a", "file_text": "x", "new_str": "y"}, "does not take"),
        ("edit", {"command": "insert", "path": "a", "new_str": "x"}, "['insert_line']"),
        ("bash", {"command": "  "}, "must not be empty"),
        ("bash", {"command": "ls", "timeout_s": 601}, "<= 600"),
        ("bash", {"command": "ls", "timeout_s": 1.5}, "must be an integer"),
    ],
)
def test_malformed_actions_are_refused(kind: str, arguments: object, message: str) -> None:
    with pytest.raises(InvalidActionError) as err:
        parse_action(kind, arguments)  # type: ignore[arg-type]
    assert message in str(err.value)


def test_tool_schemas_accept_what_the_parser_accepts_and_refuse_the_rest() -> None:
    schemas = {tool.name: tool.input_schema for tool in TOOLS}
    assert list(schemas) == ["read", "edit", "bash"]
    for schema in schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    good = [
        ("read", {"path": "a.py", "start_line": 1, "end_line": 4}),
        ("edit", {"command": "create", "path": "b.py", "file_text": ""}),
        ("bash", {"command": "ls", "timeout_s": 5}),
    ]
    for kind, arguments in good:
        jsonschema.validate(arguments, schemas[kind])
        parse_action(kind, arguments)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"path": "a", "extra": 1}, schemas["read"])


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x + 1\n")
    (root / "notes.txt").write_text("no newline at end")
    (tmp_path / "secret.txt").write_text("outside")
    return Workspace(str(root), ("/repo",), None, max_file_bytes=1 << 20)


def test_read_numbers_lines_cat_n_style_and_ranges(ws: Workspace) -> None:
    out = ws.read("pkg/core.py", None, None, 10_000)
    assert out.text.splitlines()[:2] == ["     1\tdef f(x):", "     2\t    return x + 1"]
    assert ws.read("/repo/pkg/core.py", 5, 6, 10_000).text == "     5\tdef g(x):\n     6\t    return x + 1\n"
    assert ws.read("pkg/core.py", 6, 99, 10_000).text == "     6\t    return x + 1\n"
    with pytest.raises(ToolError, match="start_line 7 is past the end of pkg/core.py \\(6 lines\\)"):
        ws.read("pkg/core.py", 7, None, 10_000)
    assert ws.read(".", None, None, 10_000).text == "notes.txt\npkg/\n"


@pytest.mark.parametrize("path", ["../secret.txt", "pkg/../../secret.txt", "/etc/passwd", "/repository/x"])
def test_paths_outside_the_root_are_refused(ws: Workspace, path: str) -> None:
    with pytest.raises(ToolError, match="is outside the repository"):
        ws.read(path, None, None, 10_000)
    with pytest.raises(ToolError, match="is outside the repository"):
        ws.edit({"command": "create", "path": path, "file_text": "x"})


def test_symlinks_leading_out_are_refused_both_ways(ws: Workspace, tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.txt", os.path.join(ws.root, "leak"))
    os.symlink(tmp_path, os.path.join(ws.root, "up"))
    os.symlink(tmp_path / "nowhere.txt", os.path.join(ws.root, "dangling"))
    for path in ("leak", "up/secret.txt", "dangling"):
        with pytest.raises(ToolError, match="outside the repository"):
            ws.read(path, None, None, 10_000)
    with pytest.raises(ToolError, match="outside the repository"):
        ws.edit({"command": "create", "path": "dangling", "file_text": "planted"})
    with pytest.raises(ToolError, match="outside the repository"):
        ws.edit({"command": "str_replace", "path": "leak", "old_str": "outside", "new_str": "changed"})
    assert not (tmp_path / "nowhere.txt").exists()
    assert (tmp_path / "secret.txt").read_text() == "outside"
    os.symlink("pkg/core.py", os.path.join(ws.root, "inside"))
    assert ws.read("inside", 1, 1, 10_000).text == "     1\tdef f(x):\n"


def test_str_replace_needs_exactly_one_occurrence(ws: Workspace) -> None:
    before = Path(ws.root, "pkg/core.py").read_text()
    with pytest.raises(ToolError) as err:
        ws.edit({"command": "str_replace", "path": "pkg/core.py", "old_str": "return x + 1", "new_str": "y"})
    assert str(err.value) == "Error: old_str found 2 times in pkg/core.py (must be unique)"
    with pytest.raises(ToolError) as err:
        ws.edit({"command": "str_replace", "path": "pkg/core.py", "old_str": "x - 1", "new_str": "y"})
    assert str(err.value) == "Error: old_str not found in pkg/core.py"
    assert Path(ws.root, "pkg/core.py").read_text() == before
    out = ws.edit(
        {
            "command": "str_replace",
            "path": "pkg/core.py",
            "old_str": "def g(x):\n    return x + 1",
            "new_str": "def g(x):\n    return x - 1",
        }
    )
    assert out.diff == out.text
    assert out.text == (
        "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -3,4 +3,4 @@\n \n \n def g(x):\n-    return x + 1\n"
        "+    return x - 1\n"
    )
    assert Path(ws.root, "pkg/core.py").read_text().endswith("return x - 1\n")


def test_overlapping_occurrences_count_as_not_unique(ws: Workspace) -> None:
    Path(ws.root, "aaa.txt").write_text("aaa\n")
    with pytest.raises(ToolError, match="found 2 times"):
        ws.edit({"command": "str_replace", "path": "aaa.txt", "old_str": "aa", "new_str": "b"})


def test_create_and_its_errors(ws: Workspace) -> None:
    out = ws.edit({"command": "create", "path": "new/deep/mod.py", "file_text": "X = 1\n"})
    assert out.text == "--- /dev/null\n+++ b/new/deep/mod.py\n@@ -0,0 +1 @@\n+X = 1\n"
    assert Path(ws.root, "new/deep/mod.py").read_text() == "X = 1\n"
    with pytest.raises(ToolError, match="new/deep/mod.py already exists"):
        ws.edit({"command": "create", "path": "new/deep/mod.py", "file_text": "X = 2\n"})
    with pytest.raises(ToolError, match="no such file: missing.py"):
        ws.edit({"command": "str_replace", "path": "missing.py", "old_str": "a", "new_str": "b"})


def test_insert_at_top_at_end_and_out_of_range(ws: Workspace) -> None:
    ws.edit({"command": "insert", "path": "notes.txt", "insert_line": 1, "new_str": "second"})
    assert Path(ws.root, "notes.txt").read_text() == "no newline at end\nsecond\n"
    out = ws.edit({"command": "insert", "path": "notes.txt", "insert_line": 0, "new_str": "first\n"})
    assert (
        out.text == "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,3 @@\n+first\n no newline at end\n second\n"
    )
    with pytest.raises(ToolError) as err:
        ws.edit({"command": "insert", "path": "notes.txt", "insert_line": 9, "new_str": "x"})
    assert str(err.value) == "Error: insert_line 9 is out of range for notes.txt (0-3)"


def test_diff_marks_a_last_line_without_newline() -> None:
    assert unified_diff("a\nb", "a\nc", "f.txt") == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
        "\\ No newline at end of file\n"
    )


def test_special_files_are_refused_without_blocking(ws: Workspace) -> None:
    os.mkfifo(os.path.join(ws.root, "pipe"))
    Path(ws.root, "blob.bin").write_bytes(b"\x00\x01binary")
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="pipe is not a regular file"):
        ws.read("pipe", None, None, 10_000)
    assert time.monotonic() - t0 < 1
    with pytest.raises(ToolError, match="blob.bin is a binary file"):
        ws.read("blob.bin", None, None, 10_000)


def test_bound_keeps_head_and_tail_and_counts_the_rest() -> None:
    text, cut = bound("a" * 600 + "b" * 600, 1000)
    assert cut and text == "a" * 500 + "\n[... 200 of 1200 bytes truncated ...]\n" + "b" * 500
    assert bound("short", 1000) == ("short", False)


def test_run_bounded_counts_dropped_bytes_and_kills_the_group_on_timeout(tmp_path: Path) -> None:
    done = run_bounded(
        ["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' x; echo; exit 3"], timeout_s=10, limit=1000
    )
    assert (done.exit_status, done.timed_out, done.dropped) == (3, False, 4001)
    assert render(done, 10).endswith("\n[exit status: 3]")
    assert "\n[... 4001 of 5001 bytes truncated ...]\n" in render(done, 10)
    marker = tmp_path / "alive"
    t0 = time.monotonic()
    slow = run_bounded(
        ["bash", "-c", f"(sleep 2; touch {marker}) & echo started; sleep 60"], timeout_s=0.5, limit=1000
    )
    assert time.monotonic() - t0 < 3
    assert slow.timed_out and slow.exit_status is None
    assert render(slow, 0.5) == "started\n[timed out after 0.5 s]"
    time.sleep(2.5)
    assert not marker.exists(), "a background process of the timed-out command survived"


def test_lines_are_split_at_newlines_only_as_pytest_counts_them(ws: Workspace) -> None:
    Path(ws.root, "ff.py").write_text("a = 1\n\x0c\nb = 2\r\nc = 3")
    shown = ws.read("ff.py", None, None, 10_000).text
    assert shown == "     1\ta = 1\n     2\t\x0c\n     3\tb = 2\r\n     4\tc = 3\n"
    ws.edit({"command": "insert", "path": "ff.py", "insert_line": 2, "new_str": "x = 0"})
    assert Path(ws.root, "ff.py").read_bytes().decode() == "a = 1\n\x0c\nx = 0\nb = 2\r\nc = 3"
    Path(ws.root, "long.txt").write_text("".join(f"{n}\n" for n in range(1, 1_000_002)))
    roomy = Workspace(ws.root, ("/repo",), None, max_file_bytes=8 << 20)
    shown = roomy.read("long.txt", 999_999, None, 10_000).text
    assert shown == "999999\t999999\n1000000\t1000000\n1000001\t1000001\n"
    assert roomy.read("long.txt", 1, 2, 10_000).text == "     1\t1\n     2\t2\n"


@pytest.mark.parametrize("edit", ["replace", "insert_top", "append", "multi", "delete_block"])
def test_windowed_diff_equals_difflib_on_the_whole_file(edit: str) -> None:
    old = Path(sysconfig.get_paths()["stdlib"], "textwrap.py").read_text()
    lines = old.splitlines(keepends=True)
    new_lines = list(lines)
    if edit == "replace":
        new_lines[200] = "    changed = True\n"
    elif edit == "insert_top":
        new_lines[0:0] = ["# header\n", "\n"]
    elif edit == "append":
        new_lines += ["\n", "X = 1\n"]
    elif edit == "multi":
        new_lines[100:103] = ["a\n", lines[101], "b\n", "c\n"]
    else:
        del new_lines[300:320]
    new = "".join(new_lines)
    expected = "".join(difflib.unified_diff(lines, new_lines, fromfile="a/t.py", tofile="b/t.py"))
    assert unified_diff(old, new, "t.py") == expected


_MARKER = re.compile(r"\[\.\.\. (\d+) of (\d+) bytes truncated; continue with start_line=(\d+) \.\.\.\]\n$")


@pytest.mark.parametrize("seed", range(10))
def test_paging_through_a_large_file_shows_every_line_once(ws: Workspace, seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["", "x", "é", "\U0001f600", "def f():", "    return 1", "a" * 40]
    text = "\n".join(rng.choice(pieces) * rng.randint(1, 4) for _ in range(rng.randint(1, 3000)))
    text += rng.choice(["", "\n", "tail"])
    data = text.encode()
    Path(ws.root, "big.txt").write_bytes(data)
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    limit = rng.choice([256, 1000, 4096, 32768])
    pages, start = [], None
    while True:
        out = ws.read("big.txt", start, None, limit)
        found = _MARKER.search(out.text)
        assert out.truncated == (found is not None)
        page = out.text[: found.start()] if found else out.text
        assert len(page.encode()) <= limit
        pages.append(page)
        if not found:
            break
        shown_to = int(found.group(3)) - 1
        after = "\n".join(lines[shown_to:]) + ("\n" if text.endswith("\n") else "")
        asked = "\n".join(lines[(start or 1) - 1 :]) + ("\n" if text.endswith("\n") else "")
        assert (int(found.group(1)), int(found.group(2))) == (len(after.encode()), len(asked.encode()))
        start = shown_to + 1
    assert "".join(pages) == numbered(lines, 1)


def test_a_line_longer_than_the_limit_is_cut_with_a_hint(ws: Workspace) -> None:
    Path(ws.root, "min.js").write_text("x" * 5000 + "\nsecond\n")
    out = ws.read("min.js", None, None, 1000)
    assert out.truncated and out.text.startswith("     1\t" + "x" * 993 + "\n[... ")
    hint = "line 1 alone is longer: look at parts of it with bash (cut -c, head -c)"
    assert out.text.endswith(f"[... {5008 - 993} of 5008 bytes truncated; {hint} ...]\n")
    assert ws.read("min.js", 2, None, 1000).text == "     2\tsecond\n"


def test_a_str_replace_in_a_large_file_diffs_like_difflib(ws: Workspace) -> None:
    old = Path(sysconfig.get_paths()["stdlib"], "argparse.py").read_text()
    Path(ws.root, "big.py").write_text(old)
    line = "        self._prog = prog\n"
    out = ws.edit({"command": "str_replace", "path": "big.py", "old_str": line, "new_str": "        pass"})
    new = old.replace(line, "        pass")
    expected = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile="a/big.py", tofile="b/big.py"
    )
    assert out.text == "".join(expected)
    assert ws.read("big.py", None, None, 1 << 20).text == numbered(new.split("\n")[:-1], 1)


def test_a_command_that_closes_its_output_is_still_waited_for() -> None:
    t0 = time.monotonic()
    done = run_bounded(["bash", "-c", "echo bye; exec >&- 2>&-; sleep 0.5; exit 4"], timeout_s=10, limit=1000)
    assert (done.exit_status, done.timed_out) == (4, False) and time.monotonic() - t0 >= 0.5
    late = run_bounded(["bash", "-c", "exec >&- 2>&-; sleep 30"], timeout_s=0.5, limit=1000)
    assert late.timed_out and late.exit_status is None
