#!/usr/bin/env bash
# Prepare a Debian 12 machine for development, tests and the demo. Idempotent: every step checks
# before it acts, so `make test` can call it on every run.
#   - system packages: docker engine, bubblewrap, tmux, debootstrap, chromium, python3-doc, manpages
#   - a running Docker engine (started here when none answers, e.g. in CI or a container)
#   - the terminal sandbox image (built from the host's apt mirror; no registry needed)
#   - .venv with the project and its dev extras
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# chromium: the web sandbox's browser; python3-doc, manpages and mandoc: real documents for the embedded
# web site and search index
APT_PACKAGES=(docker.io bubblewrap tmux debootstrap procps chromium python3-doc manpages man-db mandoc
    git nodejs python3-pytest)
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# NodeSource's nodejs carries npm; Debian's does not (its npm package conflicts with NodeSource's).
if ! command -v npm >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd"
    (setsid dockerd >/var/log/agentworld-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start; see /var/log/agentworld-dockerd.log" >&2; exit 1; }
fi

bash infra/terminal-image/build.sh

# Reinstall only when the project's metadata changed since the last install.
stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e ".[dev,llm,bench]"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
# The embedded MCP servers (PyPI and npm, pinned) and the SWE suite's repositories (PyPI sdists,
# mutated and committed): both idempotent, seconds when already there.
"$VENV/bin/python" -m sandboxes.mcp install
"$VENV/bin/python" -m collectors.swe prepare
echo "setup: ready"
