"""The simulated task reward (training/simulated_verify.py) through SimulatedSandbox.verify and the fleet
runner, over a real HTTP world model whose replies are a deterministic function of the prompt."""

from __future__ import annotations

from datetime import UTC, datetime

from collectors.policies.scripted import ScriptedPolicy
from collectors.tasks import TaskSpec
from sandboxes.terminal import command_action
from sandboxes.terminal.actions import parse_action
from schemas import read_trajectories
from schemas.records import Action, Observation, Step, Task
from tests.training.test_backends import scripted_chat_server
from tests.training.test_simulator import simulated_fleet
from training.backends.openai_http import OpenAIBackend
from training.simulated_verify import CHECK_WRAPPER, verdict
from training.simulator import SimulatedSandbox

PROMPT = "agent@sandbox:~$"


def check_world(messages: list[dict]) -> str:
    """A terminal whose world holds done.txt only: a wrapped check naming done.txt prints PASS, one
    naming missing.txt prints FAIL, one naming mute.txt prints nothing; other commands print nothing."""
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    if action.startswith("verify {"):  # a verifier asked as a whole: a.txt exists, nothing else is known
        answer = "a.txt: exists\nreward: 1" if "a.txt" in action else "I cannot tell."
        return f"<predicted_observation>\n{answer}\n</predicted_observation>"
    out = []
    if "echo PASS || echo FAIL" in action:
        out = ["PASS"] if "done.txt" in action else ["FAIL"] if "missing.txt" in action else []
    screen = "\n".join([f"{PROMPT} {action}", *out, PROMPT])
    return f"<predicted_observation>\n{screen}\n</predicted_observation>"


def step(n: int, action: Action, text: str, fmt: str = "text") -> Step:
    return Step(n, action, Observation(format=fmt, text=text), datetime.now(UTC), 0.0)


def test_verdict_reads_the_line_after_the_echoed_check() -> None:
    command = CHECK_WRAPPER.format(check="test -f a")
    assert command == "{ test -f a; } >/dev/null 2>&1 && echo PASS || echo FAIL"
    assert verdict(f"$ ls\nPASS\n$ {command}\nFAIL\n$", command) is False  # an older PASS is not it
    assert verdict(f"$ {command}\nPASS\n$", command) is True
    assert verdict(f"$ {command}\n$", command) is None  # the echoed line names both words: no verdict
    assert verdict("something\nPASS\nFAIL\n$", command) is False  # not echoed: the last verdict line


def test_terminal_checks_are_asked_of_the_world_model_off_the_record() -> None:
    checks = ["test -f done.txt", "test -f missing.txt", "grep -q x mute.txt", "printf 'a\\n';\necho b"]
    task = Task(id="t", verifier={"kind": "command", "checks": checks})
    with scripted_chat_server(check_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url))
        sim.reset(task)
        sim.step(command_action("touch done.txt"))
        found = sim.verify(task, [])
        assert found is not None and found.verifier == "simulated:command"
        said = [c["said"] for c in found.details["checks"]]
        assert said == ["PASS", "FAIL", None, None]
        # the two-line check cannot be typed as one command: refused by the terminal's own parser
        assert "one line" in found.details["checks"][3]["error"]
        assert (found.details["passed"], found.details["decided"], found.details["total"]) == (1, 2, 4)
        assert found.reward == 0.25 and not found.error
        asked = len(server.requests)
        assert asked == 1 + 3  # the episode's step, then one aside turn per typeable check
        # the aside turns are not history: the next step's prompt holds the episode's own step only
        sim.step(command_action("ls"))
        prompt = "\n".join(m["content"] for m in server.requests[asked]["messages"])
        assert "touch done.txt" in prompt and "echo PASS" not in prompt
        sim.close()


def test_no_verdict_from_the_model_is_no_reward_not_a_zero() -> None:
    task = Task(id="t", verifier={"kind": "command", "command": "grep -q x mute.txt"})
    with scripted_chat_server(check_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url))
        sim.reset(task)
        found = sim.verify(task, [])
    assert found is not None and found.reward is None and "neither PASS nor FAIL" in found.error
    assert found.details["decided"] == 0


def test_pure_verifiers_run_on_the_simulated_steps_and_other_kinds_are_asked_as_a_whole() -> None:
    with scripted_chat_server(check_world) as server:
        backend = OpenAIBackend(server.base_url)
        search = SimulatedSandbox(backend, "search")
        task = Task(id="q", verifier={"kind": "answer", "accepted": ["python -m venv"]})
        search.reset(task)
        answer = Action("answer", {"text": "Use python -m venv .venv"}, "answer")
        found = search.verify(task, [step(0, answer, "Answer recorded.")])
        assert (found.verifier, found.reward) == ("simulated:answer", 1.0)
        wrong = Action("answer", {"text": "virtualenv"}, "answer")
        assert search.verify(task, [step(0, wrong, "Answer recorded.")]).reward == 0.0

        web = SimulatedSandbox(backend, "web")
        task = Task(id="w", verifier={"kind": "page_url", "url": "http://shop.test/cart#top"})
        web.reset(task)
        click = Action("click", {"bid": "3"}, "click 3")
        on_cart = step(0, click, "URL: http://shop.test/cart\nTitle: Cart\n[3] link 'Home'")
        refused = step(1, click, "invalid action: no such element", fmt="error")
        found = web.verify(task, [on_cart, refused])  # the refused action left the page as it was
        assert (found.verifier, found.reward) == ("simulated:page_url", 1.0)
        lost = web.verify(task, [step(0, click, "some text the model made up")])
        assert lost.reward is None and "no URL line" in lost.error

        mcp = SimulatedSandbox(backend, "mcp")
        task = Task(id="m", verifier={"kind": "files", "files": {"a.txt": {"exists": True}}})
        mcp.reset(task)
        found = mcp.verify(task, [])
        assert (found.verifier, found.reward, found.error) == ("simulated:files", 1.0, "")
        assert found.output == "a.txt: exists\nreward: 1"
        assert mcp.verify(Task(id="n"), []) is None  # no verifier, no verification
    # only the MCP state was asked of the model: one turn, the verifier as real episodes record it
    (request,) = server.requests
    action = 'verify {"files": {"a.txt": {"exists": true}}, "kind": "files"}'
    assert request["messages"][-1] == {"role": "user", "content": f"### Turn 1\n\n**Action:**\n{action}"}


def test_the_fleet_records_the_simulated_verdict(tmp_path) -> None:
    verifier = {"kind": "command", "checks": ["test -f done.txt", "test -f missing.txt"]}
    specs = [TaskSpec(task=Task(id="make-done", verifier=verifier), actions=[{"command": "touch done.txt"}])]
    with scripted_chat_server(check_world) as server:
        backend = OpenAIBackend(server.base_url)
        simulated_fleet(backend, lambda: ScriptedPolicy(specs, parse_action), specs, tmp_path, episodes=1)
    (trajectory,) = read_trajectories(str(tmp_path))
    assert len(trajectory.steps) == 1  # the checks' turns are not steps
    assert trajectory.outcome.reward == 0.5
    assert trajectory.outcome.verification.verifier == "simulated:command"
    assert [c["said"] for c in trajectory.outcome.verification.details["checks"]] == ["PASS", "FAIL"]


def test_android_and_desktop_checks_read_the_last_simulated_tree() -> None:
    with scripted_chat_server(check_world) as server:
        backend = OpenAIBackend(server.base_url)
        android = SimulatedSandbox(backend, "android")
        verifier = {
            "kind": "android_state",
            "checks": [{"node": {"id": "app:id/name", "text": "Ines"}}, {"package": "com.example.contacts"}],
            "device_checks": [{"shell": "settings get secure ui_night_mode", "equals": "2"}],
        }
        task = Task(id="a", verifier=verifier)
        android.reset(task)
        screen = (
            "Package: com.example.contacts  Activity: .Edit\n"
            '[0] android.widget.EditText "Ines" id=app:id/name @(0,0,100,40) editable'
        )
        tap = Action("tap", {"x": 1, "y": 1}, "tap 1 1")
        found = android.verify(task, [step(0, tap, screen, "android_ui_tree")])
        assert (found.verifier, found.reward) == ("simulated:android_state", 1.0)
        assert found.details["skipped"] == verifier["device_checks"]  # no device behind a world model
        other = screen.replace('"Ines"', '"Ana"')
        assert android.verify(task, [step(0, tap, other, "android_ui_tree")]).reward == 0.5

        desktop = SimulatedSandbox(backend, "os")
        node = {"node": {"window": "Calculator", "role": "text", "value": "13"}}
        task = Task(id="d", verifier={"kind": "desktop_state", "checks": [node]})
        desktop.reset(task)
        tree = 'Focused: Calculator — Calculator\n[1] frame "Calculator"\n  [2] text "" value="13"'
        click = Action("click", {"x": 1, "y": 1}, "click 1 1")
        found = desktop.verify(task, [step(0, click, tree, "desktop_a11y_tree")])
        assert (found.verifier, found.reward) == ("simulated:desktop_state", 1.0)
        with_file = Task(id="f", verifier={"kind": "desktop_state", "checks": [node, {"file": "notes.txt"}]})
        found = desktop.verify(with_file, [step(0, click, tree, "desktop_a11y_tree")])
        # files are in no tree: asked as a whole, and this model's answer has no reward line
        assert found.reward is None and "no reward line" in found.error
    assert len(server.requests) == 1
