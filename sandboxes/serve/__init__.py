"""Any sandbox as an OpenEnv environment: the server (`python -m sandboxes.serve`), its client
(`sandboxes.serve.client.connect`) and the environment adapter they share
(`sandboxes.serve.environment`).

Nothing is imported here: openenv-core loads Gradio when imported (seconds), and the CLI's `--help`
and its refusals should not wait for that. The server's defaults live here for the same reason.
"""

from sandboxes.domains import SPECS

DEFAULT_MAX_SESSIONS = 4
DEFAULT_IDLE_TIMEOUT_S = 300.0  # a session's lease: reclaimed after this long without a call
DEFAULT_MAX_STEPS = 20
# --backend's choices: the isolated backends of every domain that has a choice, never the host.
SERVED_BACKENDS = tuple(dict.fromkeys(backend for spec in SPECS for backend in spec.isolated_backends))
