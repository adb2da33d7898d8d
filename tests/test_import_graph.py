"""The import graph of our packages, read from the source (tests/import_graph.py): no cycle between
files, none between the parts of a package (its subpackages and modules) at any depth, and no import
that the README's package table forbids. Function-local and TYPE_CHECKING imports count too, and so
do string imports (`importlib.import_module("a.b")`, an entry string `"a.b:c"` handed to a loader):
a cycle hidden in a function, or a layer crossed by a string, is still there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.import_graph import (
    ROOT,
    cycles,
    import_graph,
    imports,
    module_files,
    package_cycles,
    string_imports,
)

PACKAGES = (
    "schemas",
    "sandboxes",
    "collectors",
    "beam_pipelines",
    "training",
    "infra",
    "benchmarks",
    "examples",
    "tests",
)
IMPORTED_BY_NOTHING = {"infra"}  # images, manifests and host scripts


def allowed_imports(readme: str) -> dict[str, set[str]]:
    """The README's package table: folder -> the packages of ours it may import."""
    rows = re.findall(r"^\| `(\w+)/` \|.*\| ([^|]+) \|$", readme, re.MULTILINE)
    folders = {folder for folder, _ in rows}
    allowed: dict[str, set[str]] = {}
    for folder, may_import in rows:
        may_import = may_import.strip()
        if may_import == "everything":
            allowed[folder] = folders - IMPORTED_BY_NOTHING - {folder}
        elif may_import in ("nothing of ours", "-"):
            allowed[folder] = set()
        else:
            allowed[folder] = set(re.findall(r"`(\w+)`", may_import))
    return allowed


def forbidden_imports(graph: Mapping[str, Iterable[str]], allowed: Mapping[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        package = module.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other != package and (other in IMPORTED_BY_NOTHING or other not in allowed[package]):
                found.append(f"{module} -> {target}")
    return found


# --- the checker itself, on small made-up trees ---------------------------------------------------


def test_cycles_are_found_and_an_acyclic_graph_has_none() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": set(), "f": {"g"}, "g": {"f"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["f", "g"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)} | {"m5000": {"m0"}}  # deeper than recursion goes
    assert [len(c) for c in cycles(chain)] == [5001]


def test_imports_resolve_to_modules_or_packages(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.core import VALUE\n")
    (tmp_path / "pkg" / "core.py").write_text("VALUE = 1\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from .. import core\n")
    (tmp_path / "pkg" / "sub" / "leaf.py").write_text(
        "from . import helper\nfrom pkg import VALUE\n\n\ndef late():\n    import pkg.core\n"
    )
    (tmp_path / "pkg" / "sub" / "helper.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .leaf import late\n"
    )
    (tmp_path / "other.py").write_text("import pkg\n")  # outside the packages: not in the graph
    modules = module_files(tmp_path, ["pkg"])
    graph, unresolved = import_graph(modules, ["pkg"])
    assert graph == {
        "pkg": {"pkg.core"},
        "pkg.core": set(),
        "pkg.sub": {"pkg.core"},
        "pkg.sub.leaf": {"pkg.sub.helper", "pkg", "pkg.core"},
        "pkg.sub.helper": {"pkg.sub.leaf"},
    }
    assert unresolved == []
    assert cycles(graph) == [["pkg.sub.helper", "pkg.sub.leaf"]]
    assert [(i.source, i.lazy) for i in imports("pkg.sub.leaf", modules["pkg.sub.leaf"])] == [
        ("pkg.sub", False),
        ("pkg", False),
        ("pkg.core", True),  # in a function
    ]
    assert [i.lazy for i in imports("pkg.sub.helper", modules["pkg.sub.helper"])] == [False, True]
    (tmp_path / "pkg" / "core.py").write_text("from pkg.missing import x\nimport typing\n")
    assert import_graph(module_files(tmp_path, ["pkg"]), ["pkg"])[1] == ["pkg.core: pkg.missing (x)"]


def test_the_table_is_read_and_applied() -> None:
    table = (
        "| folder | what | may import |\n|---|---|---|\n| `low/` | base | nothing of ours |\n"
        "| `mid/` | uses low | `low` |\n| `top/` | all | everything |\n| `infra/` | setup | - |\n"
    )
    allowed = allowed_imports(table)
    assert allowed["low"] == set() and allowed["mid"] == {"low"} and allowed["infra"] == set()
    assert allowed["top"] == {"low", "mid"}
    graph = {"low.a": {"mid.b"}, "mid.b": {"low.a"}, "top.c": {"mid.b", "infra.d"}, "infra.d": set()}
    assert forbidden_imports(graph, allowed) == ["low.a -> mid.b", "top.c -> infra.d"]


def _tree(root: Path, files: Mapping[str, str]) -> dict[str, set[str]]:
    """Writes the files (path -> source), every folder a package, and returns their import graph."""
    for name, source in files.items():
        path = root / name
        for folder in reversed(path.relative_to(root).parents):  # the outermost first
            if folder != Path("."):
                (root / folder).mkdir(exist_ok=True)
                (root / folder / "__init__.py").touch()
        path.write_text(source)
    packages = sorted({Path(name).parts[0] for name in files})
    graph, unresolved = import_graph(module_files(root, packages), packages)
    assert unresolved == []
    return graph


def test_package_cycles_are_found_at_every_depth_where_files_have_none(tmp_path: Path) -> None:
    graph = _tree(
        tmp_path,
        {
            "top/a/x.py": "from top.b import y\n",  # a -> b
            "top/b/y.py": "VALUE = 1\n",
            "top/b/z.py": "def late():\n    from top.a import w\n",  # b -> a, in a function
            "top/a/w.py": "",
            "top/c/deep/p.py": "import top.c.other.q\n",  # two levels down: deep -> other
            "top/c/other/q.py": "",
            "top/c/other/r.py": "from top.c.deep import s\n",  # other -> deep
            "top/c/deep/s.py": "",
            "top/m.py": "from top.d import n\n",  # a module and a subpackage of one package
            "top/d/n.py": "",
            "top/d/o.py": "import top.m\n",
            "top/e/__init__.py": "from top.e import f\n",  # a package's own __init__ is no part of it
            "top/e/f.py": "import top.e\n",
            "low/u.py": "from high.v import V\n",  # two top-level packages
            "high/v.py": "V = 1\n",
            "high/t.py": "import low.u\n",
        },
    )
    assert cycles(graph) == [["top.e", "top.e.f"]]  # the files' only circle: __init__ and its module
    assert package_cycles(graph) == [
        ["high", "low"],
        ["top.a", "top.b"],
        ["top.c.deep", "top.c.other"],
        ["top.d", "top.m"],
    ]
    del graph["top.b.z"], graph["high.t"], graph["top.c.other.r"], graph["top.d.o"]
    assert package_cycles(graph) == []  # one way only between parts is a layering, not a cycle


def test_string_imports_are_imports_of_the_graph_and_the_table(tmp_path: Path) -> None:
    source = (
        '"""A docstring naming top.mod:func in a sentence is no import."""\n'
        "import importlib\n\n"
        'PLUGIN = "top.mod:func"  # an entry string, loaded later by name\n'
        'THIRD_PARTY = "json:dumps"\n'
        'LABEL = f"top.mod:{PLUGIN}"\n\n\n'
        "def load():\n"
        '    return importlib.import_module("top.other")\n'
    )
    graph = _tree(tmp_path, {"low/x.py": source, "top/mod.py": "", "top/other.py": ""})
    found = string_imports("low.x", tmp_path / "low" / "x.py")
    assert [(i.source, i.lazy) for i in found] == [("top.mod", True), ("json", True)]
    assert all(i.source != "top.mod" for i in imports("low.x", tmp_path / "low" / "x.py"))
    assert graph["low.x"] == {"top.mod", "top.other"}
    allowed = {"low": set(), "top": {"low"}}
    assert forbidden_imports(graph, allowed) == ["low.x -> top.mod", "low.x -> top.other"]
    (tmp_path / "low" / "x.py").write_text('PLUGIN = "top.gone:func"\n')  # a stale name is caught too
    assert import_graph(module_files(tmp_path, ["low", "top"]), ["low", "top"])[1] == ["low.x: top.gone"]


# --- our packages ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    graph, unresolved = import_graph(module_files(ROOT, PACKAGES), PACKAGES)
    assert not unresolved, "imports of ours that name no module:\n" + "\n".join(unresolved)
    return graph


def test_no_import_cycles_between_files(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, (
        "files that import each other, in a circle (move what they share into a lower module):\n"
        + ("\n".join(", ".join(cycle) for cycle in found))
    )


def test_no_import_cycles_between_packages(graph: dict[str, set[str]]) -> None:
    found = package_cycles(graph)
    crossing = [
        f"  {module} -> {loaded}"
        for cycle in found
        for module, targets in sorted(graph.items())
        for loaded in sorted(targets)
        if _part(module, cycle) and _part(loaded, cycle) not in (None, _part(module, cycle))
    ]
    assert not found, (
        "packages whose parts import each other, in a circle (move what they share into a part both "
        "import, or a lower package):\n"
        + "\n".join(", ".join(cycle) for cycle in found)
        + "\nthrough:\n"
        + "\n".join(crossing)
    )


def _part(module: str, parts: Iterable[str]) -> str | None:
    return next((part for part in parts if module == part or module.startswith(part + ".")), None)


def test_packages_import_only_what_the_readme_table_allows(graph: dict[str, set[str]]) -> None:
    allowed = allowed_imports((ROOT / "README.md").read_text())
    assert set(allowed) == set(PACKAGES), f"the README's package table lists {sorted(allowed)}"
    found = forbidden_imports(graph, allowed)
    assert not found, "imports the README's package table forbids:\n" + "\n".join(found)
