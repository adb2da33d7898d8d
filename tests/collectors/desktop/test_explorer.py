"""The desktop explorer's decisions on tree texts in the desktop sandbox's form: pure logic, no display.
Actions go through the desktop sandbox's own parser (sandboxes.desktop.parse_action)."""

from __future__ import annotations

import random
import re

from collectors.desktop.explorer import CLICKABLE, DesktopExplorer
from sandboxes.desktop import parse_action
from sandboxes.desktop.tree_text import parse_tree
from schemas.invalid_actions import INVALID, invalid_action_observation
from schemas.records import Action, Observation, Task

CALCULATOR = """Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(0,0 360x616)
  [1] text "" value="" states=editable @(12,60 336x40)
  [2] push button "7" @(12,300 80x50)
  [3] push button "6" @(100,300 80x50)
  [4] push button "+" @(268,420 80x50)
  [5] push button "=" @(268,480 80x50)
  [6] toggle button "Mode" states=checked @(200,8 60x30)"""

SAVE_DIALOG = """Focused: mousepad — Save As
[0] frame "Untitled 1 - Mousepad" @(0,0 800x600)
  [1] text "" value="hello" states=editable @(0,80 800x500)
  [2] push button "Bold" @(10,40 30x30)
[3] dialog "Save As" states=active @(150,100 500x400)
  [4] text "Name" value="" states=editable,focused @(250,130 300x30)
  [5] push button "Cancel" @(160,110 80x30)
  [6] push button "Save" @(560,110 80x30)"""

TERMINAL = (
    "Focused: terminal — agent@desktop: ~\n"
    '[0] frame "agent@desktop: ~" value="no accessibility tree: this program shows only its window"'
    " @(0,0 484x316)"
)

TASK = Task(id="calc", metadata={"apps": ["calculator"]})


def explorer(seed: int = 0, task: Task = TASK, text: str = CALCULATOR, **options) -> DesktopExplorer:
    policy = DesktopExplorer(parse_action, **options)
    policy.reset(task, Observation("desktop_a11y_tree", text), random.Random(seed))
    return policy


def walk(policy: DesktopExplorer, text: str, steps: int) -> list[Action | None]:
    return [policy.act(Observation("desktop_a11y_tree", text)) for _ in range(steps)]


def centres(text: str, roles: set[str] | None = None) -> set[tuple[int, int]]:
    return {n.centre for n in parse_tree(text).nodes if n.centre and (roles is None or n.role in roles)}


def test_same_seed_same_walk_and_other_seeds_differ() -> None:
    first = [a.text if a else None for a in walk(explorer(7), CALCULATOR, 25)]
    again = [a.text if a else None for a in walk(explorer(7), CALCULATOR, 25)]
    other = [a.text if a else None for a in walk(explorer(8), CALCULATOR, 25)]
    assert first == again and first != other


def test_clicks_land_on_node_centres_and_typing_goes_into_editable_nodes() -> None:
    targets = centres(CALCULATOR)
    kinds = set()
    for seed in range(12):
        policy = explorer(seed, end_probability=0.0, invalid_probability=0.0, pyautogui_share=0.0)
        for action in walk(policy, CALCULATOR, 15):
            assert action is not None and action.kind == "computer", action
            assert action.text.startswith("pyautogui.") or action.text.startswith("time.sleep")
            args = action.arguments
            kinds.add(args["action"])
            if args["action"] in ("click", "double_click", "right_click", "move", "scroll"):
                assert (args["x"], args["y"]) in targets, args
            if args["action"] == "type":
                assert re.fullmatch(r"\d+[-+*/]\d+", args["text"]), args  # an expression, then Enter
    assert {"click", "type", "press"} <= kinds
    # The display is not focused: typing into it starts with a click on its centre.
    assert (180, 80) in targets


def test_typing_into_an_unfocused_field_clicks_it_first_then_types_then_submits() -> None:
    policy = explorer(0, end_probability=0.0, invalid_probability=0.0, pyautogui_share=0.0)
    field = parse_tree(CALCULATOR).nodes[1]
    first = policy._action(policy._type_into(field, "calculator"))
    rest = walk(policy, CALCULATOR, 2)
    assert first.arguments == {"action": "click", "x": 180, "y": 80}
    assert rest[0].arguments["action"] == "type" and rest[1].arguments == {"action": "press", "key": "enter"}


def test_a_dialog_takes_the_clicks_and_its_name_field_gets_a_file_name() -> None:
    inside = centres(SAVE_DIALOG) - centres("\n".join(SAVE_DIALOG.split("\n")[:4]))
    typed = []
    for seed in range(10):
        policy = explorer(
            seed, Task(id="e", metadata={"apps": ["editor"]}), SAVE_DIALOG, invalid_probability=0.0
        )
        policy.pyautogui_share = 0.0
        for action in walk(policy, SAVE_DIALOG, 6):
            assert action is not None
            args = action.arguments
            if args.get("action") in ("click", "double_click", "right_click"):
                assert (args["x"], args["y"]) in inside, args
            if args.get("action") == "type":
                typed.append(args["text"])
    assert any(text in ("notes.txt", "todo.txt", "draft.md", "report.txt") for text in typed)


def test_half_the_valid_moves_are_sent_as_pyautogui_code() -> None:
    policy = explorer(3, end_probability=0.0, invalid_probability=0.0, pyautogui_share=1.0)
    actions = walk(policy, CALCULATOR, 20)
    assert all(a is not None and a.kind == "pyautogui" for a in actions)
    assert all(a.arguments["code"] == a.text for a in actions)
    mixed = walk(explorer(3, end_probability=0.0, invalid_probability=0.0), CALCULATOR, 40)
    assert {a.kind for a in mixed} == {"computer", "pyautogui"}


def test_deliberate_errors_miss_every_node_or_do_not_run() -> None:
    policy = explorer(5, end_probability=0.0, invalid_probability=1.0)
    tree = parse_tree(CALCULATOR)
    seen = set()
    for action in walk(policy, CALCULATOR, 40):
        assert action is not None
        if action.kind == INVALID:  # the parser refused it: the runner records its reason
            seen.add("refused")
            assert action.arguments["error"]
        elif action.kind == "pyautogui":
            code = action.arguments["code"]
            seen.add("misspelt" if "clik(" in code else "code")
            point = re.search(r"x=(\d+), y=(\d+)", code)
            if "clik(" not in code and point:
                assert tree.node_at(int(point.group(1)), int(point.group(2))) is None, code
        else:
            x, y = action.arguments["x"], action.arguments["y"]
            seen.add("click")
            assert tree.node_at(x, y) is None
    assert {"misspelt", "refused"} <= seen and ("click" in seen or "code" in seen)


def test_a_focused_terminal_gets_commands_and_starts_other_applications() -> None:
    task = Task(id="t", metadata={"apps": ["terminal"]})
    typed = []
    for seed in range(8):
        policy = explorer(
            seed, task, TERMINAL, end_probability=0.0, invalid_probability=0.0, pyautogui_share=0.0
        )
        typed += [
            a.arguments["text"] for a in walk(policy, TERMINAL, 10) if a.arguments.get("action") == "type"
        ]
    assert any(text in ("gnome-calculator &\n", "mousepad &\n") for text in typed)
    assert any(text.endswith("\n") and "&" not in text and text != "exit\n" for text in typed)


def test_applications_are_closed_after_the_first_steps_and_walks_end() -> None:
    closes, lengths = 0, []
    for seed in range(20):
        policy = explorer(seed, invalid_probability=0.0, pyautogui_share=0.0, min_steps=2)
        actions = walk(policy, CALCULATOR, 60)
        done = actions.index(None) if None in actions else len(actions)
        lengths.append(done)
        closes += sum(1 for a in actions[:done] if a.arguments.get("keys") in (["ctrl", "q"], ["alt", "f4"]))
    assert closes > 0 and max(lengths) < 60 and min(lengths) >= 2


def test_roles_the_explorer_clicks_include_gtk_buttons() -> None:
    assert {"push button", "toggle button", "menu item", "check box"} <= CLICKABLE


# GTK 4 draws its title bar inside the window: as a real calculator's tree shows it.
TITLE_BAR = """Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(462,169 355x486)
  [1] filler "AdwGizmo" @(663,169 148x46)
    [2] push button "Minimize" @(708,180 24x24)
    [3] push button "Maximize" @(745,180 24x24)
    [4] push button "Close" @(782,180 24x24)
  [5] scroll pane "" @(462,334 355x41)
    [6] text "GtkSourceView" states=focused,editable @(462,335 343x32)
  [7] push button "7 7" @(478,457 55x40)
  [8] push button "8 8" @(545,457 55x40)"""


def test_title_bar_buttons_are_rare_moves_and_minimise_is_never_clicked() -> None:
    minimise, close = (720, 192), (794, 192)
    clicks = []
    for seed in range(30):
        policy = explorer(
            seed, text=TITLE_BAR, end_probability=0.0, invalid_probability=0.0, pyautogui_share=0.0
        )
        for action in walk(policy, TITLE_BAR, 4):  # up to min_steps: no closing yet
            if action.arguments.get("action") in ("click", "double_click", "right_click"):
                clicks.append((action.arguments["x"], action.arguments["y"]))
    assert clicks and minimise not in clicks and close not in clicks


def test_a_walk_ends_when_every_window_is_gone() -> None:
    policy = explorer(0, end_probability=0.0, invalid_probability=0.0)
    assert policy.act(Observation("desktop_a11y_tree", CALCULATOR)) is not None
    assert policy.act(Observation("desktop_a11y_tree", "Focused: none")) is None


def test_after_an_action_that_never_ran_the_last_screen_is_explored() -> None:
    refused = invalid_action_observation("pyautogui code does not parse: '(' was never closed (line 1)")
    targets = centres(CALCULATOR)
    for seed in range(10):
        policy = explorer(seed, end_probability=0.0, invalid_probability=0.0, pyautogui_share=0.0)
        policy.state.pending.clear()
        actions = [policy.act(refused) for _ in range(6)]
        assert all(a is not None for a in actions)
        for action in actions:
            if "x" in action.arguments and action.arguments["action"] != "drag":
                assert (action.arguments["x"], action.arguments["y"]) in targets
