"""Public agent-trajectory datasets into our trajectory schema, one module per format.

    python -m collectors.importers FORMAT --input PATH_OR_URI --out DATASET_ROOT

Each format module (`collectors/importers/<format>.py`) defines `IMPORTER`, an `Importer` (see
`base`). The formats are listed in `FORMATS`; their modules load only when used.
"""

from __future__ import annotations

import importlib

from collectors.importers.base import Importer

# FORMAT argument -> module under collectors.importers (which cites the format's documentation).
FORMATS = {
    "swe_agent": "swe_agent",  # nebius/SWE-agent-trajectories rows
    "swe_agent_traj": "swe_agent_traj",  # SWE-agent's own .traj files
    "openhands": "openhands",  # OpenHands / SWE-Gym trajectories
    "openai_chat": "openai_chat",  # generic OpenAI-format chat logs with tool calls
    "toucan": "toucan",  # MCP tool use, Agent-Ark/Toucan-1.5M
    "mind2web": "mind2web",  # Mind2Web: raw HTML with actions
    "android_control": "android_control",  # AndroidControl: accessibility trees and actions
    "asciinema": "asciinema",  # asciinema v2 .cast recordings, replayed through pyte
    "atif": "atif",  # Harbor's ATIF trajectory.json files (and our export-atif output)
}


def load_importer(name: str) -> Importer:
    if name not in FORMATS:
        raise KeyError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")
    module = importlib.import_module(f"collectors.importers.{FORMATS[name]}")
    return module.IMPORTER
