#!/usr/bin/env bash
# Build the project's container images without a registry: Debian root file systems debootstrapped
# from the host's apt mirror (cached tarballs), `docker import`ed, then finished by Dockerfiles whose
# `apt-get` reaches the same mirror and whose `pip`/`npm` reach PyPI/npm.
#
# Usage: sudo bash infra/images/build.sh [NAME...]     (all when no NAME; root for debootstrap)
#        bash infra/images/build.sh --list
# Names (each builds what it derives from first):
#   base          Debian bookworm minbase + python3 (from which the others derive)
#   collector     the project and its Python deps in a venv; entrypoint `collect DOMAIN` =
#                 `python -m collectors.DOMAIN`
#   browser       the collector image (same Dockerfile) + Debian's Chromium + Playwright (web)
#   desktop       the desktop stack + sshd (host key generated here, exported with a known_hosts line)
#   android-host  Node (Debian trixie) + Appium + its fake and UiAutomator2 drivers
#   beam-worker   apache-beam 2.77.0 + the pipeline's requirements + the project + Beam's boot
# Idempotent: an image whose inputs (parent image, Dockerfile, files, build arguments) are unchanged
# is skipped; tags are agentworld/NAME:$VERSION and :latest. Root file systems are cached as tarballs
# and Beam's boot as a binary, in $AGENTWORLD_IMAGE_CACHE (default /var/cache/agentworld/images).
# Environment: MIRROR (Debian mirror; default: the host's apt source), BUILD_CA_BUNDLE (the CA bundle
# pip/npm trust during the build; default the host's, which also covers a TLS-intercepting proxy).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

VERSION=1
ALL=(base collector browser desktop android-host beam-worker)
CACHE="${AGENTWORLD_IMAGE_CACHE:-/var/cache/agentworld/images}"
BUILD_CA_BUNDLE="${BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
BEAM_VERSION=2.77.0
BASE_SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,ca-certificates
# Appium 3 needs Node 20.19+; bookworm has 18, trixie 20.19.
NODE_SUITE=trixie
NODE_PACKAGES=nodejs,ca-certificates
DESKTOP_PACKAGES="openssh-server dbus dbus-x11 at-spi2-core python3-pyatspi python3-xlib python3-pil xvfb \
openbox xauth xterm xdotool scrot gnome-calculator mousepad procps fonts-dejavu-core xkb-data"
COLLECTOR_EXTRAS=llm,mcp,desktop,android,search
# Debian's Chromium for Playwright (never `playwright install`); libatomic1: the node binary inside the
# Playwright wheel (its driver) links it.
BROWSER_PACKAGES="chromium fonts-dejavu-core libatomic1"
PROJECT_PATHS=(pyproject.toml setup.py schemas sandboxes collectors beam_pipelines)
DESKTOP_SSH_PORT=2222  # the port the exported known_hosts line names (docker run -p 127.0.0.1:2222:22)

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi
if [[ "${1:-}" == "--list" ]]; then
    printf '%s\n' "${ALL[@]}"
    exit 0
fi

docker info >/dev/null 2>&1 || {
    echo "build: no Docker engine answers; start one (setsid dockerd &) and retry" >&2
    exit 1
}
[[ -s "$BUILD_CA_BUNDLE" ]] || {
    echo "build: CA bundle $BUILD_CA_BUNDLE is missing (apt-get install ca-certificates, or set BUILD_CA_BUNDLE)" >&2
    exit 1
}
mkdir -p "$CACHE"
START=$(date +%s)
WORK=$(mktemp -d /var/tmp/agentworld-images.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
declare -A DONE=()

# A root file system image (docker import of a cached debootstrap tarball); prints its tag.
rootfs_image() {
    local suite=$1 packages=$2 key tag
    key=$(printf '%s|%s' "$suite" "$packages" | sha256sum | cut -c1-12)
    tag="agentworld/rootfs:$suite-$key"
    if ! docker image inspect "$tag" >/dev/null 2>&1; then
        debootstrap_tarball "$suite" "$packages" "$CACHE/rootfs-$suite-$key.tar" >&2
        docker import "$CACHE/rootfs-$suite-$key.tar" "$tag" >/dev/null
    fi
    echo "$tag"
}

# stage_project DIR PATH...: copy the project's PATHs (no caches) into DIR/project.
stage_project() {
    local dir=$1
    shift
    mkdir -p "$dir/project"
    (cd "$ROOT" && tar -c --exclude=__pycache__ --exclude='*.pyc' "$@") | tar -x -C "$dir/project"
}

# Beam's boot program (the SDK images' ENTRYPOINT), built once from the Go module proxy.
beam_boot() {
    local bin="$CACHE/go/bin-$BEAM_VERSION/container"
    if [[ ! -x "$bin" ]]; then
        # Go's own tarball installs under /usr/local/go, often not on root's PATH.
        [[ -x /usr/local/go/bin/go ]] && PATH="$PATH:/usr/local/go/bin"
        command -v go >/dev/null || {
            echo "build: go is needed to build Beam's boot program (Go 1.2x from go.dev or apt golang)" >&2
            exit 1
        }
        echo "building Beam's boot $BEAM_VERSION with go install (a few minutes once)" >&2
        (cd /tmp && GOBIN="$CACHE/go/bin-$BEAM_VERSION" CGO_ENABLED=0 GOFLAGS=-trimpath \
            go install "github.com/apache/beam/sdks/v2/python/container@v$BEAM_VERSION")
    fi
    echo "$bin"
}

# docker_build NAME CONTEXT DOCKERFILE [--build-arg ...]: build unless an image with the same input
# key exists. The key hashes the context (content, names, modes) and the build arguments.
docker_build() {
    local name=$1 context=$2 dockerfile=$3
    shift 3
    local image="agentworld/$name:$VERSION" key have began
    key=$( (cd "$context" && tar -c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner .;
        printf '%s\n' "$dockerfile" "$@") | sha256sum | cut -c1-16)
    have=$(docker image inspect "$image" --format '{{index .Config.Labels "agentworld.key"}}' 2>/dev/null || true)
    if [[ "$have" == "$key" ]]; then
        docker tag "$image" "agentworld/$name:latest"
        echo "[images] $image up to date"
        return 1
    fi
    began=$(date +%s)
    echo "[images] building $image"
    if ! docker build -q --label "agentworld.key=$key" -f "$context/$dockerfile" "$@" \
        -t "$image" -t "agentworld/$name:latest" "$context" >"$WORK/$name.log" 2>&1; then
        tail -n 40 "$WORK/$name.log" >&2
        echo "build: docker build of $image failed (log tail above)" >&2
        exit 1
    fi
    echo "[images] built $image in $(($(date +%s) - began)) s ($(docker image inspect "$image" \
        --format '{{.Size}}' | awk '{printf "%d MB", $1 / 1048576}'))"
}

# The desktop image's host key, exported for clients: host_key.pub and a known_hosts line for
# 127.0.0.1:$DESKTOP_SSH_PORT, in $CACHE/desktop/$VERSION.
export_desktop_host_key() {
    local out="$CACHE/desktop/$VERSION" pub
    mkdir -p "$out"
    pub=$(docker run --rm --network none --entrypoint cat "agentworld/desktop:$VERSION" \
        /etc/ssh/ssh_host_ed25519_key.pub)
    echo "$pub" >"$out/host_key.pub"
    echo "[127.0.0.1]:$DESKTOP_SSH_PORT $(echo "$pub" | cut -d' ' -f1,2)" >"$out/known_hosts"
    echo "[images] desktop host key: $out/host_key.pub, $out/known_hosts"
}

build() {
    local name=$1 ctx="$WORK/$1" rootfs
    [[ -n "${DONE[$name]:-}" ]] && return 0
    case "$name" in
    collector | browser | desktop | beam-worker) build base ;;
    esac
    mkdir -p "$ctx"
    case "$name" in
    base)
        rootfs=$(rootfs_image "$BASE_SUITE" "$BASE_PACKAGES")
        cp "$HERE"/base/* "$ctx/"
        docker_build base "$ctx" Dockerfile --build-arg "ROOTFS=$rootfs" || true
        ;;
    collector | browser)
        cp "$HERE/collector/Dockerfile" "$HERE/collector/collect" "$ctx/"
        cp "$BUILD_CA_BUNDLE" "$ctx/build-ca.crt"
        chmod 755 "$ctx/collect"
        stage_project "$ctx" "${PROJECT_PATHS[@]}"
        mkdir -p "$ctx/project-meta"
        cp "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ctx/project-meta/"
        local extras=$COLLECTOR_EXTRAS packages=""
        if [[ $name == browser ]]; then
            extras+=,web
            packages=$BROWSER_PACKAGES
        fi
        docker_build "$name" "$ctx" Dockerfile --build-arg "BASE=agentworld/base:$VERSION" \
            --build-arg "EXTRAS=$extras" --build-arg "SYSTEM_PACKAGES=$packages" || true
        ;;
    desktop)
        cp "$HERE"/desktop/* "$ctx/"
        chmod 755 "$ctx/entrypoint.sh"
        if docker_build desktop "$ctx" Dockerfile --build-arg "BASE=agentworld/base:$VERSION" \
            --build-arg "PACKAGES=$DESKTOP_PACKAGES" || [[ ! -s "$CACHE/desktop/$VERSION/known_hosts" ]]; then
            export_desktop_host_key
        fi
        ;;
    android-host)
        rootfs=$(rootfs_image "$NODE_SUITE" "$NODE_PACKAGES")
        cp "$HERE"/android-host/* "$ctx/"
        cp "$BUILD_CA_BUNDLE" "$ctx/build-ca.crt"
        # The pins the host's `python -m sandboxes.android install` uses, read from its source.
        local install="$ROOT/sandboxes/android/install.py" appium drivers
        appium=$(sed -nE 's/^APPIUM_VERSION = "([^"]+)"/\1/p' "$install")
        drivers=$(sed -nE 's/^(FAKE_DRIVER|UIAUTOMATOR2_DRIVER) = "([^"]+)"/\2/p' "$install" | tr '\n' ' ')
        [[ -n "$appium" && -n "$drivers" ]] || {
            echo "build: cannot read the Appium pins from $install" >&2
            exit 1
        }
        docker_build android-host "$ctx" Dockerfile --build-arg "ROOTFS=$rootfs" \
            --build-arg "APPIUM_VERSION=$appium" --build-arg "DRIVERS=$drivers" || true
        ;;
    beam-worker)
        cp "$ROOT/infra/beam-worker/Dockerfile.local" "$ROOT/infra/beam-worker/requirements.txt" "$ctx/"
        cp "$BUILD_CA_BUNDLE" "$ctx/build-ca.crt"
        cp "$(beam_boot)" "$ctx/boot"
        stage_project "$ctx" pyproject.toml setup.py schemas beam_pipelines
        docker_build beam-worker "$ctx" Dockerfile.local --build-arg "BASE=agentworld/base:$VERSION" || true
        ;;
    *)
        echo "build: unknown image '$name'; choose from: ${ALL[*]}" >&2
        exit 2
        ;;
    esac
    DONE[$name]=1
}

for name in "${@:-${ALL[@]}}"; do
    build "$name"
done
# Images a rebuild superseded (untagged, ours by their label) are only dead weight on disk.
docker image prune -f --filter "label=agentworld.key" >/dev/null
echo "[images] done in $(($(date +%s) - START)) s: $(docker images 'agentworld/*' --format '{{.Repository}}:{{.Tag}}' \
    | grep ":$VERSION$" | grep -v rootfs | sort | tr '\n' ' ')"
