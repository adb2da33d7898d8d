"""The web explorer's decisions on synthetic observations: pure logic, no browser."""

from __future__ import annotations

import random

import pytest

from collectors.web.explorer import WebExplorer
from collectors.web.form_values import field_kind, field_value, page_words
from sandboxes.web import parse_action
from sandboxes.web.config import origin_of
from schemas.records import Observation, Task

SHOP = "http://shop.agentworld.test"
DOCS = "http://docs.agentworld.test"
TASK = Task(id="t", metadata={"start_url": SHOP + "/", "allowed_origins": [SHOP, DOCS]})

FORM = [
    {"bid": "1", "role": "link", "name": "Cart (0)", "editable": False},
    {"bid": "2", "role": "link", "name": "Python docs", "editable": False},
    {"bid": "3", "role": "textbox", "name": "Email address", "editable": True},
    {"bid": "4", "role": "textbox", "name": "Full name", "editable": True},
    {"bid": "5", "role": "spinbutton", "name": "Quantity", "editable": True},
    {"bid": "6", "role": "combobox", "name": "Colour", "editable": False, "options": ["Red", "Blue"]},
    {"bid": "7", "role": "checkbox", "name": "Gift wrap", "editable": False},
    {"bid": "8", "role": "button", "name": "Submit order", "editable": False},
    {"bid": "9", "role": "button", "name": "Open details", "editable": False},
]


def observation(
    url: str = SHOP + "/",
    elements: list[dict] | None = None,
    tabs: int = 1,
    dialog: bool = False,
    focused: str = "",
) -> Observation:
    elements = FORM if elements is None else elements
    tree = ["RootWebArea 'Shop', focused"]
    if dialog:
        tree.append("\t[40] dialog 'Details', modal")
    tree += [f"\t[{e['bid']}] {e['role']} '{e['name']}'" for e in elements]
    tab_list = [{"index": i, "url": url, "title": "Shop", "active": i == tabs - 1} for i in range(tabs)]
    data = {
        "url": url,
        "title": "Shop",
        "tabs": tab_list,
        "focused_bid": focused,
        "elements": elements,
        "last_action_error": "",
    }
    return Observation(format="a11y_tree", text=f"URL: {url}\n\n" + "\n".join(tree), data=data)


def explorer(seed: int = 0, **options: object) -> WebExplorer:
    policy = WebExplorer(parse_action, **options)  # type: ignore[arg-type]
    policy.reset(TASK, observation(), random.Random(seed))
    return policy


def walk(seed: int, steps: int, page=observation, **options: object) -> list[tuple[str, dict]]:
    policy = explorer(seed, end_probability=0.0, **options)
    actions = []
    for _ in range(steps):
        action = policy.act(page())
        assert action is not None
        actions.append((action.kind, action.arguments))
    return actions


def test_same_seed_same_walk_and_different_seeds_differ() -> None:
    assert walk(3, 40) == walk(3, 40)
    assert walk(3, 40) != walk(4, 40)


def test_every_action_is_well_formed_with_its_browsergym_text() -> None:
    policy = explorer(1, end_probability=0.0)
    kinds = set()
    for n in range(400):
        page = observation(
            url=f"{SHOP}/page/{n % 4}", tabs=1 + n % 3, dialog=n % 7 == 0, focused="3" if n % 2 else ""
        )
        action = policy.act(page)
        assert action is not None
        assert action.text.startswith(action.kind + "(")
        assert parse_action(action.kind, action.arguments) == action
        kinds.add(action.kind)
    expected = {"click", "fill", "select_option", "scroll", "hover", "go_back", "goto", "new_tab"}
    expected |= {"tab_focus", "tab_close", "press", "keyboard_type"}
    assert expected <= kinds


def test_goto_never_leaves_the_allowed_origins_even_from_a_foreign_page() -> None:
    policy = explorer(5, end_probability=0.0)
    urls = [SHOP + "/cart", DOCS + "/library/", "https://evil.example/x", "about:blank", SHOP + "/?q=1"]
    rng = random.Random(9)
    for _ in range(500):
        url = rng.choice(urls)
        action = policy.act(observation(url=url))
        assert action is not None
        if action.kind == "goto":
            assert origin_of(action.arguments["url"]) in {SHOP, DOCS}, action
        if origin_of(url) not in {SHOP, DOCS}:
            assert action.kind in ("goto", "go_back"), (url, action)
    assert "https://evil.example/x" not in policy.state.visited


def test_a_blank_new_tab_is_sent_to_a_page_already_seen() -> None:
    policy = explorer(2, end_probability=0.0)
    for _ in range(300):
        action = policy.act(observation())
        if action.kind == "new_tab":
            follow = policy.act(observation(url="about:blank", elements=[], tabs=2))
            assert follow.kind == "goto" and origin_of(follow.arguments["url"]) == SHOP
            return
    pytest.fail("no new_tab in 300 steps")


def test_tab_focus_picks_another_tab() -> None:
    focuses = [a for a in walk(6, 300, page=lambda: observation(tabs=3)) if a[0] == "tab_focus"]
    assert focuses
    assert all(args["index"] in (0, 1) for _, args in focuses)  # tab 2 is the active one


def test_an_open_dialog_is_mostly_closed() -> None:
    close = {"bid": "41", "role": "button", "name": "Close", "editable": False}
    moves = walk(7, 200, page=lambda: observation(elements=FORM + [close], dialog=True))
    closing = [m for m in moves if m[0] == "click" and m[1]["bid"] == "41"]
    assert len(closing) > len(moves) * 0.4
    no_button = walk(7, 100, page=lambda: observation(elements=FORM, dialog=True))
    assert ("keyboard_press", {"key": "Escape"}) in no_button


def test_fields_get_values_of_their_kind_and_selects_their_own_options() -> None:
    moves = walk(8, 300, invalid_value_probability=0.0)
    fills = {args["bid"]: args["value"] for kind, args in moves if kind == "fill"}
    assert "@" in fills["3"] and fills["5"].isdigit() and " " in fills["4"]
    selected = {args["options"] for kind, args in moves if kind == "select_option"}
    assert selected and selected <= {"Red", "Blue"}


def test_after_filling_the_submit_button_is_preferred() -> None:
    moves = walk(10, 400)
    clicks = [args["bid"] for kind, args in moves if kind == "click"]
    assert clicks.count("8") > clicks.count("9")  # "Submit order" over "Open details"


def test_invalid_values_sometimes_and_only_when_asked() -> None:
    rng = random.Random(0)
    always = {field_value("Email", "textbox", rng, 1.0)[0] for _ in range(50)}
    assert all("@" not in v or not v.split("@")[0] or not v.split("@")[1] or " " in v for v in always)
    never = [field_value("Email", "textbox", rng, 0.0) for _ in range(50)]
    assert all(not bad and "@example." in v for v, bad in never)


def test_field_kinds_and_search_terms_from_the_page() -> None:
    assert field_kind("E-mail", "textbox") == "email"
    assert field_kind("Qty", "textbox") == "quantity"
    assert field_kind("", "searchbox") == "search"
    assert field_kind("Anything", "spinbutton") == "quantity"
    assert field_kind("Your name", "textbox") == "name"
    words = page_words(["Walnut desk lamp", "Add to cart", "Lamp shade"])
    assert words == ["walnut", "desk", "lamp", "shade"]
    value, bad = field_value("Search products", "searchbox", random.Random(1), 0.0, words)
    assert not bad and value


def test_a_missing_bid_is_sometimes_clicked_to_record_the_error() -> None:
    moves = walk(11, 400, missing_bid_probability=0.05)
    bids = {e["bid"] for e in FORM}
    assert any(kind == "click" and args["bid"] not in bids for kind, args in moves)
    assert all(
        args["bid"] in bids for kind, args in walk(11, 400, missing_bid_probability=0.0) if "bid" in args
    )


def test_episodes_end_after_the_minimum_with_the_given_probability() -> None:
    policy = explorer(12, end_probability=1.0, min_steps=2)
    first = [policy.act(observation()) for _ in range(2)]
    assert all(a is not None for a in first)
    last = policy.act(observation())
    if last is not None:  # a report to the user comes before the end
        assert last.kind == "send_msg_to_user" and last.arguments["text"]
        assert policy.act(observation()) is None
    lengths = []
    for seed in range(40):
        policy = explorer(seed, end_probability=0.25, min_steps=1)
        n = 0
        while policy.act(observation()) is not None:
            n += 1
        lengths.append(n)
    assert min(lengths) >= 1 and max(lengths) > 3


def test_a_page_without_elements_still_gets_a_move() -> None:
    moves = walk(13, 50, page=lambda: observation(elements=[]))
    assert {kind for kind, _ in moves} <= {"scroll", "noop", "goto", "go_back", "new_tab", "go_forward"}
