"""Edit scripts: an observation written as its change from the previous observation of the trajectory.

Most actions change a few lines of a screen or a tree, yet a full-target world model writes all of it
every turn. An exact edit script against the previous observation is a far shorter target (DESIGN.md
section 4d), and `apply` rebuilds the full observation from it, so everything downstream still hands
out and scores full observations.

A turn's target text has one of two forms (`TARGET_FORMS`), told apart by its first line:

- full: the observation itself, exactly as recorded;
- delta: the line `@@ edit @@`, then operations in the order of the previous observation's lines,
  each an operation line and, for replace and insert, the new lines after it, verbatim:

      @@ edit @@
      @@ replace 3..4 @@           previous lines 3 to 4 become the lines below
      $ ls
      @@ insert after [17] @@      new lines after the line of node [17]
          [18] label "13" @(707,307 91x21)
      @@ delete [20]..[22]+1 @@    from node [20]'s line to the line after node [22]'s, gone

  `@@ edit @@` alone means unchanged. Observations are split at "\\n" only, so a trailing newline is
  an empty last line and a "\\r" stays in its line.

Where (KEY): `N` is line N of the previous observation (1-based; `insert after 0` inserts at the
top), in every domain. In accessibility trees (web, os, android: one node a line; the domain
record's `node_ids`, schemas.domains) `[ID]` is the line of the node with that id in the previous
observation and `[ID]+K` the K-th line after it (web text nodes have no id). os and android number
their nodes in order ([0], [1], ...: `renumbered_ids`), so one inserted node renumbers every node
after it: there lines are compared without their number, and `apply` numbers the nodes again in order.

`diff` gives the full observation whenever it is no longer than the script (a new page, a new tool
result; mcp, search and swe results mostly), and checks every script it writes by applying it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from schemas.domains import find_record

TARGET_FORMS = ("full", "delta")
HEADER = "@@ edit @@"

_KEY = r"(?:\d+|\[[^\]\s]+\](?:\+\d+)?)"
_OP_RE = re.compile(rf"^@@ (replace|delete) ({_KEY})(?:\.\.({_KEY}))? @@$|^@@ insert after ({_KEY}) @@$")
_KEY_RE = re.compile(r"^(?:(\d+)|\[([^\]\s]+)\](?:\+(\d+))?)$")
_NODE_ID_RE = re.compile(r"^\s*\[([^\]\s]+)\] ")
_NUMBER_RE = re.compile(r"^( *)\[\d+\] ")
# An operation line costs about this many characters: an unchanged stretch shorter than it is cheaper
# to write out again than to step over with a second operation.
_OP_CHARS = 24


class EditScriptError(ValueError):
    """A delta target that does not apply to the previous observation; the message says where."""


def target_form(target: str) -> str:
    """Which form `target` has: "delta" for an edit script, "full" for a whole observation."""
    return "delta" if target.split("\n", 1)[0] == HEADER else "full"


@dataclass(frozen=True)
class _Op:
    kind: str  # replace, delete or insert
    start: int  # 0-based index of the first previous line replaced or deleted, or the insert position
    stop: int  # one past the last previous line replaced or deleted (== start for an insert)
    lines: tuple[str, ...]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _unique_ids(lines: Sequence[str]) -> dict[str, int]:
    """Node id -> line index, for the ids that occur on exactly one line."""
    seen: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        found = _NODE_ID_RE.match(line)
        if found:
            seen.setdefault(found.group(1), []).append(i)
    return {node: at[0] for node, at in seen.items() if len(at) == 1}


def _has_node_ids(domain: str) -> bool:
    record = find_record(domain)
    return record is not None and record.node_ids


def _renumbered(domain: str) -> bool:
    record = find_record(domain)
    return record is not None and record.renumbered_ids


def _keys(lines: Sequence[str], domain: str) -> list[str]:
    """The KEY of every previous line: a node id (or the nearest one above and an offset) in trees,
    else its line number."""
    if not _has_node_ids(domain):
        return [str(i + 1) for i in range(len(lines))]
    by_line = {i: node for node, i in _unique_ids(lines).items()}
    keys, anchor = [], None
    for i in range(len(lines)):
        if i in by_line:
            anchor = (by_line[i], i)
            keys.append(f"[{anchor[0]}]")
        elif anchor is not None:
            keys.append(f"[{anchor[0]}]+{i - anchor[1]}")
        else:
            keys.append(str(i + 1))
    return keys


def _comparable(lines: Sequence[str], domain: str) -> list[str]:
    if not _renumbered(domain):
        return list(lines)
    return [_NUMBER_RE.sub(r"\1[] ", line, count=1) for line in lines]


def _renumber(lines: list[str]) -> list[str]:
    counter = iter(range(len(lines)))
    return [_NUMBER_RE.sub(lambda m: f"{m.group(1)}[{next(counter)}] ", line, count=1) for line in lines]


def _hunks(prev: list[str], cur: list[str], domain: str) -> list[tuple[int, int, int, int]]:
    """Changed regions (prev start, prev stop, cur start, cur stop), neighbours merged where the
    unchanged lines between them are shorter than an operation line."""
    matcher = SequenceMatcher(None, _comparable(prev, domain), _comparable(cur, domain), autojunk=False)
    hunks: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if hunks and sum(len(line) + 1 for line in prev[hunks[-1][1] : i1]) < _OP_CHARS:
            hunks[-1] = (hunks[-1][0], i2, hunks[-1][2], j2)
        else:
            hunks.append((i1, i2, j1, j2))
    return hunks


def _script(prev: list[str], cur: list[str], domain: str) -> str:
    keys = _keys(prev, domain)
    out = [HEADER]
    for i1, i2, j1, j2 in _hunks(prev, cur, domain):
        if i1 == i2:
            out.append(f"@@ insert after {keys[i1 - 1] if i1 else '0'} @@")
        else:
            where = keys[i1] if i2 - i1 == 1 else f"{keys[i1]}..{keys[i2 - 1]}"
            out.append(f"@@ {'delete' if j1 == j2 else 'replace'} {where} @@")
        out.extend(cur[j1:j2])
    return "\n".join(out)


def diff(prev: str, cur: str, domain: str) -> str:
    """The target a world model is trained to write for `cur` after `prev`: an edit script, or `cur`
    itself when that is no longer. `apply(prev, diff(prev, cur, domain), domain) == cur` always."""
    script = _script(_lines(prev), _lines(cur), domain)
    full_is_ambiguous = target_form(cur) == "delta"
    if len(cur) <= len(script) and not full_is_ambiguous:
        return cur
    try:
        exact = apply(prev, script, domain) == cur
    except EditScriptError:
        exact = False
    if exact:
        return script
    if full_is_ambiguous:
        # only when cur both opens with the header and holds operation lines of its own
        raise EditScriptError(f"an observation that opens with {HEADER!r} has no exact target")
    return cur


def _resolve(key: str, ids: dict[str, int], n: int) -> int:
    """The 0-based previous line a KEY names."""
    found = _KEY_RE.match(key)
    if found is None:
        raise EditScriptError(f"{key!r} is not a line number, [ID] or [ID]+K")
    number, node, offset = found.groups()
    if number is not None:
        at = int(number) - 1
    elif node not in ids:
        raise EditScriptError(f"the previous observation has no single node [{node}]")
    else:
        at = ids[node] + int(offset or 0)
    if not 0 <= at < n:
        raise EditScriptError(f"{key} is outside the previous observation's {n} lines")
    return at


def _parse(prev: list[str], body: list[str], domain: str) -> list[_Op]:
    ids = _unique_ids(prev) if _has_node_ids(domain) else {}
    ops: list[_Op] = []
    for number, line in enumerate(body, start=2):
        found = _OP_RE.match(line)
        if found is None:
            if not ops or ops[-1].kind == "delete":
                raise EditScriptError(f"line {number} ({line[:60]!r}) follows no replace or insert operation")
            ops[-1] = _Op(ops[-1].kind, ops[-1].start, ops[-1].stop, (*ops[-1].lines, line))
            continue
        kind, first, last, after = found.groups()
        if kind is None:
            start = 0 if after == "0" else _resolve(after, ids, len(prev)) + 1
            ops.append(_Op("insert", start, start, ()))
            continue
        start = _resolve(first, ids, len(prev))
        stop = _resolve(last, ids, len(prev)) + 1 if last else start + 1
        if stop <= start:
            raise EditScriptError(f"line {number}: the range {first}..{last} runs backwards")
        ops.append(_Op(kind, start, stop, ()))
    return ops


def apply(prev: str, target: str, domain: str) -> str:
    """The full observation a target stands for: `target` itself in the full form, else the edit
    script applied to `prev`. Raises EditScriptError when the script does not apply."""
    if target_form(target) == "full":
        return target
    before = _lines(prev)
    ops = _parse(before, _lines(target)[1:], domain)
    out: list[str] = []
    done = 0  # previous lines consumed so far
    for op in ops:
        if op.kind != "delete" and not op.lines:
            raise EditScriptError(f"@@ {op.kind} @@ at previous line {op.start + 1} has no new lines")
        if op.start < done:
            raise EditScriptError(
                f"operations overlap or run out of order at previous line {op.start + 1} "
                f"(lines up to {done} are already edited)"
            )
        out.extend(before[done : op.start])
        out.extend(op.lines)
        done = op.stop
    out.extend(before[done:])
    if _renumbered(domain):
        out = _renumber(out)
    return "\n".join(out)
