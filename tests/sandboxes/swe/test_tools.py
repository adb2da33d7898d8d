"""SWE tool logic without a sandbox: action parsing and text, the tools' JSON Schemas, read/edit
on a real directory, and the bounded process runner."""

from __future__ import annotations

import os
import time
from pathlib import Path

import jsonschema
import pytest

from sandboxes.base import InvalidActionError
from sandboxes.swe import TOOLS, bash_action, edit_action, parse_action, read_action
from sandboxes.swe.files import ToolError, Workspace, bound, unified_diff
from sandboxes.swe.process import render, run_bounded


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
    assert cut and text == "a" * 500 + "\n[... 200 bytes truncated ...]\n" + "b" * 500
    assert bound("short", 1000) == ("short", False)


def test_run_bounded_counts_dropped_bytes_and_kills_the_group_on_timeout(tmp_path: Path) -> None:
    done = run_bounded(
        ["bash", "-c", "head -c 5000 /dev/zero | tr '\\0' x; echo; exit 3"], timeout_s=10, limit=1000
    )
    assert (done.exit_status, done.timed_out, done.dropped) == (3, False, 4001)
    assert render(done, 10).endswith("\n[exit status: 3]")
    assert "\n[... 4001 bytes truncated ...]\n" in render(done, 10)
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
