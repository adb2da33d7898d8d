#!/usr/bin/env bash
# What Harbor task folders need, idempotent and quick when there:
#   - bash-static and busybox-static: the Harbor verifier runs test.sh with these, copied into the
#     container after the agent's processes are gone (sandboxes/harbor/verifier.py), never with the
#     container's own bash or timeout, which the agent may have replaced;
#   - .venv-harbor: a Python 3.12 venv with harbor==0.25.0, whose own task model reads Harbor task
#     folders (harbor needs Python >= 3.12; the project's venv is 3.11).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

missing=()
for pkg in bash-static busybox-static; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
VENV=${HARBOR_VENV:-.venv-harbor}
PIN=harbor==0.25.0

if "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("harbor") != "0.25.0")' 2>/dev/null; then
    exit 0
fi
PY=""
# pyenv's shim is on PATH even where no 3.12 is selected: try each candidate, keep the first that runs.
for candidate in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12*/bin/python; do
    if [[ -x "$candidate" ]] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
        PY=$candidate
        break
    fi
done
if [[ -z "$PY" ]]; then
    echo "setup: no Python 3.12 found (python3.12 on PATH or pyenv's 3.12); Harbor task folders need one" >&2
    exit 1
fi
echo "setup: making $VENV with $PIN from $PY"
"$PY" -m venv "$VENV"
echo '*' >"$VENV/.gitignore"  # not the project's to track, like .venv
"$VENV/bin/pip" install -q "$PIN"
