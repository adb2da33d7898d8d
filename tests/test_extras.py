"""Each extra of pyproject.toml declares every third-party import of the code it serves, and installs.

Which code an extra serves is `SERVES` below (the rest is the base install). Its needs are read from
the source (tests/import_graph.py): every import of its own modules, function-local ones included,
and the module-level imports of any other extra's modules that loading them pulls in. A function-local
import of another extra's module is an optional feature (`--policy llm` needs the llm extra) and is
left to that extra. Each import must come from a distribution that the extra or the base declares;
relying on one that a dependency happens to bring is how `jinja2` went missing from `corpus`.

Then each extra is installed for real: our wheel with that extra into a fresh virtual environment
(uv, hard links from its cache, so torch costs seconds once cached), where every module it serves
must import and every import it needs must be found.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from collections import defaultdict
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import pytest

from tests.import_graph import ROOT, imports, module_files, target

OURS = ("schemas", "sandboxes", "collectors", "beam_pipelines", "training")
# Module prefix -> the extra that serves it; a module under none of them is the base install's ("").
SERVES = {
    "collectors.importers": "importers",
    "schemas.chat_tokens": "corpus",
    "schemas.base_files": "corpus",  # also the training extra's: both declare transformers and gguf
    "beam_pipelines": "corpus",
    "collectors.policies.llm": "llm",
    "training": "training",
    "sandboxes.terminal": "terminal",
    "collectors.terminal": "terminal",
    "sandboxes.web": "web",
    "collectors.web": "web",
    "sandboxes.search": "search",
    "collectors.search": "search",
    "sandboxes.mcp": "mcp",
    "collectors.mcp": "mcp",
    "sandboxes.desktop": "desktop",
    "collectors.desktop": "desktop",
    "sandboxes.android": "android",
    "collectors.android": "android",
    "sandboxes.serve": "serve",
}
# Run on other interpreters than ours: the desktop guest on the desktop's own python3 with its system
# packages (pyatspi is not on PyPI), the Harbor task loader on .venv-harbor's Python 3.12 (harbor needs it).
GUESTS = ("sandboxes.desktop.guest", "sandboxes.harbor.load_task")
BROUGHT_BY_THE_HOST = {"vllm"}  # CUDA-only: supported where a GPU host installs it, never required
# Extras that serve no module of ours: an fsspec protocol each.
PROTOCOLS = {"s3": "s3", "gcs": "gs"}
EXTRAS = (
    "",
    "terminal",
    "llm",
    "corpus",
    "training",
    "web",
    "search",
    "mcp",
    "desktop",
    "android",
    "serve",
    "importers",
    "s3",
    "gcs",
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Mapping) -> dict[str, set[str]]:
    """Extra ("" for the base install) -> the distributions it installs by name, the base's included."""

    def names(requirements: list[str]) -> set[str]:
        found = (re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r) for r in requirements)
        return {canonical(m.group()) for m in found if m}

    project = pyproject["project"]
    base = names(project["dependencies"])
    extras = {extra: base | names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    return {"": base, **extras}


def owner(module: str) -> str | None:
    """The extra that serves `module` ("" for the base), None for the desktop guest's code."""
    if any(module == guest or module.startswith(guest + ".") for guest in GUESTS):
        return None
    prefixes = [p for p in SERVES if module == p or module.startswith(p + ".")]
    return SERVES[max(prefixes, key=len)] if prefixes else ""


def needed_imports(extra: str, modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Top-level third-party name -> our modules that import it, for what `extra` serves.

    Its own modules count whole; another extra's modules that they load (a module-level import, or
    the package above one) count with their module-level imports. The base's modules are the base's
    to check."""
    needed: dict[str, set[str]] = defaultdict(set)
    whole: set[str] = set()
    loaded: set[str] = set()
    todo = [module for module in modules if owner(module) == extra]

    def load(module: str) -> None:
        serves = owner(module)
        if serves == extra:
            todo.append(module)
        elif serves and module not in loaded:
            loaded.add(module)
            todo.append(module)

    while todo:
        module = todo.pop()
        own = owner(module) == extra
        if own:
            if module in whole:
                continue
            whole.add(module)
        parts = module.split(".")
        for package in (".".join(parts[:i]) for i in range(1, len(parts))):
            if package in modules:
                load(package)  # importing a module runs the packages above it
        for found in imports(module, modules[module]):
            if found.lazy and not own:
                continue
            top = found.source.split(".")[0]
            if top in OURS:
                loads = target(modules, found)
                if loads and not (found.lazy and owner(loads) != extra):
                    load(loads)
            elif (
                top not in sys.stdlib_module_names and top != "__future__" and top not in BROUGHT_BY_THE_HOST
            ):
                needed[top].add(module)
    return needed


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return module_files(ROOT, OURS)


@pytest.fixture(scope="module")
def extras() -> dict[str, set[str]]:
    return declared(tomllib.loads((ROOT / "pyproject.toml").read_text()))


# --- the reading, on a made-up package -------------------------------------------------------------


def test_an_extra_needs_its_own_imports_and_what_its_modules_load(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "__init__.py").write_text("")
    (tmp_path / "training" / "fit.py").write_text(
        "import numpy\nfrom collectors.policies import llm\n\n\ndef report():\n"
        "    import jinja2\n    from collectors.policies.llm import LlmPolicy\n"
    )
    (tmp_path / "collectors" / "policies").mkdir(parents=True)
    (tmp_path / "collectors" / "__init__.py").write_text("import json\n")
    (tmp_path / "collectors" / "policies" / "__init__.py").write_text("import tqdm\n")
    (tmp_path / "collectors" / "policies" / "llm.py").write_text(
        "import openai\n\n\ndef later():\n    import httpx\n"
    )
    found = needed_imports("training", module_files(tmp_path, ["training", "collectors"]))
    # openai: llm.py is loaded at module level; httpx only in its function; tqdm is the base's.
    assert dict(found) == {
        "numpy": {"training.fit"},
        "jinja2": {"training.fit"},
        "openai": {"collectors.policies.llm"},
    }


def test_requirements_are_read_by_name() -> None:
    pyproject = {
        "project": {
            "dependencies": ["pyarrow>=15,<26", "fsspec"],
            "optional-dependencies": {"web": ["Playwright==1.65.2"], "dev": ["agentworld-data[web]", "ruff"]},
        }
    }
    found = declared(pyproject)
    assert found[""] == {"pyarrow", "fsspec"} and found["web"] == {"pyarrow", "fsspec", "playwright"}


# --- our extras -----------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [e for e in EXTRAS if e not in PROTOCOLS], ids=lambda e: e or "base")
def test_every_import_an_extra_needs_is_declared(
    extra: str, modules: dict[str, Path], extras: dict[str, set[str]]
) -> None:
    providers = metadata.packages_distributions()
    problems = []
    for name, importers in sorted(needed_imports(extra, modules).items()):
        distributions = {canonical(d) for d in providers.get(name, [])}
        if not distributions & extras[extra]:
            source = ", ".join(sorted(distributions)) or "no installed distribution"
            problems.append(f"{name} (from {source}), imported by {', '.join(sorted(importers))}")
    assert not problems, f"extra {extra or '(base)'!r} does not declare what it imports:\n" + "\n".join(
        problems
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our wheel, built once through an sdist (so the sdist is checked too)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([uv(), "build", "--quiet", "--out-dir", str(out), str(ROOT)], check=True, timeout=600)
    (built,) = out.glob("*.whl")
    return built


@pytest.mark.packaging
def test_the_wheel_holds_every_file_of_our_packages(wheel: Path) -> None:
    """Data files included (task suites, the Android fake driver's apps): code reads them through
    importlib.resources, which finds nothing that package-data left out."""
    inside = set(zipfile.ZipFile(wheel).namelist())
    files = (path.relative_to(ROOT).as_posix() for package in OURS for path in (ROOT / package).rglob("*"))
    left_out = [
        name
        for name in files
        if (ROOT / name).is_file()
        and "__pycache__" not in name
        and not name.endswith(".md")
        and name not in inside
    ]
    assert not left_out, f"missing from {wheel.name} (add them to package-data in pyproject.toml): {left_out}"


def uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as exc:
        raise AssertionError(
            "uv is missing from the test environment: pip install 'agentworld-data[dev]'"
        ) from exc
    return find_uv_bin()


# llama-cpp-python comes as an sdist; `make setup` builds its wheel once into this folder
# (infra/setup-host.sh). uv would compile it again for every fresh venv (5 minutes): our registry
# answers without cache headers, so uv's built-wheel cache never matches.
LLAMA_WHEELS = Path("/var/cache/agentworld/wheels/llama-cpp-portable")


def installed(wheel: Path, extra: str, where: Path) -> str:
    """Run uv to make a fresh venv at `where` with the wheel and `extra`; its python."""
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(where)], check=True, timeout=120)
    python = str(where / "bin" / "python")
    requirement = f"{wheel}[{extra}]" if extra else str(wheel)
    find_links = ["--find-links", str(LLAMA_WHEELS)] if LLAMA_WHEELS.is_dir() else []
    done = subprocess.run(
        [uv(), "pip", "install", "--quiet", "--python", python, *find_links, requirement],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, f"installing {requirement} failed:\n{done.stderr[-4000:]}"
    return python


CHECK = """
import importlib, importlib.util, json, sys, traceback
import fsspec
failed = {}
for module in MODULES:
    try:
        importlib.import_module(module)
    except Exception:
        failed[module] = traceback.format_exc(limit=-3)
missing = [name for name in NAMES if importlib.util.find_spec(name) is None]
for protocol in PROTOCOLS:
    try:
        fsspec.get_filesystem_class(protocol)
    except Exception as exc:
        failed["fsspec:" + protocol] = repr(exc)
print(json.dumps({"failed": failed, "missing": missing}))
"""


@pytest.mark.packaging
@pytest.mark.timeout(1800)  # a first run downloads each extra's wheels (torch's several GB) into uv's cache
@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: e or "base")
def test_an_extra_installs_alone_and_its_modules_import(
    extra: str, wheel: Path, modules: dict[str, Path], tmp_path: Path
) -> None:
    python = installed(wheel, extra, tmp_path / "venv")
    served = sorted(m for m in modules if owner(m) == extra)
    if extra in PROTOCOLS:
        assert not served
    else:
        assert served, f"extra {extra!r} serves no module"
    program = (
        f"MODULES = {served!r}\nNAMES = {sorted(needed_imports(extra, modules))!r}\n"
        f"PROTOCOLS = {[PROTOCOLS[extra]] if extra in PROTOCOLS else []!r}\n{CHECK}"
    )
    # Run outside the checkout, so that imports come from the installed wheel.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [python, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"failed": {}, "missing": []}, json.dumps(result, indent=2)[:6000]
