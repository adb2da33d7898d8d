#!/usr/bin/env bash
# Run at image build time, with network: the verify-time steps of real tests/test.sh scripts, so that
# uv's cache (UV_CACHE_DIR) holds what they resolve and install. Then each is run again offline
# (UV_OFFLINE=1, PIP_NO_INDEX=1, as the sandbox runs them): the build fails if one still needs a network.
set -euo pipefail
work=$(mktemp -d)
cd "$work"
steps=(
    "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --version"
    "uvx -p 3.13 -w pytest==8.4.1 pytest --version"
    "uvx --with pytest==8.4.1 pytest --version"
    "uvx -p 3.13 -w pytest==8.3.4 pytest --version"
)
project() {  # terminal-bench 1's shape: a throwaway uv project with pytest added
    rm -rf "$work/project" && mkdir "$work/project" && cd "$work/project"
    uv init -q && uv add -q pytest==8.4.1 && uv run pytest --version
    cd "$work"
}
for step in "${steps[@]}"; do $step; done
project
export UV_OFFLINE=1 PIP_NO_INDEX=1
for step in "${steps[@]}"; do $step; done
project
pip install -q --break-system-packages pytest==8.4.1 pandas==2.3.2 scipy==1.16.1
rm -rf "$work"
