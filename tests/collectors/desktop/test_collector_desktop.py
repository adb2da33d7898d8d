"""`python -m collectors.desktop` end to end on real local desktops (Xvfb, openbox, AT-SPI, GNOME
Calculator, Mousepad, xterm in bubblewrap): explorer episodes over the three applications, the
scripted solution of a calculator task, and the command-line errors that stop a run before it starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import collectors.desktop
from collectors.desktop.__main__ import main
from collectors.tasks import embedded_tasks
from sandboxes.desktop.tree_text import parse_tree
from schemas import read_trajectories
from schemas.invalid_actions import INVALID
from tests.sandboxes.desktop.sshd import LocalSshd
from tests.training.test_backends import scripted_chat_server

pytestmark = pytest.mark.bwrap


def _task_file(path: Path, ids: list[str]) -> str:
    lines = (Path(collectors.desktop.__file__).parent / "tasks.jsonl").read_text().splitlines()
    chosen = [line for line in lines if json.loads(line)["id"] in ids]
    assert len(chosen) == len(ids)
    path.write_text("\n".join(chosen) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def explored(tmp_path_factory) -> list:
    root = tmp_path_factory.mktemp("desktop_collector")
    tasks = _task_file(root / "tasks.jsonl", ["calc-add", "editor-type", "terminal-list"])
    out = str(root / "out")
    args = [
        "--displays",
        "1",
        "--tasks",
        tasks,
        "--max-steps",
        "5",
        "--seed",
        "4",
        "--out",
        out,
        "--no-progress",
    ]
    assert main(args) == 0
    return sorted(read_trajectories(out), key=lambda t: t.task.id)


def test_explorer_episodes_over_calculator_editor_and_terminal(explored) -> None:
    assert [t.task.id for t in explored] == ["calc-add", "editor-type", "terminal-list"]
    for t in explored:
        assert t.domain == "os" and t.environment.backend == "local" and t.outcome.status != "error"
        assert t.policy.name == "desktop-explorer" and t.steps
        assert parse_tree(t.initial_observation.text).nodes, t.initial_observation.text
        for step in t.steps:
            if step.action.kind == INVALID:
                assert step.observation.format == "error"
                continue
            assert step.action.kind in ("computer", "pyautogui")
            assert step.action.text.startswith(("pyautogui.", "time.sleep("))  # AgentWorldBench's OS form
            obs = step.observation
            assert obs.format == "desktop_a11y_tree" and obs.data["backend"] == "local"
            assert parse_tree(obs.text).has_focused_line
            assert [a.media_type for a in obs.attachments] == ["image/png"] and obs.attachments[0].uri
    focused = {parse_tree(t.initial_observation.text).focused_application for t in explored}
    assert focused == {"gnome-calculator", "mousepad", "terminal"}
    # The walks did something: some step's tree differs from the one before it.
    changed = 0
    for t in explored:
        texts = [t.initial_observation.text] + [s.observation.text for s in t.steps]
        changed += sum(1 for a, b in zip(texts, texts[1:], strict=False) if a != b)
    assert changed > 0


def test_scripted_calculator_task_computes_through_the_real_application(tmp_path) -> None:
    tasks = _task_file(tmp_path / "tasks.jsonl", ["calc-add"])
    out = str(tmp_path / "out")
    assert (
        main(["--policy", "scripted", "--tasks", tasks, "--no-screenshots", "--out", out, "--no-progress"])
        == 0
    )
    (t,) = read_trajectories(out)
    assert (t.domain, t.provenance.collector) == ("os", "collectors.desktop")
    assert [s.action.text for s in t.steps] == ["pyautogui.write('7+6')", "pyautogui.press('enter')"]
    display = [n for n in parse_tree(t.steps[-1].observation.text).nodes if "editable" in n.states]
    assert [n.value for n in display] == ["13"]
    assert all(not s.observation.attachments for s in t.steps)


def test_every_embedded_task_names_applications_the_sandbox_has() -> None:
    from sandboxes.desktop import APPLICATIONS

    tasks = embedded_tasks("desktop")
    assert len(tasks) >= 15
    for spec in tasks:
        apps = spec.task.metadata["apps"]
        assert apps and set(apps) <= set(APPLICATIONS), spec.id
    assert {a for spec in tasks for a in spec.task.metadata["apps"]} == set(APPLICATIONS)


def test_ssh_options_are_checked_before_anything_starts(tmp_path, capsys) -> None:
    out = str(tmp_path / "out")
    with pytest.raises(SystemExit) as exited:
        main(["--ssh", "agent@127.0.0.1", "--out", out])
    assert exited.value.code == 2 and "--known-hosts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--known-hosts", str(tmp_path / "kh"), "--out", out])
    missing_key = ["--ssh", "agent@127.0.0.1", "--known-hosts", str(tmp_path / "kh"), "--out", out]
    assert main([*missing_key, "--identity", str(tmp_path / "no-key")]) == 2
    assert "no SSH key" in capsys.readouterr().err
    (tmp_path / "key").write_text("not really a key")
    assert main([*missing_key, "--identity", str(tmp_path / "key")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_remote_desktop_over_real_sshd_and_an_unknown_host_key_refused(tmp_path, capsys) -> None:
    tasks = _task_file(tmp_path / "tasks.jsonl", ["calc-add"])
    with LocalSshd(tmp_path / "sshd") as sshd:
        remote = ["--ssh", f"{sshd.user}@127.0.0.1:{sshd.port}", "--identity", str(sshd.user_key)]
        common = ["--policy", "scripted", "--tasks", tasks, "--no-progress"]
        unknown = tmp_path / "empty_known_hosts"
        unknown.write_text("")
        refused = main([*remote, "--known-hosts", str(unknown), *common, "--out", str(tmp_path / "refused")])
        assert refused == 2 and "is not in" in capsys.readouterr().err
        out = str(tmp_path / "out")
        assert main([*remote, "--known-hosts", str(sshd.known_hosts), *common, "--out", out]) == 0
    (t,) = read_trajectories(out)
    assert t.environment.backend == "ssh" and t.outcome.status == "completed"
    assert all(s.observation.data["backend"] == "ssh" for s in t.steps)
    display = [n for n in parse_tree(t.steps[-1].observation.text).nodes if "editable" in n.states]
    assert [n.value for n in display] == ["13"]


def _clicking_agent(messages: list[dict]) -> str:
    """An agent that reads the tree it is shown and clicks 7, +, 6 and = at their centres, then stops."""
    plan = ["7", "+", "6", "="]
    done = sum(1 for m in messages if m["role"] == "assistant")
    if done == len(plan):
        return '{"done": true}'
    screen = messages[-1]["content"]
    for node in parse_tree(screen).nodes:
        if node.role == "push button" and node.name.split(" ")[0] == plan[done] and node.centre:
            x, y = node.centre
            return json.dumps({"action": "click", "x": x, "y": y})
    return json.dumps({"action": "pyautogui", "code": "pyautogui.press('esc')"})


def test_llm_agent_computes_through_clicks_on_the_tree(tmp_path) -> None:
    tasks = _task_file(tmp_path / "tasks.jsonl", ["calc-add"])
    out = str(tmp_path / "out")
    with scripted_chat_server(_clicking_agent) as server:
        llm = ["--policy", "llm", "--llm-base-url", server.base_url, "--llm-model", "scripted"]
        assert main([*llm, "--tasks", tasks, "--no-screenshots", "--out", out, "--no-progress"]) == 0
        system = server.requests[-1]["messages"][0]["content"]
    assert '{"action": "click", "x": 120, "y": 240}' in system  # the desktop's own action space
    (t,) = read_trajectories(out)
    assert t.outcome.status == "completed" and len(t.steps) == 4
    assert all(s.action.kind == "computer" and s.action.text.startswith("pyautogui.click(") for s in t.steps)
    display = [n for n in parse_tree(t.steps[-1].observation.text).nodes if "editable" in n.states]
    assert [n.value for n in display] == ["13"]


def test_vm_without_a_built_image_says_how_to_build_it(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("AGENTWORLD_CACHE_DIR", str(tmp_path / "empty-cache"))
    assert main(["--vm", "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert "infra/desktop-vm/build.sh" in capsys.readouterr().err
