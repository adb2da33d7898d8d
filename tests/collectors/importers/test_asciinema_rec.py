"""A recording made by asciinema itself: `asciinema rec --stdin` (the asciinema 2.x CLI from PyPI, the dev
extra) runs inside our bwrap terminal sandbox's tmux pane, the sandbox types the session's keys into it,
and the imported recording's screens must equal the sandbox's own observations of the same keys."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from collectors.importers.asciinema import IMPORTER
from collectors.importers.base import ImportContext, SourceRow
from sandboxes.terminal import TerminalConfig, TerminalSandbox, keystrokes_action, make_backend
from sandboxes.terminal.backends import RC_IN_SANDBOX
from schemas.records import Task
from tests.collectors.importers.test_asciinema import SESSION


def _asciinema_package() -> Path:
    spec = importlib.util.find_spec("asciinema")
    if spec is None or spec.origin is None:
        pytest.fail("asciinema is not installed: pip install -e '.[dev]' (the dev extra pins asciinema 2.x)")
    return Path(spec.origin).parent


@pytest.mark.bwrap
@pytest.mark.tmux
def test_a_real_asciinema_recording_imports_to_the_sandbox_screens() -> None:
    # The sandbox shows nothing of the host but its system directories: the asciinema package
    # (pure Python) is shown read-only at its own path (`ro_paths`), wherever the checkout is, and
    # the sandbox's python3 runs it from there. The recorded shell uses the sandbox's rc file, so
    # the sandbox still sees each prompt; its prompt numbers start above the outer shell's, which
    # the sandbox waits past.
    package = _asciinema_package()
    record = (
        f"clear; PYTHONPATH={package.parent} __aw_n=100 python3 -m asciinema rec --stdin -q"
        f" -c 'bash --noprofile --rcfile {RC_IN_SANDBOX} -i' ~/session.cast"
    )
    backend = make_backend("bwrap", ro_paths=(str(package),))
    sandbox = TerminalSandbox(TerminalConfig(backend=backend, width=80, height=12))
    try:
        sandbox.reset(Task(id="asciinema-rec"))
        first = sandbox.step(keystrokes_action([(record, 0.2), ("Enter", 10.0)])).observation
        assert first.text == "agent@sandbox:~$", f"asciinema did not start the recorded shell:\n{first.text}"
        observations = [sandbox.step(keystrokes_action(items)).observation for items in SESSION]
        # Leaving the recorded shell ends the recording; the outer shell's prompt comes back.
        sandbox.step(keystrokes_action([("exit", 0.2), ("Enter", 3.0)]))
        home = sandbox._live.instance.home  # the sandbox's home folder, as the host sees it
        content = Path(os.path.join(home, "session.cast")).read_bytes()
    finally:
        sandbox.close()

    context = ImportContext(dataset="asciinema-rec", version="", license="", collector_version="", host="")
    episode = IMPORTER.convert(SourceRow(row_id="session.cast", data=content), context)
    assert content.startswith(b'{"version": 2, "width": 80, "height": 12')
    assert episode.initial.text == first.text
    # The last imported step is the `exit` that ended the recording.
    assert [turn.observation.text for turn in episode.turns[:-1]] == [o.text for o in observations]
    assert [
        [item["keystrokes"] for item in turn.action.arguments["keystrokes"]] for turn in episode.turns
    ] == [
        *([keys for keys, _ in items] for items in SESSION),
        ["exit", "Enter"],
    ]
