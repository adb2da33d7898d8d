#!/usr/bin/env bash
# Build the separate virtualenv the web latency benchmark runs BrowserGym in.
# browsergym-core pins an old Playwright (1.44), so it can never share the project venv.
# Idempotent: an existing venv with browsergym-core importable is left alone.
# No browser is downloaded (never `playwright install`): the benchmark points it at /usr/bin/chromium.
set -euo pipefail
VENV="${BROWSERGYM_VENV:-/var/tmp/agentworld-browsergym-venv}"
VERSION="${BROWSERGYM_VERSION:-0.14.3}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import browsergym.core" 2>/dev/null; then
    echo "browsergym venv ready: $VENV"
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "browsergym-core==$VERSION"
"$VENV/bin/python" -c "import browsergym.core, playwright; print('browsergym venv ready:', '$VENV')"
