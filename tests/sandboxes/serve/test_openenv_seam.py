"""sandboxes/serve/ uses openenv-core through its public seam only: no attribute whose name starts with
`_` of an openenv class (or of any openenv class it inherits from) is overridden, called or read, and
nothing private is imported. Read from the source (AST), against openenv's own installed source, so
an upgrade that adds private names is checked too."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path

SERVE = Path(__file__).resolve().parents[3] / "sandboxes" / "serve"
# openenv's EnvClient opens its WebSocket with no way to add a header, so the client's token handshake
# reads these of its attributes (its connect() replaced whole). The server side has no such exception.
CLIENT_EXCEPTIONS = {"client.py": {"_ws", "_ws_url", "_connect_timeout", "_max_message_size"}}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def openenv_classes(source: str) -> list[type]:
    """The openenv classes a module imports by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "openenv":
            module = importlib.import_module(node.module)
            found += [getattr(module, a.name) for a in node.names if inspect.isclass(getattr(module, a.name))]
    return found


def private_names(classes: list[type]) -> set[str]:
    """Every private name defined by these classes and the openenv classes they inherit from: their
    methods, class attributes and the `self._x` attributes their methods set or read."""
    names: set[str] = set()
    owners = {base for cls in classes for base in cls.__mro__ if base.__module__.split(".")[0] == "openenv"}
    for owner in owners:
        names |= {name for name in vars(owner) if _private(name)}
        tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                if node.value.id in ("self", "cls"):
                    names.add(node.attr)
    return names


def touches(source: str, private: set[str]) -> list[str]:
    """Where `source` overrides, calls or reads one of `private`, or imports a private openenv name:
    "line: name" each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in private:
            found.append((node.lineno, node.name))  # an override, when its class inherits openenv's
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args[1:]:
            name = node.args[1]
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and isinstance(
                name, ast.Constant
            ):
                if name.value in private:
                    found.append((node.lineno, name.value))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "openenv":
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            found += [(node.lineno, part) for part in parts if _private(part)]
    return [f"{line}: {name}" for line, name in sorted(found)]


def test_the_check_finds_overrides_calls_reads_and_private_imports() -> None:
    from openenv.core.env_server import HTTPEnvServer

    private = private_names([HTTPEnvServer])
    assert {"_create_session", "_sessions", "_run_in_session_executor", "_reap_idle_sessions"} <= private
    source = textwrap.dedent(
        """
        from openenv.core.env_server.http_server import _make_json_serializable
        class Pool(HTTPEnvServer):
            async def _create_session(self):
                return await super()._create_session()
            def table(self):
                return self._sessions, getattr(self, "_session_info"), self._mine
        """
    )
    assert touches(source, private) == [
        "2: _make_json_serializable",
        "4: _create_session",
        "5: _create_session",
        "7: _session_info",
        "7: _sessions",
    ]
    assert touches("class Mine:\n    def _own(self):\n        return self._state\n", private) == []


def test_sandboxes_serve_touches_no_private_name_of_openenv() -> None:
    files = sorted(SERVE.glob("*.py"))
    sources = {path.name: path.read_text() for path in files}
    classes = [cls for source in sources.values() for cls in openenv_classes(source)]
    assert any(cls.__name__ == "HTTPEnvServer" for cls in classes), "the server is built on HTTPEnvServer"
    private = private_names(classes)
    found = {}
    for name, source in sources.items():
        allowed = CLIENT_EXCEPTIONS.get(name, set())
        hits = [hit for hit in touches(source, private) if hit.split(": ")[1] not in allowed]
        if hits:
            found[name] = hits
    assert found == {}, f"private names of openenv used: {found}"
