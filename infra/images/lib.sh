# Shell shared by the image builds (infra/images/build.sh, infra/terminal-image/build.sh,
# infra/desktop-vm/build.sh). Source it; it defines functions only.

# The Debian mirror from the host's apt configuration, so that no registry host is written in the
# build scripts. $MIRROR, when set, wins. Exits with a message when none is configured.
host_mirror() {
    if [[ -n "${MIRROR:-}" ]]; then
        echo "$MIRROR"
        return
    fi
    local uri=""
    if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
        uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources | grep -v security \
            | awk '{print $2}' | head -n1 || true)
    fi
    if [[ -z "$uri" && -f /etc/apt/sources.list ]]; then
        uri=$(grep -E '^deb[[:space:]]' /etc/apt/sources.list | grep -v security \
            | sed -E 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}' | head -n1 || true)
    fi
    if [[ -z "$uri" ]]; then
        echo "build: no Debian mirror found in /etc/apt/sources.list(.d); set MIRROR=..." >&2
        exit 1
    fi
    echo "$uri"
}

# debootstrap_tarball SUITE PACKAGES TARBALL: a minbase rootfs of SUITE with PACKAGES (comma list), as
# a tar file. Skipped when TARBALL exists; written under a temporary name and renamed, so a present
# tarball is complete. Needs root (debootstrap).
debootstrap_tarball() {
    local suite=$1 packages=$2 tarball=$3 mirror rootfs
    [[ -s "$tarball" ]] && return 0
    if [[ $EUID -ne 0 ]]; then
        echo "build: debootstrap needs root; run the build with sudo" >&2
        exit 1
    fi
    command -v debootstrap >/dev/null || {
        echo "build: debootstrap is missing (apt-get install debootstrap)" >&2
        exit 1
    }
    mirror=$(host_mirror)
    mkdir -p "$(dirname "$tarball")"
    rootfs=$(mktemp -d /var/tmp/agentworld-rootfs.XXXXXX)
    echo "debootstrap $suite from $mirror into $rootfs (minutes)"
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" \
        >"$rootfs.log" 2>&1; then
        tail -n 30 "$rootfs.log" >&2
        for m in proc sys dev/pts dev; do umount -l "$rootfs/$m" 2>/dev/null || true; done
        rm -rf "$rootfs" "$rootfs.log"
        echo "build: debootstrap $suite failed (log tail above)" >&2
        exit 1
    fi
    # Package lists, downloaded .debs, documentation and logs are dead weight in an image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
    tar -C "$rootfs" -c . >"$tarball.partial"
    mv "$tarball.partial" "$tarball"
    rm -rf "$rootfs" "$rootfs.log"
}
