#!/usr/bin/env bash
# Build agentworld/terminal-bench, the image `--map-base-images` builds terminal-bench tasks on
# (FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04 or .../python-3-13), without a registry:
# debootstrap Debian trixie (python3 3.13, as uvx -p 3.13 asks) from the host's apt mirror, `docker
# import` it, then Dockerfile.local adds a wheelhouse (wheelhouse.txt, from PyPI), uv, and uv's cache
# filled by the usual test.sh steps (prefill.sh). Needs root (debootstrap) and minutes once; then
# idempotent: skipped while the image's inputs (packages, the files here) are unchanged. The rootfs
# tarball is cached under /var/cache/agentworld. BUILD_CA_BUNDLE: the CA bundle pip and uv trust
# during the build (default the host's, which also covers a TLS-intercepting proxy).
set -euo pipefail

VERSION=1
IMAGE=agentworld/terminal-bench
SUITE=trixie
# Those of the terminal image, curl and wget, and what terminal-bench task Dockerfiles install most
# (python3-pip, build-essential, jq, sqlite3...): present, their `apt-get install` succeeds offline.
# No python-is-python3: most of those Dockerfiles make /usr/bin/python themselves (`ln -s`).
PACKAGES=bash,coreutils,findutils,grep,sed,gawk,git,python3,python3-pip,python3-venv,procps,vim-tiny,nano,\
less,tar,gzip,xz-utils,unzip,file,bc,ncurses-bin,passwd,tmux,asciinema,curl,wget,ca-certificates,jq,\
sqlite3,time,build-essential
# Installed system-wide from the wheelhouse: the test tools of terminal-bench task Dockerfiles.
PREINSTALL="pytest==8.4.1 pandas==2.3.2 scipy==1.16.1 uv==0.9.5"
CACHE_DIR=/var/cache/agentworld
BUILD_CA_BUNDLE="${BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../images/lib.sh
source "$HERE/../images/lib.sh"

KEY=$( (cat "$HERE"/Dockerfile.local "$HERE"/wheelhouse.txt "$HERE"/prefill.sh "$HERE"/uv-env;
    printf '%s|%s|%s' "$SUITE" "$PACKAGES" "$PREINSTALL") | sha256sum | cut -c1-16)
have=$(docker image inspect "$IMAGE:$VERSION" --format '{{index .Config.Labels "agentworld.key"}}' 2>/dev/null || true)
if [[ "$have" == "$KEY" ]]; then
    echo "$IMAGE:$VERSION already built"
    exit 0
fi

ROOTFS_KEY=$(printf '%s|%s' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
# Imported once per rootfs: a new import is a new image, and docker's layer cache would start over.
ROOTFS="$IMAGE-base:$SUITE-$ROOTFS_KEY"
if ! docker image inspect "$ROOTFS" >/dev/null 2>&1; then
    debootstrap_tarball "$SUITE" "$PACKAGES" "$CACHE_DIR/rootfs-$SUITE-$ROOTFS_KEY.tar"
    docker import "$CACHE_DIR/rootfs-$SUITE-$ROOTFS_KEY.tar" "$ROOTFS" >/dev/null
fi

CONTEXT=$(mktemp -d /var/tmp/agentworld-terminal-bench.XXXXXX)
trap 'rm -rf "$CONTEXT"' EXIT
cp "$HERE"/Dockerfile.local "$HERE"/wheelhouse.txt "$HERE"/prefill.sh "$HERE"/uv-env "$CONTEXT/"
cp "$BUILD_CA_BUNDLE" "$CONTEXT/build-ca.crt"
echo "building $IMAGE:$VERSION (pip downloads and uv's cache: minutes once)"
if ! docker build -f "$CONTEXT/Dockerfile.local" --label "agentworld.key=$KEY" \
    --build-arg "ROOTFS=$ROOTFS" --build-arg "PREINSTALL=$PREINSTALL" \
    -t "$IMAGE:$VERSION" -t "$IMAGE:latest" "$CONTEXT" >"$CONTEXT/build.log" 2>&1; then
    tail -n 40 "$CONTEXT/build.log" >&2
    echo "build: docker build of $IMAGE:$VERSION failed (log tail above)" >&2
    exit 1
fi
# The image a rebuild superseded (untagged, ours by its label) is only dead weight on disk.
docker image prune -f --filter "label=agentworld.key" >/dev/null
echo "built $IMAGE:$VERSION"
