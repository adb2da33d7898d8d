"""Task verifiers of the MCP domain: what the episode left in the server's state.

Every listed condition is one check, and the reward is the share of checks that pass, times the
share of the `keep` checks that pass: `keep` holds, in the same form, what must stay as the reset
left it (the rest of a file, the main branch), which doing nothing also satisfies, so it can only
take credit away. A to-do list that gained its line but lost one of three others scores 2/3; one
left as it was scores 0.

- `files` (filesystem server): files of the server's private workdir, read on the host side,
      {"kind": "files", "files": {"notes/todo.txt": {"lines_include": ["water the plants"]}},
       "keep": {"files": {"notes/todo.txt": {"lines_include": ["buy milk"]}}}}
  A file's conditions: "exists" (true/false), "equals" (the text, outer whitespace dropped),
  "number" (the text is one number equal to it), "contains" and "lines_include" (lists: each
  substring, each whole line, is a check). A missing file fails every condition but `exists: false`.
- `git_repo` (git server): the repository in the workdir, read with git on the host side,
      {"kind": "git_repo", "branches": ["feature/mul"], "commit_counts": {"feature/mul": 4},
       "files": {"feature/mul:calc.py": {"contains": ["def mul"]}}, "clean": true,
       "keep": {"commit_counts": {"main": 3}}}
  `files` keys are `<revision>:<path>` and take a file's conditions; `clean`: no change, staged
  or not, to a tracked file.
- `memory_graph` (memory server): the knowledge graph, read through the server's own `read_graph`
  tool (outside the recorded steps),
      {"kind": "memory_graph", "entities": [{"name": "Alice", "entityType": "person"}],
       "relations": [{"from": "Alice", "to": "Project_Apollo", "relationType": "works_on"}],
       "observations": {"Weekly_Sync": ["Tuesday"]}, "min_observations": {"Weekly_Sync": 3},
       "absent": ["Dana"], "entity_count": 1, "relation_count": 0}
  Names and relation types compare case-insensitively with `_`, `-` and spaces alike
  (`Project_Apollo` is `project apollo`); observations match by substring.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from schemas.records import Verification

VERIFIER_KINDS = ("files", "git_repo", "memory_graph")
GIT_TIMEOUT_S = 10.0
FILE_CONDITIONS = ("exists", "equals", "number", "contains", "lines_include")

Check = tuple[str, bool, str]  # (what was checked, passed, what was found)


def _file_checks(label: str, text: str | None, conditions: dict[str, Any]) -> list[Check]:
    """The checks of one file's conditions; `text` None when the file does not exist."""
    unknown = set(conditions) - set(FILE_CONDITIONS)
    if unknown or not conditions:
        raise VerifierError(f"{label}: conditions must be among {list(FILE_CONDITIONS)}, got {conditions!r}")
    present, body = text is not None, text or ""
    found = repr(body[:200]) if present else "missing"
    lines = {line.strip() for line in body.splitlines()}
    checks: list[Check] = []
    if "exists" in conditions:
        checks.append((f"{label} exists={conditions['exists']}", present == conditions["exists"], found))
    if "equals" in conditions:
        checks.append((f"{label} equals", present and body.strip() == conditions["equals"].strip(), found))
    if "number" in conditions:
        number = conditions["number"]
        checks.append((f"{label} is {number}", present and _number(body) == number, found))
    for part in conditions.get("contains", []):
        checks.append((f"{label} contains {part!r}", present and part in body, found))
    for line in conditions.get("lines_include", []):
        checks.append((f"{label} has the line {line!r}", present and line.strip() in lines, found))
    return checks


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _inside(workdir: Path, relative: str) -> Path:
    path = (workdir / relative).resolve()
    if not path.is_relative_to(workdir.resolve()):
        raise VerifierError(f"files: {relative!r} is outside the workdir")
    return path


def files_checks(verifier: dict[str, Any], workdir: Path) -> list[Check]:
    files = verifier.get("files")
    if not isinstance(files, dict) or not files:
        raise VerifierError("files: needs 'files', an object of path -> conditions")
    checks = []
    for relative, conditions in files.items():
        path = _inside(workdir, relative)
        text = path.read_text(errors="replace") if path.is_file() else None
        checks += _file_checks(relative, text, conditions)
    return checks


def _git(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The repository belongs to the jail's user: safe.directory lets root's git read it.
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(workdir)},
    )


def git_checks(verifier: dict[str, Any], workdir: Path) -> list[Check]:
    known = {"kind", "branches", "commit_counts", "files", "clean"}
    if set(verifier) - known or set(verifier) == {"kind"}:
        raise VerifierError(f"git_repo: needs some of {sorted(known - {'kind'})}, got {sorted(verifier)}")
    checks: list[Check] = []
    for branch in verifier.get("branches", []):
        done = _git(workdir, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
        checks.append(
            (f"branch {branch} exists", done.returncode == 0, done.stdout.strip() or "no such branch")
        )
    for revision, count in verifier.get("commit_counts", {}).items():
        done = _git(workdir, "rev-list", "--count", revision, "--")
        found = done.stdout.strip() if done.returncode == 0 else "no such revision"
        checks.append((f"{revision} has {count} commits", found == str(count), found))
    for spec, conditions in verifier.get("files", {}).items():
        done = _git(workdir, "show", spec)
        checks += _file_checks(spec, done.stdout if done.returncode == 0 else None, conditions)
    if "clean" in verifier:
        done = _git(workdir, "status", "--porcelain", "--untracked-files=no")
        clean = done.returncode == 0 and not done.stdout.strip()
        checks.append(
            (f"clean={verifier['clean']}", clean == verifier["clean"], done.stdout.strip() or "clean")
        )
    return checks


def _name(text: object) -> str:
    return " ".join(re.sub(r"[_\-\s]+", " ", str(text)).casefold().split())


def memory_checks(verifier: dict[str, Any], graph: dict[str, Any]) -> list[Check]:
    known = {"kind", "entities", "relations", "observations", "min_observations", "absent"}
    known |= {"entity_count", "relation_count"}
    if set(verifier) - known or set(verifier) == {"kind"}:
        raise VerifierError(f"memory_graph: needs some of {sorted(known - {'kind'})}, got {sorted(verifier)}")
    entities = {_name(e.get("name")): e for e in graph.get("entities", [])}
    relations = {
        (_name(r.get("from")), _name(r.get("relationType")), _name(r.get("to")))
        for r in graph.get("relations", [])
    }
    names = sorted(e.get("name", "") for e in entities.values())
    checks: list[Check] = []
    for want in verifier.get("entities", []):
        have = entities.get(_name(want["name"]))
        typed = have is not None and (
            "entityType" not in want or _name(have.get("entityType")) == _name(want["entityType"])
        )
        checks.append(
            (f"entity {want['name']} ({want.get('entityType', 'any type')})", typed, f"entities {names}")
        )
    for want in verifier.get("relations", []):
        key = (_name(want["from"]), _name(want["relationType"]), _name(want["to"]))
        label = f"relation {want['from']} {want['relationType']} {want['to']}"
        checks.append((label, key in relations, f"{len(relations)} relation(s)"))
    for name, parts in verifier.get("observations", {}).items():
        seen = (entities.get(_name(name)) or {}).get("observations", [])
        for part in parts:
            hit = any(part.casefold() in str(o).casefold() for o in seen)
            checks.append((f"{name} observes {part!r}", hit, f"observations {seen}"))
    for name, count in verifier.get("min_observations", {}).items():
        seen = (entities.get(_name(name)) or {}).get("observations", [])
        checks.append((f"{name} has >= {count} observations", len(seen) >= count, f"{len(seen)}"))
    for name in verifier.get("absent", []):
        gone = _name(name) not in entities and not any(_name(name) in (r[0], r[2]) for r in relations)
        checks.append((f"{name} is gone", gone, f"entities {names}"))
    if "entity_count" in verifier:
        count = verifier["entity_count"]
        checks.append((f"{count} entities", len(entities) == count, f"{len(entities)}"))
    if "relation_count" in verifier:
        count = verifier["relation_count"]
        checks.append((f"{count} relations", len(relations) == count, f"{len(relations)}"))
    return checks


def graph_of(result: Any) -> dict[str, Any]:
    """The graph in a `read_graph` result: its structured content, else its text content's JSON."""
    if result.is_error:
        raise VerifierError(f"memory_graph: read_graph failed: {result.content}")
    if isinstance(result.structured_content, dict):
        return result.structured_content
    texts = [item.text for item in result.content if getattr(item, "type", "") == "text"]
    try:
        return json.loads(texts[0])
    except (IndexError, ValueError) as exc:
        raise VerifierError(f"memory_graph: read_graph answered no JSON graph: {result.content}") from exc


def _checks(verifier: dict[str, Any], workdir: Path, read_graph: Callable[[], dict[str, Any]]) -> list[Check]:
    kind = verifier["kind"]
    if kind == "files":
        return files_checks(verifier, workdir)
    if kind == "git_repo":
        return git_checks(verifier, workdir)
    return memory_checks(verifier, read_graph())


def _share(checks: list[Check]) -> float:
    return sum(ok for _, ok, _ in checks) / len(checks) if checks else 1.0


def verify_mcp(
    verifier: dict[str, Any], workdir: Path, read_graph: Callable[[], dict[str, Any]]
) -> Verification:
    """Run a `files`, `git_repo` or `memory_graph` verifier on the server's end state."""
    kind = verifier["kind"]
    keep = verifier.get("keep", {})
    if not isinstance(keep, dict):
        raise VerifierError(f"{kind}: 'keep' must be an object of checks, got {keep!r}")
    goal = _checks({k: v for k, v in verifier.items() if k != "keep"}, workdir, read_graph)
    kept = _checks({"kind": kind, **keep}, workdir, read_graph) if keep else []
    if not goal:
        raise VerifierError(f"{kind}: the verifier lists no checks")
    lines = [f"{'PASS' if ok else 'FAIL'} {what}: {found}" for what, ok, found in goal]
    lines += [f"{'PASS' if ok else 'FAIL'} keep: {what}: {found}" for what, ok, found in kept]
    return Verification(
        verifier=kind,
        reward=_share(goal) * _share(kept),
        output="\n".join(lines)[-VERIFIER_OUTPUT_CHARS:],
        details={
            "goal": f"{sum(ok for _, ok, _ in goal)}/{len(goal)}",
            "keep": f"{sum(ok for _, ok, _ in kept)}/{len(kept)}",
            "failed": [what for what, ok, _ in goal + kept if not ok],
        },
    )
