#!/usr/bin/env bash
# Prepare a Debian 12 machine for development, tests and the demo. Idempotent: every step checks
# before it acts, so `make test` can call it on every run.
#   - system packages: docker engine, bubblewrap, tmux, debootstrap, chromium, python3-doc, manpages,
#     the desktop stack (Xvfb, AT-SPI, applications), openssh-server and QEMU
#   - a running Docker engine (started here when none answers, e.g. in CI or a container)
#   - the terminal sandbox image (built from the host's apt mirror; no registry needed)
#   - .venv with the project and its dev extras
#   - the scale tools: Prism, a Flink distribution and (when Maven Central serves it) Beam's Flink job
#     server; kubeconform, kustomize and offline schemas for the Kubernetes manifests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# chromium: the web sandbox's browser; python3-doc, manpages and mandoc: real documents for the embedded
# web site and search index; nano, bc and file: the terminal suite's tools under bwrap (the host's)
APT_PACKAGES=(docker.io bubblewrap tmux debootstrap procps chromium python3-doc manpages man-db mandoc
    git nodejs python3-pytest nano bc file)
# The OS domain's desktops (Xvfb, AT-SPI and real applications, driven by the system python3 that has
# pyatspi), its remote machines (a real sshd in the tests) and its virtual machines (QEMU).
# Java and Maven: the local Flink cluster and its test job (Go comes with the machine: Debian's is too old).
SCALE_PACKAGES=(openjdk-17-jdk-headless maven)
DESKTOP_PACKAGES=(xvfb openbox xterm x11-apps xdotool at-spi2-core python3-pyatspi gnome-calculator
    dbus-x11 xauth scrot python3-tk python3-xlib python3-pil mousepad openssh-server qemu-system-x86 qemu-utils)
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

apt_updated=0
install_missing() {  # the packages not installed yet, with any extra apt-get options first
    local options=() missing=() pkg
    while [[ $1 == -* ]]; do options+=("$1"); shift; done
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    echo "setup: installing ${missing[*]}"
    ((apt_updated)) || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${options[@]}" "${missing[@]}" >/dev/null
}
install_missing "${APT_PACKAGES[@]}" "${SCALE_PACKAGES[@]}"
# Without recommends: gnome-calculator alone would otherwise bring most of a GNOME desktop.
install_missing --no-install-recommends "${DESKTOP_PACKAGES[@]}"

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
# What --map-base-images builds terminal-bench tasks on (debootstrap, PyPI wheels, uv's cache): minutes once.
bash infra/terminal-bench-image/build.sh
# The OS domain's VM image (debootstrap, Debian's kernel, the desktop stack): minutes once, then cached.
bash infra/desktop-vm/build.sh

# llama.cpp builds with -march=native by default, which turns on AMX where the CPU flags it; on VMs
# that flag AMX without granting its tile state the first batched decode segfaults (in
# ggml_backend_amx_mul_mat). A portable build (AVX2, FMA) serves the tests' 135M model. It is built
# once per version into our own folder, as pip's wheel cache ignores CMAKE_ARGS.
LLAMA_CPP_VERSION=0.3.36
LLAMA_WHEELS=/var/cache/agentworld/wheels/llama-cpp-portable
install_portable_llama_cpp() {
    local wheel=("$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl)
    if [[ ! -f "${wheel[0]}" ]]; then
        echo "setup: compiling llama.cpp $LLAMA_CPP_VERSION without -march=native (3-10 min, once)"
        CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/pip" wheel -q --no-deps --no-cache-dir \
            -w "$LLAMA_WHEELS" "llama-cpp-python==$LLAMA_CPP_VERSION"
        wheel=("$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl)
    fi
    "$VENV/bin/pip" install -q --no-deps --force-reinstall "${wheel[0]}"
}

# Reinstall only when the project's metadata or this script changed since the last install.
stamp="$VENV/.installed-$(cat pyproject.toml infra/setup-host.sh | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    install_portable_llama_cpp  # first, so that the project's install finds it satisfied
    "$VENV/bin/pip" install -q -e ".[dev,llm,bench]"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
# The embedded MCP servers (PyPI and npm, pinned), Appium 3 with its fake driver (npm, pinned) and
# the SWE suite's repositories (PyPI sdists, mutated and committed): idempotent, seconds when there.
"$VENV/bin/python" -m sandboxes.mcp install
"$VENV/bin/python" -m sandboxes.android install
"$VENV/bin/python" -m collectors.swe prepare
# Beam's portable runners and the Kubernetes manifest checks: cached, seconds when there.
bash infra/flink/install.sh
"$VENV/bin/python" infra/k8s/validate.py --setup-only
echo "setup: ready"
