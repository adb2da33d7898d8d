#!/usr/bin/env bash
# Build the terminal sandbox image without a registry: debootstrap a Debian bookworm rootfs from
# the host's own apt mirror, `docker import` it, then add the agent user with Dockerfile.local.
# Idempotent: exits at once when agentworld/terminal:$VERSION exists; the rootfs tarball is cached
# under /var/cache/agentworld so a rebuild after `docker rmi` takes seconds, not minutes.
set -euo pipefail

VERSION=3
IMAGE=agentworld/terminal
BASE_IMAGE=agentworld/terminal-base
SUITE=bookworm
PACKAGES=bash,coreutils,findutils,grep,sed,gawk,git,python3,python3-pytest,python-is-python3,procps,vim-tiny,nano,less,tar,gzip,file,bc,ncurses-bin,passwd,tmux
CACHE_DIR=/var/cache/agentworld
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if docker image inspect "$IMAGE:$VERSION" >/dev/null 2>&1; then
    docker tag "$IMAGE:$VERSION" "$IMAGE:latest"
    echo "$IMAGE:$VERSION already built"
    exit 0
fi

# The mirror comes from the host's apt configuration (infra/images/lib.sh, shared by the image builds).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../images" && pwd)/lib.sh"
MIRROR="${MIRROR:-$(host_mirror)}"

# The cache key covers everything that changes the rootfs content.
KEY=$(printf '%s|%s|%s' "$SUITE" "$PACKAGES" "$VERSION" | sha256sum | cut -c1-12)
TARBALL="$CACHE_DIR/rootfs-$SUITE-$KEY.tar"
mkdir -p "$CACHE_DIR"

if [[ ! -s "$TARBALL" ]]; then
    ROOTFS=$(mktemp -d /var/tmp/agentworld-rootfs.XXXXXX)
    trap 'rm -rf "$ROOTFS"' EXIT
    echo "debootstrap $SUITE from $MIRROR into $ROOTFS"
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR"
    # Package lists and caches are dead weight in the image.
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log
    tar -C "$ROOTFS" -c . >"$TARBALL.partial"
    mv "$TARBALL.partial" "$TARBALL"
fi

docker import "$TARBALL" "$BASE_IMAGE:$VERSION"
docker build -q -f "$HERE/Dockerfile.local" --build-arg "BASE=$BASE_IMAGE:$VERSION" \
    -t "$IMAGE:$VERSION" "$HERE"
docker tag "$IMAGE:$VERSION" "$IMAGE:latest"
echo "built $IMAGE:$VERSION"
