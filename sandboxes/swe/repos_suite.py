"""The embedded SWE suite: small pure-Python projects whose sdists ship their own tests.

Each was checked here (`python -m collectors.swe prepare --all --check`): the sdist downloads, its
tests pass with Debian's python3 and python3-pytest 7 and nothing else, without the network, in a few
seconds. `source` lists where the mutation step may edit (the package, not its tests or data tables).
Commands run from the repository root; `PYTHONPATH=src` puts a src/ layout on the path the way an
installed package would be (pytest 7.2's `-o pythonpath=src` fails without an ini file), `-o addopts=`
drops options that need plugins (coverage) Debian lacks.
"""

from __future__ import annotations

from typing import Any

from sandboxes.swe.mutation import DEFAULT_TEST_COMMAND as PYTEST

SRC_PYTEST = ("env", "PYTHONPATH=src", *PYTEST)
NO_ADDOPTS = ("-o", "addopts=")


def _entry(
    name: str, version: str, args: tuple[str, ...], source: tuple[str, ...], timeout: float = 60.0
) -> dict[str, Any]:
    src_layout = all(path.startswith("src/") for path in source)
    return {
        "name": name,
        "version": version,
        "test_command": (SRC_PYTEST if src_layout else PYTEST) + args,
        "test_timeout_s": timeout,
        "source": source,
    }


EMBEDDED_SUITE: list[dict[str, Any]] = [
    _entry("appdirs", "1.4.4", ("test",), ("appdirs.py",)),
    _entry("cachetools", "5.3.3", ("tests",), ("src/cachetools",)),
    _entry("colorama", "0.4.6", ("colorama/tests",), ("colorama",)),
    _entry("idna", "3.7", ("tests",), ("idna/core.py", "idna/codec.py", "idna/intranges.py")),
    _entry("inflection", "0.5.1", ("test_inflection.py",), ("inflection",)),
    _entry("isodate", "0.7.2", ("tests",), ("src/isodate",)),
    _entry("jmespath", "1.0.1", ("tests",), ("jmespath",)),
    _entry("json5", "0.9.25", ("tests",), ("json5/lib.py", "json5/parser.py")),
    _entry("munch", "4.0.0", ("tests",), ("munch",)),
    _entry("ordered-set", "4.1.0", ("test",), ("ordered_set",)),
    _entry("parse", "1.20.1", ("tests",), ("parse.py",)),
    _entry("pathspec", "0.12.1", ("tests",), ("pathspec",)),
    _entry("pyflakes", "3.2.0", ("pyflakes/test",), ("pyflakes/checker.py", "pyflakes/messages.py")),
    _entry("schema", "0.7.7", ("test_schema.py",), ("schema.py",)),
    _entry("semver", "3.0.2", (*NO_ADDOPTS, "tests"), ("src/semver",)),
    _entry("six", "1.16.0", ("test_six.py",), ("six.py",)),
    _entry("tabulate", "0.9.0", ("test",), ("tabulate",)),
    _entry("termcolor", "2.4.0", ("tests",), ("src/termcolor",)),
    _entry("text-unidecode", "1.3", ("test_unidecode.py",), ("src/text_unidecode",)),
    _entry("unidecode", "1.3.8", ("tests",), ("unidecode/__init__.py", "unidecode/util.py")),
    _entry("voluptuous", "0.14.2", (*NO_ADDOPTS, "voluptuous/tests"), ("voluptuous",)),
    _entry("wcwidth", "0.2.13", (*NO_ADDOPTS, "tests"), ("wcwidth/wcwidth.py",)),
    _entry("webcolors", "1.13", ("tests",), ("src/webcolors",)),
    _entry("xmltodict", "0.13.0", ("tests",), ("xmltodict.py",)),
]
