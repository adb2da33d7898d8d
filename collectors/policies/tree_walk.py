"""The step loop of the explorers that walk a screen's tree of nodes (android, desktop).

Each step parses the observation text into the domain's tree, keeps the last screen when the runner
answers an action that never ran, plays a move queued by the last one (Enter after typing), ends
the episode now and then after `min_steps`, sends a deliberately wrong move with
`invalid_probability`, and otherwise picks a move of this screen by weight. What a move is, and
which moves a screen offers, is the domain's (`_candidates`, `_invalid`, `_action`).
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from collectors.policies.explorer import NOT_A_KNOB, Explorer
from schemas.records import Action, Observation, Task

# (action type, arguments) as the sandbox's parse_action takes them.
Move = tuple[str, dict]
Tree = TypeVar("Tree")


@dataclass
class WalkState(Generic[Tree]):
    rng: random.Random
    apps: list[str]  # the task's logical apps (metadata.apps) the domain knows, in start order
    screen: Tree  # the last tree the screen showed
    steps: int = 0
    pending: list[Move] = field(default_factory=list)


@dataclass(eq=False)
class TreeWalk(Explorer, Generic[Tree]):
    parse_action: Callable[[str, dict], Action] = field(metadata=NOT_A_KNOB)
    end_probability: float = 0.05
    min_steps: int = 4
    invalid_probability: float = 0.08
    state: WalkState[Tree] | None = field(default=None, init=False, repr=False)

    known_apps: ClassVar[Container[str]]  # the app names metadata.apps may hold

    @staticmethod
    @abstractmethod
    def parse_tree(text: str) -> Tree:
        """The observation text as the domain's tree."""

    @staticmethod
    @abstractmethod
    def shows_screen(tree: Tree) -> bool:
        """False for the runner's answer to an action that never ran: the screen is unchanged."""

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        apps = [str(a) for a in (task.metadata or {}).get("apps") or [] if str(a) in self.known_apps]
        self.state = WalkState(rng=rng, apps=apps, screen=self.parse_tree(observation.text or ""))

    def act(self, observation: Observation) -> Action | None:
        state = self.started(self.state)
        state.steps += 1
        tree = self.parse_tree(observation.text or "")
        if not self.shows_screen(tree):
            tree = state.screen
        elif self.nothing_left(tree, state):
            return None
        state.screen = tree
        if state.pending:
            return self._action(state.pending.pop(0))
        if state.steps > self.min_steps and state.rng.random() < self.end_probability:
            return None
        if state.rng.random() < self.invalid_probability:
            return self._invalid(tree)
        return self._action(self.choose(tree))

    def nothing_left(self, tree: Tree, state: WalkState[Tree]) -> bool:
        """Whether a fresh screen leaves nothing to explore (the episode ends)."""
        return False

    def choose(self, tree: Tree) -> Move:
        """The next valid move on this screen (public for the unit tests)."""
        state = self.started(self.state)
        moves = self._candidates(tree)
        _, build = state.rng.choices(moves, weights=[weight for weight, _ in moves])[0]
        return build()

    @abstractmethod
    def _candidates(self, tree: Tree) -> list[tuple[float, Callable[[], Move]]]:
        """The valid moves of this screen, each with its weight."""

    @abstractmethod
    def _invalid(self, tree: Tree) -> Action:
        """A move an agent gets wrong: the recording then shows the error the agent would see."""

    @abstractmethod
    def _action(self, move: Move) -> Action:
        """The move as an Action, or an `invalid` one carrying the parser's refusal."""
