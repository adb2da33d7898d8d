"""The accessibility tree read straight from the AT-SPI bus over D-Bus (python3-gi's Gio), with no
libatspi client cache: every application's shown windows and their shown descendants."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

TEXT_ROLES = frozenset(
    (
        "text",
        "entry",
        "password text",
        "paragraph",
        "terminal",
        "document text",
        "document frame",
        "editbar",
        "combo box",
    )
)
VALUE_ROLES = frozenset(("slider", "scroll bar", "progress bar", "spin button", "level bar", "dial"))
VALUE_CHARS = 400
WALK_LIMIT = 5000  # nodes visited per walk, whatever max_nodes shows
INVALID_COORD = -(2**30)
ROOT_PATH = "/org/a11y/atspi/accessible/root"
NULL_PATH = "/org/a11y/atspi/null"
ACCESSIBLE = "org.a11y.atspi.Accessible"
COMPONENT = "org.a11y.atspi.Component"
TEXT = "org.a11y.atspi.Text"
REGISTRY = "org.a11y.atspi.Registry"

Ref = tuple[str, str]  # an accessible: (bus name, object path)
VISIBLE = frozenset(("showing", "visible"))
SHOWING = frozenset(("showing",))


@dataclasses.dataclass
class App:
    bus: str
    name: str
    pid: int
    toolkit_version: str


@dataclasses.dataclass
class Node:
    ref: tuple[str, str]
    role: str
    name: str
    states: frozenset[str]
    box: tuple[int, int, int, int] = (0, 0, 0, 0)
    listed: bool = False
    value: str = ""
    children: list[Node] = dataclasses.field(default_factory=list)


class A11yReader:
    """Reads AT-SPI trees straight from the accessibility bus. Every property of every node is a
    D-Bus round trip, so the reader takes each application's cached nodes in one call
    (org.a11y.atspi.Cache.GetItems) and then asks for boxes, children and texts one tree level at a
    time, all calls of a level in flight together: a tree costs about its depth in round trips."""

    CALL_TIMEOUT_MS = 2000

    def __init__(self, session_bus: str, timeout: float) -> None:
        from gi.repository import Gio, GLib  # noqa: PLC0415 - python3-gi comes with pyatspi

        self.Gio, self.GLib = Gio, GLib
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        session = Gio.DBusConnection.new_for_address_sync(session_bus, flags, None, None)
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = session.call_sync(
                    "org.a11y.Bus",
                    "/org/a11y/bus",
                    "org.a11y.Bus",
                    "GetAddress",
                    None,
                    None,
                    0,
                    self.CALL_TIMEOUT_MS,
                    None,
                )
                break
            except GLib.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.bus = Gio.DBusConnection.new_for_address_sync(reply.unpack()[0], flags, None, None)
        # GTK 3's bridge serves its node cache (Cache.GetItems) only once some client listens for
        # events, as libatspi's own cache does: register as such a listener.
        listen = GLib.Variant("(s)", ("object:children-changed",))
        self._batch(
            [("org.a11y.atspi.Registry", "/org/a11y/atspi/registry", REGISTRY, "RegisterEvent", listen)]
        )
        self.roles, self.state_names = _atspi_names()

    def _batch(self, calls: list[tuple[str, str, str, str, Any]]) -> list[Any]:
        """Send every call, then wait for all replies; an error reply comes back as None."""
        results: list[Any] = [None] * len(calls)
        pending = [len(calls)]

        def done(conn: Any, result: Any, index: int) -> None:
            try:
                results[index] = conn.call_finish(result).unpack()
            except self.GLib.Error:
                pass
            pending[0] -= 1

        for i, (dest, path, iface, method, args) in enumerate(calls):
            self.bus.call(dest, path, iface, method, args, None, 0, self.CALL_TIMEOUT_MS, None, done, i)
        context = self.GLib.MainContext.default()
        while pending[0]:
            context.iteration(True)  # each call times out on its own, so this ends
        return results

    def _get(self, dest: str, path: str, iface: str, prop: str) -> tuple:
        return (
            dest,
            path,
            "org.freedesktop.DBus.Properties",
            "Get",
            self.GLib.Variant("(ss)", (iface, prop)),
        )

    def applications(self) -> list[App]:
        registry = self._batch([("org.a11y.atspi.Registry", ROOT_PATH, ACCESSIBLE, "GetChildren", None)])[0]
        buses = [bus for bus, _ in (registry[0] if registry else [])]
        calls = []
        for bus in buses:
            pid_args = self.GLib.Variant("(s)", (bus,))
            calls.append(
                (
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "GetConnectionUnixProcessID",
                    pid_args,
                )
            )
            calls.append(self._get(bus, ROOT_PATH, ACCESSIBLE, "Name"))
            calls.append(self._get(bus, ROOT_PATH, "org.a11y.atspi.Application", "Version"))
        replies = self._batch(calls)
        apps = []
        for i, bus in enumerate(buses):
            pid, name, version = replies[3 * i : 3 * i + 3]
            if pid is not None:
                apps.append(App(bus, name[0] if name else "", pid[0], version[0] if version else ""))
        return apps

    def frames(self, app: App) -> list[Node]:
        """The application's shown top-level windows, each with its shown descendants. The walk
        goes by states alone (children from the cache where it lists all of a node's children in
        order, else asked for level by level); then one batch asks every visible node's box."""
        info, known = self._cached(app)
        order: list[tuple[Ref | None, Ref]] = []
        seen: set[Ref] = set()
        level: list[tuple[Ref | None, Ref]] = [
            (None, r) for r in self._children_of([(app.bus, ROOT_PATH)], known)[0]
        ]
        # GTK 4 sets only VISIBLE below its windows; other toolkits mark what is on screen SHOWING.
        wanted = VISIBLE if app.toolkit_version.startswith("4.") else SHOWING
        while level and len(order) < WALK_LIMIT:
            self._fill_info([ref for _, ref in level if ref not in info], info)
            level = [(p, r) for p, r in level if r in info and r not in seen and wanted & info[r][2]]
            seen.update(r for _, r in level)
            order += level
            parents = [ref for _, ref in level if info[ref][4]]
            kids = self._children_of(parents, known)
            level = [(parent, kid) for parent, refs in zip(parents, kids, strict=True) for kid in refs]
        with_box = [ref for _, ref in order if info[ref][3]]
        # GTK 4 on X11 knows only window coordinates (and warns on every request for screen ones).
        coords = self.GLib.Variant("(u)", (1 if app.toolkit_version.startswith("4.") else 0,))
        replies = self._batch([(*ref, COMPONENT, "GetExtents", coords) for ref in with_box])
        boxes = {ref: tuple(reply[0]) for ref, reply in zip(with_box, replies, strict=True) if reply}
        placed: dict[Ref, Node] = {}
        tops: list[Node] = []
        for parent, ref in order:
            if parent is not None and parent not in placed:
                continue  # inside a node that is not on screen
            role, name, states, _, _ = info[ref]
            box = boxes.get(ref, (0, 0, 0, 0))
            listed, descend = _shown(states, box)
            if descend:
                placed[ref] = node = Node(ref, role, name, states, box, listed)
                (placed[parent].children if parent is not None else tops).append(node)
        self._fill_values(tops)
        return [top for top in tops if top.listed]

    def _cached(self, app: App) -> tuple[dict[Ref, tuple], dict[Ref, list[Ref]]]:
        """The application's cache in one call: each node's (role, name, states, has a box, child
        count), and the ordered children of the nodes whose children are all in it."""
        cache = (app.bus, "/org/a11y/atspi/cache", "org.a11y.atspi.Cache", "GetItems", None)
        reply = self._batch([cache])[0]
        info: dict[Ref, tuple] = {}
        by_parent: dict[Ref, list[tuple[int, Ref]]] = {}
        for item in reply[0] if reply else []:
            ref, _, parent, index, count, ifaces, name, role, _, states = item
            info[tuple(ref)] = self._info(role, name, states, ifaces, count)
            by_parent.setdefault(tuple(parent), []).append((index, tuple(ref)))
        known = {}
        for parent, kids in by_parent.items():
            if parent in info and len(kids) == info[parent][4] and all(index >= 0 for index, _ in kids):
                known[parent] = [ref for _, ref in sorted(kids)]
        return info, known

    def _children_of(self, refs: list[Ref], known: dict[Ref, list[Ref]]) -> list[list[Ref]]:
        unknown = [ref for ref in refs if ref not in known]
        asked = dict(zip(unknown, self._children(unknown), strict=True))
        return [known[ref] if ref in known else asked[ref] for ref in refs]

    def _info(self, role: int, name: str, states: list[int], ifaces: list[str], count: int) -> tuple:
        bits = states[0] | (states[1] << 32) if len(states) == 2 else 0
        names = frozenset(n for i, n in enumerate(self.state_names) if bits >> i & 1)
        return (self.roles.get(role, str(role)), name, names, COMPONENT in ifaces, count)

    def _fill_info(self, refs: list[tuple[str, str]], info: dict) -> None:
        """Nodes the application's cache did not hold (made after its last update)."""
        calls = []
        for ref in refs:
            calls += [
                (*ref, ACCESSIBLE, "GetRole", None),
                self._get(*ref, ACCESSIBLE, "Name"),
                (*ref, ACCESSIBLE, "GetState", None),
                (*ref, ACCESSIBLE, "GetInterfaces", None),
                self._get(*ref, ACCESSIBLE, "ChildCount"),
            ]
        replies = self._batch(calls)
        for i, ref in enumerate(refs):
            role, name, states, ifaces, count = replies[5 * i : 5 * i + 5]
            if None not in (role, name, states, ifaces, count):
                info[ref] = self._info(role[0], name[0], states[0], ifaces[0], count[0])

    def _children(self, refs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
        replies = self._batch([(*ref, ACCESSIBLE, "GetChildren", None) for ref in refs])
        return [[tuple(c) for c in reply[0] if c[1] != NULL_PATH] if reply else [] for reply in replies]

    def _fill_values(self, tops: list[Node]) -> None:
        """Text of text-holding roles and the value of ranges, for listed nodes."""
        wanted: list[Node] = []
        stack = list(tops)
        while stack:
            node = stack.pop()
            stack += node.children
            if node.listed and (node.role in TEXT_ROLES or node.role in VALUE_ROLES):
                wanted.append(node)
        calls = []
        for node in wanted:
            if node.role in TEXT_ROLES:
                calls.append((*node.ref, TEXT, "GetText", self.GLib.Variant("(ii)", (0, VALUE_CHARS + 1))))
            else:
                calls.append(self._get(*node.ref, "org.a11y.atspi.Value", "CurrentValue"))
        for node, reply in zip(wanted, self._batch(calls), strict=True):
            if reply is not None:
                node.value = _clean_value(reply[0], node.name)


def _shown(states: frozenset[str], box: tuple) -> tuple[bool, bool]:
    """(listed, descended into) for a node. GTK 4 sets only VISIBLE below the window, so a visible
    node with a real, non-empty box is listed too; a SHOWING node without a box (a GTK 3 notebook
    page) is not listed but its children are."""
    showing = "showing" in states
    if not (showing or "visible" in states):
        return False, False
    x, y, w, h = box
    real = w > 0 and h > 0 and x > INVALID_COORD and y > INVALID_COORD
    return real, real or showing


def _clean_value(value: Any, name: str) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    text = text.replace("\ufffc", "")  # object replacement characters of embedded children
    if len(text) > VALUE_CHARS:
        text = text[:VALUE_CHARS] + "…"
    return "" if text == name else text


def _atspi_names() -> tuple[dict[int, str], list[str]]:
    """Role and state names as libatspi spells them ("push button", "focused")."""
    import gi  # noqa: PLC0415

    gi.require_version("Atspi", "2.0")
    from gi.repository import Atspi  # noqa: PLC0415

    roles = {int(r): Atspi.role_get_name(r) for r in Atspi.Role.__enum_values__.values()}
    states = [
        Atspi.StateType(i).value_nick.replace("-", "_") for i in range(int(Atspi.StateType.LAST_DEFINED))
    ]
    return roles, states
