"""Task files: malformed lines are reported with file:line and skipped; the rest load."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from collectors.tasks import embedded_tasks, load_tasks


def test_malformed_lines_are_reported_and_the_rest_load(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    good = {"id": "ok-1", "instruction": "list", "setup": ["mkdir -p x"], "actions": [{"command": "ls"}]}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"instruction": "no id"}),
        json.dumps({"id": "bad-setup", "setup": "mkdir x"}),
        "",
        json.dumps({"id": "ok-1"}),
        json.dumps({"id": "bad-action", "actions": [{"command": "ls", "keystrokes": []}]}),
        json.dumps({"id": "bad-steps", "max_steps": -1}),
        json.dumps(
            {
                "id": "ok-2",
                "category": "git",
                "max_steps": 3,
                "actions": [{"keystrokes": [{"keystrokes": "q"}]}],
            }
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    specs, errors = load_tasks(str(path))
    assert [s.id for s in specs] == ["ok-1", "ok-2"]
    assert specs[1].task.metadata == {"category": "git"} and specs[1].task.max_steps == 3
    assert specs[0].task.setup == ["mkdir -p x"] and specs[0].actions == [{"command": "ls"}]
    reasons = {e.line: e.reason for e in errors}
    assert sorted(reasons) == [2, 3, 4, 6, 7, 8]
    assert "invalid JSON" in reasons[2]
    assert "'id'" in reasons[3]
    assert "setup" in reasons[4]
    assert "duplicate id 'ok-1'" in reasons[6] and "line 1" in reasons[6]
    assert "exactly one of" in reasons[7]
    assert "max_steps" in reasons[8]
    assert str(errors[0]).startswith(f"{path}:2: ")


def test_embedded_suite_is_large_varied_and_valid() -> None:
    specs = embedded_tasks("terminal")
    assert len(specs) >= 100
    categories = Counter(s.task.metadata["category"] for s in specs)
    expected = {"navigation", "files", "text", "git", "python", "errors", "pipes", "interactive"}
    assert set(categories) == expected and min(categories.values()) >= 10
    assert all(s.task.instruction and s.actions for s in specs)
    assert sum(1 for s in specs if s.task.setup) >= 80


def test_embedded_suite_is_generated_deterministically() -> None:
    from collectors.terminal import make_tasks

    rendered = "".join(json.dumps(row, sort_keys=True) + "\n" for row in make_tasks.build())
    assert rendered == make_tasks.OUT.read_text(encoding="utf-8"), (
        "run python -m collectors.terminal.make_tasks"
    )
