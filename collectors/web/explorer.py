"""The embedded default web policy: seeded random walks over the page's actionable elements.

Each step reads the observation's element list (`data["elements"]`: bid, role, name, editable,
options), weighs the moves that make sense on this page (follow a link, press a button, fill a
field with a plausible or sometimes an invalid value, pick an option, tick a box, close a dialog,
scroll, hover, go back, open and switch tabs) and picks one with the rng given at reset, so a seed
and the same pages give the same walk. It never navigates by URL outside the task's allowed
origins: a `goto` only revisits pages already seen there (or a missing page on the start origin),
and a page that ended up elsewhere is left by going back. Links may still point elsewhere; the
sandbox blocks those requests, and the explorer then goes back.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from collectors.policies.explorer import NOT_A_KNOB, Explorer
from collectors.web.form_values import field_value, page_words
from sandboxes.web.config import origin_of
from schemas.records import Action, Observation, Task

Move = tuple[str, dict]

CLICKABLE = {"link", "button", "menuitem", "tab", "treeitem", "option", "summary"}
CHECKABLE = {"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"}
FILLABLE = {"textbox", "searchbox", "spinbutton", "combobox"}
_CLOSE = re.compile(r"^(close|cancel|dismiss|keep|ok|got it|done|no thanks|×|x|✕)\b", re.IGNORECASE)
_SUBMIT = re.compile(
    r"\b(submit|search|sign ?in|log ?in|send|save|continue|apply|check ?out|place order|register"
    r"|subscribe|add to cart|update|go|next)\b",
    re.IGNORECASE,
)
_DIALOG_LINE = re.compile(r"^\s*(\[[^\]]+\]\s+)?(alert)?dialog\b", re.MULTILINE)


@dataclass
class WalkState:
    rng: random.Random
    origins: set[str]
    start_url: str
    visited: list[str] = field(default_factory=list)
    steps: int = 0
    pending: list[Move] = field(default_factory=list)
    filled: dict[str, set[str]] = field(default_factory=dict)  # url -> bids filled on that page
    backs: int = 0  # go_back moves not yet undone by go_forward
    ending: bool = False


@dataclass
class PageView:
    """What one observation shows the explorer."""

    url: str
    title: str
    elements: list[dict]
    tabs: list[dict]
    focused_bid: str
    dialog: bool
    error: str

    @classmethod
    def of(cls, observation: Observation) -> PageView:
        data = observation.data or {}
        focused = data.get("focused_bid") or ""
        return cls(
            url=str(data.get("url") or ""),
            title=str(data.get("title") or ""),
            elements=[e for e in data.get("elements") or [] if isinstance(e, dict) and e.get("bid")],
            tabs=list(data.get("tabs") or []),
            focused_bid=str(focused),
            dialog=bool(_DIALOG_LINE.search(observation.text or "")),
            error=str(data.get("last_action_error") or ""),
        )

    def with_role(self, roles: set[str]) -> list[dict]:
        return [e for e in self.elements if e.get("role") in roles]


@dataclass(eq=False)
class WebExplorer(Explorer):
    name = "web-explorer"
    parse_action: Callable[[str, dict], Action] = field(metadata=NOT_A_KNOB)
    end_probability: float = 0.06
    min_steps: int = 3
    invalid_value_probability: float = 0.2
    missing_bid_probability: float = 0.02
    max_tabs: int = 3
    close_dialog_probability: float = 0.6
    state: WalkState | None = field(default=None, init=False, repr=False)

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        metadata = task.metadata or {}
        first_url = PageView.of(observation).url
        start_url = str(metadata.get("start_url") or first_url)
        origins = {origin_of(o) for o in metadata.get("allowed_origins") or []} - {""}
        if not origins and origin_of(start_url):
            origins = {origin_of(start_url)}
        self.state = WalkState(rng=rng, origins=origins, start_url=start_url)
        self._remember(first_url)

    def act(self, observation: Observation) -> Action | None:
        state = self.started(self.state)
        view = PageView.of(observation)
        self._remember(view.url)
        state.steps += 1
        if state.ending:
            return None
        if state.pending:
            return self._action(state.pending.pop(0))
        if state.steps > self.min_steps and state.rng.random() < self.end_probability:
            if state.rng.random() < 0.3:  # sometimes the walk reports back, as an agent would
                state.ending = True
                return self._action(("send_msg_to_user", {"text": _summary(view)}))
            return None
        return self._action(self.choose(view))

    def allowed(self, url: str) -> bool:
        assert self.state is not None
        return origin_of(url) in self.state.origins

    def choose(self, view: PageView) -> Move:
        """The next move on this page (public for the unit tests)."""
        state = self.state
        assert state is not None
        if not self.allowed(view.url):
            return self._recover(view)
        if view.dialog and state.rng.random() < self.close_dialog_probability:
            return self._close_dialog(view)
        if view.elements and state.rng.random() < self.missing_bid_probability:
            return _click_missing(view, state.rng)
        moves = self._candidates(view)
        weights = [weight for weight, _ in moves]
        _, build = state.rng.choices(moves, weights=weights)[0]
        return build()

    def _candidates(self, view: PageView) -> list[tuple[float, Callable[[], Move]]]:
        state = self.state
        assert state is not None
        rng = state.rng
        filled = state.filled.setdefault(view.url, set())
        links = view.with_role({"link"})
        buttons = view.with_role(CLICKABLE - {"link"})
        fields = [e for e in view.elements if e.get("editable") and not e.get("options")]
        selects = [e for e in view.elements if e.get("options")]
        checks = view.with_role(CHECKABLE)
        moves: list[tuple[float, Callable[[], Move]]] = [
            (1.5, lambda: ("scroll", {"delta_x": 0.0, "delta_y": float(rng.choice((300, 600, 900, -400)))})),
            (0.1, lambda: ("noop", {"wait_ms": rng.choice((100, 500))})),
        ]
        if links:
            moves.append((5.0, lambda: _click(rng.choice(links))))
        if buttons:
            submits = [e for e in buttons if _SUBMIT.search(str(e.get("name", "")))]
            weight = 6.0 if filled and submits else 2.5
            moves.append((weight, lambda: _click(rng.choice(submits if filled and submits else buttons))))
        empty = [e for e in fields if e["bid"] not in filled]
        if fields:
            moves.append(
                (5.0 if empty else 1.0, lambda: self._fill(rng.choice(empty or fields), view, filled))
            )
        if filled:
            moves.append((1.0, lambda: ("press", {"bid": rng.choice(sorted(filled)), "key_comb": "Enter"})))
        if selects:
            moves.append((2.0, lambda: _select(rng.choice(selects), rng)))
        if checks:
            moves.append((1.5, lambda: _click(rng.choice(checks))))
        if view.elements:
            moves.append((0.5, lambda: ("hover", {"bid": str(rng.choice(view.elements)["bid"])})))
        if any(e["bid"] == view.focused_bid and e.get("editable") for e in view.elements):
            moves.append((0.5, lambda: ("keyboard_type", {"text": rng.choice((" more", "2", " please"))})))
        if len(state.visited) > 1:
            moves.append((1.5, lambda: self._back()))
            moves.append((0.5, lambda: ("goto", {"url": rng.choice(state.visited)})))
        if state.backs:
            moves.append((0.4, lambda: self._forward()))
        if origin_of(state.start_url):
            moves.append((0.15, lambda: ("goto", {"url": origin_of(state.start_url) + "/no-such-page"})))
        self._tab_moves(view, moves)
        return moves

    def _close_dialog(self, view: PageView) -> Move:
        """A modal blocks the page behind it: press its close-like button, else Escape."""
        assert self.state is not None
        closers = [e for e in view.with_role({"button", "link"}) if _CLOSE.search(str(e.get("name", "")))]
        return _click(self.state.rng.choice(closers)) if closers else _escape()

    def _tab_moves(self, view: PageView, moves: list[tuple[float, Callable[[], Move]]]) -> None:
        state = self.state
        assert state is not None
        rng = state.rng
        if len(view.tabs) < self.max_tabs:
            moves.append((0.5, lambda: self._new_tab()))
        if len(view.tabs) > 1:
            active = next((t["index"] for t in view.tabs if t.get("active")), 0)
            others = [t["index"] for t in view.tabs if t["index"] != active]
            moves.append((1.0, lambda: ("tab_focus", {"index": int(rng.choice(others))})))
            moves.append((0.4, lambda: ("tab_close", {})))

    def _recover(self, view: PageView) -> Move:
        """Off the allowed origins (a blank new tab, a blocked or foreign page): get back on them."""
        state = self.state
        assert state is not None
        if view.url in ("", "about:blank") or state.rng.random() < 0.5 or not state.backs:
            return "goto", {"url": state.rng.choice(state.visited or [state.start_url])}
        return self._back()

    def _fill(self, element: dict, view: PageView, filled: set[str]) -> Move:
        state = self.state
        assert state is not None
        words = page_words([str(e.get("name", "")) for e in view.elements] + [view.title])
        value, _ = field_value(
            str(element.get("name", "")),
            str(element.get("role", "")),
            state.rng,
            self.invalid_value_probability,
            words,
        )
        filled.add(str(element["bid"]))
        if not value and state.rng.random() < 0.5:
            return "clear", {"bid": str(element["bid"])}
        return "fill", {"bid": str(element["bid"]), "value": value}

    def _back(self) -> Move:
        assert self.state is not None
        self.state.backs += 1
        return "go_back", {}

    def _forward(self) -> Move:
        assert self.state is not None
        self.state.backs -= 1
        return "go_forward", {}

    def _new_tab(self) -> Move:
        state = self.state
        assert state is not None
        state.pending.append(("goto", {"url": state.rng.choice(state.visited or [state.start_url])}))
        return "new_tab", {}

    def _remember(self, url: str) -> None:
        state = self.state
        if state is not None and url and self.allowed(url) and url not in state.visited:
            state.visited.append(url)

    def _action(self, move: Move) -> Action:
        kind, arguments = move
        return self.parse_action(kind, arguments)


def _click(element: dict) -> Move:
    return "click", {"bid": str(element["bid"])}


def _escape() -> Move:
    return "keyboard_press", {"key": "Escape"}


def _select(element: dict, rng: random.Random) -> Move:
    options = [str(o) for o in element.get("options") or []]
    return "select_option", {"bid": str(element["bid"]), "options": rng.choice(options)}


def _click_missing(view: PageView, rng: random.Random) -> Move:
    """A bid the page does not have: the recording then shows the error an agent would get."""
    taken = {str(e["bid"]) for e in view.elements}
    bid = str(rng.randint(1000, 9999))
    while bid in taken:
        bid = str(int(bid) + 1)
    return "click", {"bid": bid}


def _summary(view: PageView) -> str:
    return f"I explored the site and ended on {view.title or view.url}."
